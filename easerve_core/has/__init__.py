"""Hybrid Auto Selection (HAS): pick a deployment for a model, workload and rate.

Stage 1 (:mod:`~easerve_core.has.screen`) enumerates the GPU allocations
that fit (:mod:`~easerve_core.has.space`) and drops those whose weakest
stage cannot carry the target rate. Stage 2 (:mod:`~easerve_core.has.objective`)
is an Optuna objective over the survivors' allocation, encode batch B and
remote-prefill fraction s, each trial scored by an injected evaluator
(``Deployment -> goodput``; the simulator's lives in ``sim.evaluate``),
climbing from short streams to long ones (:mod:`~easerve_core.has.ladder`);
:mod:`~easerve_core.has.recheck` re-runs the best few on longer streams
before the pick.
:mod:`~easerve_core.has.results` turns a study into tables. This package is
pure: Optuna, numpy and pandas only. Running a search, with its study in an
Optuna storage (so it resumes after a crash and scales out to many
workers), is the runtime's: :mod:`runtime.has`. Background: docs/has.md.
"""

from easerve_core.has.ladder import SINGLE_RUNG, Ladder, LadderEvaluator, Verdict
from easerve_core.has.objective import Evaluator, Objective, Seen, short_key
from easerve_core.has.recheck import RECHECK_COLUMNS, Rechecked, ranked, recheck, recheck_frame, recheck_seed
from easerve_core.has.results import best_deployment, top_k, trials_frame, trials_to_reach
from easerve_core.has.screen import (
    AllocationCapacity,
    Candidate,
    ScreenReport,
    allocation_capacity,
    memory_need,
    screen,
    typical_shape,
)
from easerve_core.has.space import (
    Allocation,
    MemoryNeed,
    SearchSpace,
    deployment_key,
    enumerate_allocations,
    local_prefill_fits,
)
from easerve_core.has.trials import SURPLUS, finished_trials

__all__ = [
    "RECHECK_COLUMNS",
    "SINGLE_RUNG",
    "SURPLUS",
    "Allocation",
    "AllocationCapacity",
    "Candidate",
    "Evaluator",
    "Ladder",
    "LadderEvaluator",
    "MemoryNeed",
    "Objective",
    "Rechecked",
    "ScreenReport",
    "SearchSpace",
    "Seen",
    "Verdict",
    "allocation_capacity",
    "best_deployment",
    "deployment_key",
    "enumerate_allocations",
    "finished_trials",
    "local_prefill_fits",
    "memory_need",
    "ranked",
    "recheck",
    "recheck_frame",
    "recheck_seed",
    "screen",
    "short_key",
    "top_k",
    "trials_frame",
    "trials_to_reach",
    "typical_shape",
]
