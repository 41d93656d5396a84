"""The plan table's cross-check: every band holds the best of the table's deployments at its rate.

Pure, like the controller it feeds (docs/controller.md, "Evaluation"): the
caller injects the score (the simulator's goodput on fresh request streams).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from easerve_core import checks
from easerve_core.controller import Band, PlanTable
from easerve_core.deployment import Deployment, SMSharing


def cross_check(table: PlanTable, score: Callable[[Deployment, float], float], *,
                tie_frac: float = 0.02) -> tuple[PlanTable, list[dict[str, Any]]]:
    """The table with every band holding the best, at its own rate, of the table's deployments.

    HAS plans each band on its own search streams; a deployment planned for
    one rate is often as good at a neighbour's, and a short search can leave a
    band with the weaker of two. ``score(deployment, rate_hz)`` (higher is
    better: the caller's goodput on fresh request streams) judges every
    distinct deployment of the table (its rate hint set to the band's rate, as
    it would serve there) at every band's rate. Candidates within ``tie_frac``
    of a band's best score are tied (at a light load every deployment's
    goodput is the offered rate). Bands are settled from the top down, and a
    tie goes to the candidate with the allocation of the band above's choice
    (moving between the two then re-roles no GPU), then to the one that scores
    best at the band above's rate (headroom for a controller that reacts
    late), then to the band's own, then to the lower band's. Returns the new
    table and one row per band and candidate.
    """
    checks.fraction("tie_frac", tie_frac)
    distinct = list(dict.fromkeys(b.deployment.with_(rate_hint_hz=None) for b in table.bands))
    bands = table.bands
    hinted = [[d if b.deployment.rate_hint_hz is None else d.with_(rate_hint_hz=b.rate_hz) for d in distinct]
              for b in bands]
    scores = [[float(score(d, b.rate_hz)) for d in row] for b, row in zip(bands, hinted, strict=True)]
    picks: dict[int, int] = {}
    for i in reversed(range(len(bands))):
        own = bands[i].deployment.with_(rate_hint_hz=None)
        top = max(scores[i])
        tied = [k for k in range(len(distinct)) if scores[i][k] >= top - tie_frac * abs(top)]
        above = picks.get(i + 1)

        def preference(k: int, i: int = i, own: Deployment = own,
                       above: int | None = above) -> tuple[Any, ...]:
            if above is None:
                return (False, 0.0, distinct[k] == own, -k)
            return (_allocation(distinct[k]) == _allocation(distinct[above]), scores[i + 1][k],
                    distinct[k] == own, -k)

        picks[i] = max(tied, key=preference)
    rows = [{"band": i, "rate_hz": b.rate_hz, "candidate": k, "deployment": hinted[i][k].label(),
             "score": scores[i][k], "own": distinct[k] == b.deployment.with_(rate_hint_hz=None),
             "chosen": k == picks[i]}
            for i, b in enumerate(bands) for k in range(len(distinct))]
    chosen = tuple(Band(rate_hz=b.rate_hz, deployment=hinted[i][picks[i]]) for i, b in enumerate(bands))
    return PlanTable(chosen), rows


def _allocation(d: Deployment) -> tuple[Any, ...]:
    """What a move between two deployments re-roles GPUs for: the workers, where, and whether
    the encode GPUs hold the LM (sim.roster's slots)."""
    return (d.encode, d.prefill, d.decode, d.placement, d.sm_sharing is SMSharing.NONE)
