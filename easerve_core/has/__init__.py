"""Hybrid Auto Selection (HAS): pick a deployment for a model, workload and rate.

Stage 1 (:mod:`~easerve_core.has.screen`) enumerates the GPU allocations
that fit (:mod:`~easerve_core.has.space`) and drops those whose weakest
stage cannot carry the target rate. Stage 2 (:mod:`~easerve_core.has.search`)
runs an Optuna study over the survivors' allocation, encode batch B and
remote-prefill fraction s, each trial scored by an injected evaluator
(``Deployment -> goodput``; the simulator's lives in ``sim.evaluate``),
climbing from short streams to long ones (:mod:`~easerve_core.has.ladder`);
:mod:`~easerve_core.has.recheck` re-runs the best few on longer streams
before the pick.
Studies live in an Optuna storage (:mod:`~easerve_core.has.storage`), so a
search resumes after a crash and scales out to many workers.
:mod:`~easerve_core.has.results` turns a study into tables. This package is
pure: Optuna, numpy and pandas only. Background: docs/has.md.
"""

from easerve_core.has.ladder import SINGLE_RUNG, Ladder, LadderEvaluator, Verdict
from easerve_core.has.objective import Evaluator, Objective, short_key
from easerve_core.has.recheck import RECHECK_COLUMNS, Rechecked, recheck, recheck_frame, recheck_seed
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
from easerve_core.has.search import SAMPLERS, SearchSettings, make_sampler, run_search
from easerve_core.has.space import (
    Allocation,
    MemoryNeed,
    SearchSpace,
    deployment_key,
    enumerate_allocations,
    local_prefill_fits,
)
from easerve_core.has.storage import (
    MEMORY,
    SURPLUS,
    finished_trials,
    normalize_url,
    open_storage,
    prepare_study,
)

__all__ = [
    "MEMORY",
    "RECHECK_COLUMNS",
    "SAMPLERS",
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
    "SearchSettings",
    "SearchSpace",
    "Verdict",
    "allocation_capacity",
    "best_deployment",
    "deployment_key",
    "enumerate_allocations",
    "finished_trials",
    "local_prefill_fits",
    "make_sampler",
    "memory_need",
    "normalize_url",
    "open_storage",
    "prepare_study",
    "recheck",
    "recheck_frame",
    "recheck_seed",
    "run_search",
    "screen",
    "short_key",
    "top_k",
    "trials_frame",
    "trials_to_reach",
    "typical_shape",
]
