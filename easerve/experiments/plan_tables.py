"""The controller's plan tables on the simulator: HAS per band, the GPU-frugal planner, the cross-check.

docs/controller.md, "Evaluation": each band is searched on streams one
segment long (:func:`phase_plan_table`) or on the fewest GPUs that serve it
(:func:`frugal_plan_table`), then cross-checked (:func:`cross_checked_table`:
:func:`easerve_core.plan_check.cross_check` with the simulator's goodput as
the score). :func:`throughput_ceiling` is the evidence tool of
``easerve controller-eval --ceiling``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from easerve.experiments.choose import choose
from easerve.experiments.setup import Setup, run
from easerve.experiments.sweep import SegmentLength, Sweep
from easerve_core import Deployment
from easerve_core.controller import Band, PlanTable
from easerve_core.has import SearchSpace
from easerve_core.has.screen import screen
from easerve_core.plan_check import cross_check
from runtime.parallel import IN_PROCESS, Backend, run_tasks

#: the cross-check's request streams: fresh, neither HAS's (1000 on) nor the evaluation's (0 on)
CROSS_CHECK_SEEDS = (2000, 2001)


def segment_requests(rate_hz: float, segment_s: float) -> int:
    """Requests in a stream one segment long at ``rate_hz`` (at least 20): the sweep's
    :class:`~easerve.experiments.sweep.SegmentLength` rule."""
    return SegmentLength(segment_s=segment_s).requests_at(rate_hz)


def phase_plan_table(setup: Setup, rates_hz: Sequence[float], *, segment_s: float, trials: int,
                     num_samples: int = 1, seed: int = 0, num_requests: int | None = None,
                     backend: Backend = IN_PROCESS) -> PlanTable:
    """HAS at each of ``rates_hz`` (:func:`~easerve.experiments.choose.choose`, ``trials`` TPE
    trials), each band searched on ``num_samples`` streams one segment long (``rate x
    segment_s`` requests; ``num_requests`` when given): a band's deployment serves a phase, and
    an overloaded phase's queue grows over all of it, which a shorter stream does not show. One
    study per task."""
    tasks = [partial(choose, setup, rate_hz=r, trials=trials, seed=seed, num_samples=num_samples,
                     num_requests=num_requests or segment_requests(r, segment_s)) for r in rates_hz]
    choices = run_tasks(backend, tasks)
    return PlanTable(tuple(Band(rate_hz=r, deployment=c.deployment)
                           for r, c in zip(rates_hz, choices, strict=True)))


def frugal_plan_table(setup: Setup, rates_hz: Sequence[float], *, segment_s: float, trials: int,
                      num_samples: int = 1, seed: int = 0, tie_frac: float = 0.02,
                      backend: Backend = IN_PROCESS) -> tuple[PlanTable, pd.DataFrame]:
    """Each band on the fewest GPUs that serve it (the GPU-frugal planner, docs/controller.md).

    HAS (:func:`~easerve.experiments.choose.choose`) at each of ``rates_hz`` on
    every GPU count of the cluster (allocations of exactly that many GPUs, the
    others idle: released to other work), on streams one segment long, the
    same streams for every count; a count on which no allocation carries the
    rate (HAS would plan for a lower one) is skipped. A band takes the fewest
    GPUs whose best goodput is within ``tie_frac`` of the best count's.
    Returns the table and one row per band and count.
    """
    keys = [(r, k) for r in rates_hz for k in range(1, setup.plan.cluster.num_gpus + 1)]
    tasks = [partial(_choice_on, setup, rate_hz=r, num_gpus=k, trials=trials, seed=seed,
                     num_samples=num_samples, num_requests=segment_requests(r, segment_s)) for r, k in keys]
    choices = dict(zip(keys, run_tasks(backend, tasks), strict=True))
    bands, rows = [], []
    for r in rates_hz:
        found = {k: c for (rate, k), c in choices.items() if rate == r and c is not None}
        if not found:
            raise ValueError(f"rate: no GPU count of the cluster carries {r:g} req/s")
        best = max(c.best_goodput_rps for c in found.values())
        pick = min(k for k, c in found.items() if c.best_goodput_rps >= best - tie_frac * abs(best))
        bands.append(Band(rate_hz=r, deployment=found[pick].deployment))
        rows += [{"rate_hz": r, "num_gpus": k, "deployment": c.deployment.label(),
                  "best_goodput_rps": c.best_goodput_rps, "chosen": k == pick} for k, c in found.items()]
    return PlanTable(tuple(bands)), pd.DataFrame(rows)


def _choice_on(setup: Setup, *, rate_hz: float, num_gpus: int, **budget: Any) -> Any:
    """HAS's choice at ``rate_hz`` on ``num_gpus`` GPUs, or None when they carry it on no allocation."""
    try:
        choice = choose(setup, rate_hz=rate_hz, num_gpus=num_gpus, **budget)
    except ValueError:
        return None
    return choice if choice.planned_rate_hz >= rate_hz else None


def cross_checked_table(setup: Setup, table: PlanTable, *, segment_s: float,
                        seeds: Sequence[int] = CROSS_CHECK_SEEDS, tier: str = "moderate",
                        fewer_gpus_first: bool = False) -> tuple[PlanTable, pd.DataFrame]:
    """:func:`easerve_core.plan_check.cross_check` on the simulator: a deployment's score at a
    rate is its mean goodput (``tier``) over ``seeds``' streams of one segment at that rate, its
    batcher told the rate hint it carries. Returns the table and the scores (one row per band
    and candidate)."""
    score = partial(segment_goodput, setup, segment_s=segment_s, seeds=seeds, tier=tier)
    checked, rows = cross_check(table, score, fewer_gpus_first=fewer_gpus_first)
    return checked, pd.DataFrame(rows)


def segment_goodput(setup: Setup, deployment: Deployment, rate_hz: float, *, segment_s: float,
                    seeds: Sequence[int] = CROSS_CHECK_SEEDS, tier: str = "moderate") -> float:
    """The cross-check's score: ``deployment``'s mean goodput (``tier``) over ``seeds``' streams
    one segment long at ``rate_hz``, its batcher told the rate hint it carries: a
    :class:`~easerve.experiments.sweep.Sweep` of ``seeds`` at one rate."""
    slo = setup.slos[tier]
    sweep = Sweep(length=SegmentLength(segment_s=segment_s), seeds=tuple(seeds), keep_hint=True)
    return sweep.mean_goodput(setup, deployment, rate_hz, slo)


def throughput_ceiling(setup: Setup, *, need_rps: float, rate_hz: float, num_requests: int = 2000,
                       seed: int = 5) -> pd.DataFrame:
    """How many requests/s the best deployments finish when offered more than they carry.

    Every point of HAS's grid (B and s) on every allocation whose screened
    capacity carries ``need_rps`` (the screen is optimistic: it prices the
    typical request and no queueing) is run at ``rate_hz`` (above what any of
    them carries); its throughput is the requests finished between the 20th
    percentile of arrivals and the last arrival, over that span (the queue is
    full by then, so the workers never idle). Sorted, highest first.
    """
    report = screen(setup.profile, setup.plan.cluster, setup.mix, rate_hz=need_rps,
                    slo=setup.slos["moderate"])
    space = SearchSpace(allocations=report.survivor_allocations, base=setup.deployment)
    rows = []
    for label, batch, s in space.grid():
        deployment = space.deployment(label, batch, s)
        rec = run(setup, deployment, rate_hz=rate_hz, num_requests=num_requests, seed=seed).records
        arrivals, finishes = rec["arrival_s"].to_numpy(), rec["finish_s"].to_numpy()
        lo, hi = float(np.percentile(arrivals, 20)), float(arrivals.max())
        done = int(((finishes > lo) & (finishes <= hi)).sum())
        rows.append({"deployment": deployment.label(), "throughput_rps": done / (hi - lo)})
    return pd.DataFrame(rows).sort_values("throughput_rps", ascending=False, kind="stable",
                                          ignore_index=True)
