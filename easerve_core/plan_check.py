"""The plan table's cross-check: every band holds the best of the table's deployments at its rate.

Pure, like the controller it feeds (docs/controller.md, "Evaluation"): the
caller injects the score (the simulator's goodput on fresh request streams).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    rates = [b.rate_hz for b in table.bands]
    checked, rows = cross_check_bands(table, lambda d, i: score(d, rates[i]), rates, tie_frac=tie_frac,
                                      fewer_gpus_first=fewer_gpus_first)
    return checked, [{k: v for k, v in row.items() if k != "phase_rate_hz"} for row in rows]


def cross_check_bands(table: PlanTable, score: Callable[[Deployment, int], float],
                      rates_hz: Sequence[float], *, tie_frac: float = 0.02, fewer_gpus_first: bool = False,
                      fewest_moves: bool = False) -> tuple[PlanTable, list[dict[str, Any]]]:
    """:func:`cross_check` for any signal: band ``i`` is a workload the caller judges,
    ``score(deployment, i)``, offered at ``rates_hz[i]`` requests/s.

    For a table planned along a mix signal (a band's level is tokens, not a
    rate: the shifts of docs/controller.md) each band is a phase, its own mix
    at its own rate; the candidates are told every band's request rate
    (``rates_hz``), and the rules of :func:`cross_check` pick, with the
    nearness of a candidate's hint measured to ``rates_hz[i]``. A rate table
    is the case ``rates_hz`` = the bands' rates. With ``fewest_moves`` a tie
    goes first of all to the candidate tied with the best in the most bands:
    a deployment that serves every phase as well as its own pick needs no
    move, and a move that buys nothing measurable still costs a drain and a
    warm-up (a phase's goodput saturates at its offered rate, so two
    deployments that both carry it tie). Rows carry ``rate_hz`` (the band's
    level) and ``phase_rate_hz``.
    """
    checks.fraction("tie_frac", tie_frac)
    bands = table.bands
    if len(rates_hz) != len(bands):
        raise ValueError(f"rates_hz: one rate per band ({len(bands)}), got {len(rates_hz)}")
    candidates = list(dict.fromkeys(
        told for b in bands for told in ([b.deployment] if b.deployment.rate_hint_hz is None
                                         else [b.deployment.with_(rate_hint_hz=r) for r in rates_hz])))
    scores = [[float(score(d, i)) for d in candidates] for i in range(len(bands))]
    ties = [{k for k, x in enumerate(row) if x >= max(row) - tie_frac * abs(max(row))} for row in scores]
    picks: dict[int, int] = {}
    for i in reversed(range(len(bands))):
        rank = partial(_preference, candidates, scores, picks.get(i + 1), i, bands[i], rates_hz[i])
        first = partial(_first, candidates, ties, fewer_gpus_first, fewest_moves)
        picks[i] = max(ties[i], key=partial(_key, first, rank))
    rows = [{"band": i, "rate_hz": b.rate_hz, "phase_rate_hz": rates_hz[i], "candidate": k,
             "deployment": d.label(), "told_hz": d.rate_hint_hz, "num_gpus": d.num_gpus,
             "score": scores[i][k], "own": d == b.deployment, "chosen": k == picks[i]}
            for i, b in enumerate(bands) for k, d in enumerate(candidates)]
    chosen = tuple(Band(rate_hz=b.rate_hz, deployment=candidates[picks[i]]) for i, b in enumerate(bands))
    return PlanTable(chosen, signal=table.signal), rows


def _key(first: Callable[[int], tuple[int, ...]], rank: Callable[[int], tuple[Any, ...]],
         k: int) -> tuple[Any, ...]:
    return (*first(k), *rank(k))


def _first(candidates: list[Deployment], ties: list[set[int]], fewer_gpus_first: bool, fewest_moves: bool,
           k: int) -> tuple[int, ...]:
    """The options' keys that come before :func:`_preference` (greater wins)."""
    return ((-candidates[k].num_gpus,) if fewer_gpus_first else ()) + \
        ((sum(k in t for t in ties),) if fewest_moves else ())


def _preference(candidates: list[Deployment], scores: list[list[float]], above: int | None, i: int,
                band: Band, rate_hz: float, k: int) -> tuple[Any, ...]:
    """Candidate ``k``'s rank among band ``i``'s tied ones (greater wins; see :func:`cross_check`)."""
    d = candidates[k]
    nearness = 0.0 if d.rate_hint_hz is None else -abs(d.rate_hint_hz - rate_hz)
    if above is None:
        return (False, False, 0.0, d == band.deployment, nearness, -k)
    return (k == above, _allocation(d) == _allocation(candidates[above]), scores[i + 1][k],
            d == band.deployment, nearness, -k)


def _allocation(d: Deployment) -> tuple[Any, ...]:
    """What a move between two deployments re-roles GPUs for: the workers, where, and whether
    the encode GPUs hold the LM (sim.roster's slots)."""
    return (d.encode, d.prefill, d.decode, d.placement, d.sm_sharing is SMSharing.NONE)
