"""The plan table's cross-check: every band holds the best of the table's deployments at its rate.

Pure, like the controller it feeds (docs/controller.md, "Evaluation"): the
caller injects the score (the simulator's goodput on fresh request streams).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from easerve_core import checks
from easerve_core.controller import Band, PlanTable
from easerve_core.deployment import Deployment, SMSharing


def cross_check(table: PlanTable, score: Callable[[Deployment, float], float], *,
                tie_frac: float = 0.02, fewer_gpus_first: bool = False
                ) -> tuple[PlanTable, list[dict[str, Any]]]:
    """The table with every band holding the best, at its own rate, of the table's deployments.

    HAS plans each band on its own search streams; a deployment planned for
    one rate is often as good at a neighbour's, and a short search can leave a
    band with the weaker of two. The candidates are the table's distinct
    deployments, each told (its batcher's rate hint) every rate of the
    table's bands: the hint is a knob like B (it sets the adaptive batcher's
    gap threshold), and the rate a deployment serves best told need not be
    the rate it serves. A deployment without a hint (a fixed batcher) is one
    candidate. ``score(deployment, rate_hz)`` (higher is better: the caller's
    goodput on fresh request streams, the deployment's hint kept) judges
    every candidate at every band's rate.

    Candidates within ``tie_frac`` of a band's best score are tied (at a
    light load every deployment's goodput is the offered rate). Bands are
    settled from the top down, and a tie goes, in order, to the band above's
    choice itself (a move between the two bands then changes nothing), to a
    candidate with its allocation (the move re-roles no GPU), to the one that
    scores best at the band above's rate (headroom for a controller that
    reacts late), to the band's own deployment, to the one told the rate
    nearest the band's, and to the earlier candidate; with
    ``fewer_gpus_first`` (a table planned for the fewest GPUs that serve
    each band), first of all to the candidate on the fewest GPUs. Returns
    the new table and one row per band and candidate.
    """
    checks.fraction("tie_frac", tie_frac)
    bands = table.bands
    rates = [b.rate_hz for b in bands]
    candidates = list(dict.fromkeys(
        told for b in bands for told in ([b.deployment] if b.deployment.rate_hint_hz is None
                                         else [b.deployment.with_(rate_hint_hz=r) for r in rates])))
    scores = [[float(score(d, b.rate_hz)) for d in candidates] for b in bands]
    picks: dict[int, int] = {}
    for i in reversed(range(len(bands))):
        top = max(scores[i])
        tied = [k for k in range(len(candidates)) if scores[i][k] >= top - tie_frac * abs(top)]
        rank = partial(_preference, candidates, scores, picks.get(i + 1), i, bands[i])
        picks[i] = max(tied, key=(lambda k, rank=rank: (-candidates[k].num_gpus, rank(k)))
                       if fewer_gpus_first else rank)
    rows = [{"band": i, "rate_hz": b.rate_hz, "candidate": k, "deployment": d.label(),
             "told_hz": d.rate_hint_hz, "num_gpus": d.num_gpus, "score": scores[i][k],
             "own": d == b.deployment, "chosen": k == picks[i]}
            for i, b in enumerate(bands) for k, d in enumerate(candidates)]
    chosen = tuple(Band(rate_hz=b.rate_hz, deployment=candidates[picks[i]]) for i, b in enumerate(bands))
    return PlanTable(chosen), rows


def _preference(candidates: list[Deployment], scores: list[list[float]], above: int | None, i: int,
                band: Band, k: int) -> tuple[Any, ...]:
    """Candidate ``k``'s rank among band ``i``'s tied ones (greater wins; see :func:`cross_check`)."""
    d = candidates[k]
    nearness = 0.0 if d.rate_hint_hz is None else -abs(d.rate_hint_hz - band.rate_hz)
    if above is None:
        return (False, False, 0.0, d == band.deployment, nearness, -k)
    return (k == above, _allocation(d) == _allocation(candidates[above]), scores[i + 1][k],
            d == band.deployment, nearness, -k)


def _allocation(d: Deployment) -> tuple[Any, ...]:
    """What a move between two deployments re-roles GPUs for: the workers, where, and whether
    the encode GPUs hold the LM (sim.roster's slots)."""
    return (d.encode, d.prefill, d.decode, d.placement, d.sm_sharing is SMSharing.NONE)
