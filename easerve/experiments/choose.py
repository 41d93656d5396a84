"""HAS inside the evaluation: the EAServe deployment per modality, and convergence.

:func:`choose` screens the modality's cluster at the target rate and runs a
TPE search on the simulator, exactly as ``easerve search`` does, with the
setup's own profile (so a what-if profile gets its own deployment). When no
allocation survives the screen at the target rate, it steps down a ladder of
rates and says so: the report shows the rate HAS could plan for.
:func:`convergence` runs TPE and random search over several seeds and the
exhaustive grid once, and returns the best-so-far curves. Both are made of
independent tasks (a whole study; one grid point) that run on a backend
(:mod:`easerve_core.parallel`), each study on one job, so a result does not
depend on where it ran. A study is held in memory (``storage="memory:"``)
unless a storage is given: the same trials as an SQLite file, without a
database round trip per trial.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial

import optuna
import pandas as pd

from easerve.experiments.setup import Setup
from easerve_core import Deployment
from easerve_core.has import (
    MEMORY,
    ScreenReport,
    SearchSettings,
    SearchSpace,
    best_deployment,
    run_search,
    screen,
    trials_frame,
)
from easerve_core.parallel import IN_PROCESS, Backend, run_tasks
from easerve_core.plan import replan
from sim.evaluate import SimEvaluator, make_evaluator

RATE_LADDER_HZ = (8.0, 6.0, 5.0, 4.0, 3.0, 2.5, 2.0, 1.5, 1.0, 0.75, 0.5, 0.25)


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    modality: str
    deployment: Deployment
    planned_rate_hz: float
    requested_rate_hz: float
    num_candidates: int
    num_survivors: int
    best_goodput_rps: float
    trials: pd.DataFrame


def _space(setup: Setup, rate_hz: float, tier: str) -> tuple[ScreenReport, SearchSpace]:
    report = screen(setup.profile, setup.plan.cluster, setup.mix, rate_hz=rate_hz,
                    slo=setup.slos[tier])
    base = setup.deployment.with_(rate_hint_hz=rate_hz)
    return report, SearchSpace(allocations=report.survivor_allocations, base=base)


#: HAS draws its request streams from seeds far from the evaluation's (0, 1, 2, ...),
#: so a deployment is chosen on other requests than those it is judged on
HAS_SEED_OFFSET = 1000


def _evaluator(setup: Setup, *, rate_hz: float, tier: str, num_requests: int,
               num_samples: int) -> SimEvaluator:
    """Goodput at ``rate_hz`` on HAS's own request streams (the same for every study and seed)."""
    plan = replan(setup.plan, seed=HAS_SEED_OFFSET, slo=setup.slos[tier])
    return make_evaluator(plan, setup.profile, rate_hz=rate_hz, num_requests=num_requests,
                          num_samples=num_samples)


def _study(setup: Setup, space: SearchSpace, *, rate_hz: float, tier: str, sampler: str,
           trials: int, seed: int, num_requests: int, storage: str,
           num_samples: int = 1) -> pd.DataFrame:
    """One study; ``seed`` seeds the sampler, the request streams are the same for every seed."""
    evaluator = _evaluator(setup, rate_hz=rate_hz, tier=tier, num_requests=num_requests,
                           num_samples=num_samples)
    name = (f"{setup.modality}-{tier}-r{rate_hz:g}-{sampler}-seed{seed}-n{num_requests}"
            f"x{num_samples}-t{trials}")
    settings = SearchSettings(sampler=sampler, num_trials=trials, seed=seed, storage=storage,
                              study_name=name)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return trials_frame(run_search(space, evaluator, settings))


def choose(setup: Setup, *, rate_hz: float, tier: str = "moderate", trials: int = 30,
           seed: int = 0, num_requests: int = 250, num_samples: int = 1,
           storage: str | None = None) -> Choice:
    """The TPE-chosen EAServe deployment for ``setup`` at ``rate_hz`` (or the next feasible rate)."""
    ladder = [rate_hz] + [r for r in RATE_LADDER_HZ if r < rate_hz]
    last_error: ValueError | None = None
    for rate in ladder:
        try:
            report, space = _space(setup, rate, tier)
        except ValueError as exc:  # nothing carries this rate: plan for a lower one
            last_error = exc
            continue
        frame = _study(setup, space, rate_hz=rate, tier=tier, sampler="tpe", trials=trials,
                       seed=seed, num_requests=num_requests, storage=storage or MEMORY,
                       num_samples=num_samples)
        return Choice(modality=setup.modality, deployment=best_deployment(frame),
                      planned_rate_hz=rate, requested_rate_hz=rate_hz,
                      num_candidates=len(report.candidates), num_survivors=len(report.survivors),
                      best_goodput_rps=float(frame["goodput_rps"].max()), trials=frame)
    raise ValueError(f"{setup.modality}: no allocation carries even {ladder[-1]} req/s "
                     f"({last_error})")


def convergence(setup: Setup, *, rate_hz: float, tier: str = "moderate", trials: int = 30,
                seeds: Sequence[int] = (0, 1, 2), num_requests: int = 250, num_samples: int = 1,
                storage: str | None = None, backend: Backend = IN_PROCESS,
                grid_batches: Sequence[int] | None = None) -> tuple[pd.DataFrame, float]:
    """Best-so-far curves of TPE and random per seed, and the exhaustive grid's best.

    ``grid_batches`` replaces the grid's B values (default: the space's,
    :data:`easerve_core.has.space.GRID_BATCHES`).

    Each study is one task on ``backend`` (default: this process), held in
    that process's memory unless ``storage`` is given; so is each grid
    point. The grid's best is the best goodput over every distinct point of
    :meth:`SearchSpace.grid`, judged by the same evaluator: what the ``grid``
    sampler's study finds, without an Optuna trial (and a read of the whole
    study) per point.
    """
    _report, space = _space(setup, rate_hz, tier)
    if grid_batches is not None:
        space = replace(space, grid_batches=tuple(grid_batches))
    studies = [(sampler, seed) for sampler in ("tpe", "random") for seed in seeds]
    tasks = [partial(_curve, setup, space, rate_hz=rate_hz, tier=tier, sampler=sampler, trials=trials,
                     seed=seed, num_requests=num_requests, num_samples=num_samples, storage=storage)
             for sampler, seed in studies]
    evaluator = _evaluator(setup, rate_hz=rate_hz, tier=tier, num_requests=num_requests,
                           num_samples=num_samples)
    tasks += [partial(evaluator, space.deployment(*point)) for point in space.grid()]
    done = run_tasks(backend, tasks)
    grid = pd.Series(done[len(studies):], dtype=float)
    return pd.concat(done[:len(studies)], ignore_index=True), float(grid.max())


def _curve(setup: Setup, space: SearchSpace, *, rate_hz: float, tier: str, sampler: str, trials: int,
           seed: int, num_requests: int, num_samples: int, storage: str | None) -> pd.DataFrame:
    """One study's best-so-far curve (trial 1, 2, ...), in ``storage`` or in memory."""
    f = _study(setup, space, rate_hz=rate_hz, tier=tier, sampler=sampler, trials=trials, seed=seed,
               num_requests=num_requests, storage=storage or MEMORY, num_samples=num_samples)
    return pd.DataFrame({"modality": setup.modality, "sampler": sampler, "seed": seed,
                         "trial": range(1, len(f) + 1), "best_goodput_rps": f["best_so_far_rps"]})
