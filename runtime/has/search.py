"""HAS stage 2: search allocation, B and s with Optuna, resumably, in parallel.

One objective (:mod:`easerve_core.has.objective`) serves every sampler: it
suggests ``alloc`` (categorical over
the survivors), ``B`` (int, log scale) and ``s`` (float in [0, 1]; not
where the space fixes it), and ``timeout_s`` (log scale) where the space
has a timeout range, builds
the deployment (s clamped to what the allocation allows) and asks the
injected evaluator for its goodput. A deployment already evaluated in the
study is not evaluated again: its value is reused (the trial still counts).
With a ladder (:class:`SearchSettings`'s ``ladder``) a trial climbs from a
short stream to the full one and successive halving prunes the weaker
trials on the way (:mod:`easerve_core.has.ladder`); a pruned trial counts
toward the plan like a complete one.

Samplers (:data:`SAMPLERS`): ``tpe`` (seeded, multivariate, constant liar),
``random`` and ``grid``, the exhaustive baseline: every distinct point of
:meth:`SearchSpace.grid` is enqueued once and run; ``num_trials`` does not
apply to it.

:func:`run_search` opens the storage, resumes the study (stale RUNNING trials
become FAIL, COMPLETE and ladder-PRUNED ones are kept) and runs only the remainder as
``num_workers`` jobs that each open the same storage and call
``study.optimize``: in this process for one job, else on a backend
(:mod:`runtime.parallel`): by default a local pool, whose workers die
with the process that started them, or the Ray tasks of a given backend,
which coordinate through the storage alone (an RDB server or a journal on a
shared path when the tasks run on other machines). Each job seeds its
sampler from (seed, trials already in the study, job index), whichever
process runs it: a fresh study with one job is reproducible; a resumed one
does not replay its first points.

When every job has returned and the study still holds fewer finished
trials than planned, a trial was lost: left RUNNING or FAIL by an error
Optuna absorbed (a storage retry, a value it would not store, such as
NaN). The remainder runs again, as a rerun would, up to
:data:`MAX_TOP_UPS` times, each told as a notice (not for the grid, whose
points are enqueued once, nor for a joined worker, whose peers run the
rest). The study returned is read afresh from the storage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import optuna
from optuna.pruners import NopPruner
from optuna.samplers import BaseSampler, RandomSampler, TPESampler
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from easerve_core import checks
from easerve_core.has.ladder import Ladder
from easerve_core.has.objective import Evaluator, Objective
from easerve_core.has.space import SearchSpace
from easerve_core.has.trials import finished_trials
from runtime.has.seen import SeenTrials
from runtime.has.storage import MEMORY, normalize_url, open_storage, prepare_study
from runtime.parallel import Backend, BackendSettings, open_backend

Progress = Callable[[int, int], None]
SAMPLERS = ("tpe", "random", "grid")
#: rounds run again for trials lost in a round (see :func:`run_search`)
MAX_TOP_UPS = 2


def make_sampler(name: str, *, seed: int, tpe_startup_trials: int = 10) -> BaseSampler:
    """The sampler called ``name`` (the grid's points are enqueued; it samples nothing)."""
    checks.one_of("sampler", name, SAMPLERS)
    if name == "tpe":
        return TPESampler(seed=seed, multivariate=True, constant_liar=True,
                          n_startup_trials=tpe_startup_trials)
    return RandomSampler(seed=seed)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSettings:
    """How to run one search (see the module docstring).

    Args:
        sampler: ``tpe``, ``random`` or ``grid``.
        num_trials: COMPLETE trials the study must hold at the end (not for grid).
        seed: seeds the samplers.
        storage: an Optuna storage URL or path (:mod:`runtime.has.storage`).
        study_name: the study in the storage; a rerun with the same name resumes.
        num_workers: processes on this machine; 1 runs in this process.
        tpe_startup_trials: random trials before TPE models the space.
        poll_s: how often the pool driver counts finished trials for progress.
        join: add workers to a study other processes are running: leave its
            RUNNING trials alone (no stale cleanup); surplus trials are pruned.
        ladder: climb trials from short streams to long ones, pruning by
            successive halving (:mod:`easerve_core.has.ladder`); needs an
            evaluator with ``verdict`` (a plain callable runs without it).
    """

    sampler: str = "tpe"
    num_trials: int = 30
    seed: int = 0
    storage: str = "has.db"
    study_name: str = "has"
    num_workers: int = 1
    tpe_startup_trials: int = 10
    poll_s: float = 0.5
    join: bool = False
    ladder: Ladder | None = None

    def __post_init__(self) -> None:
        checks.one_of("sampler", self.sampler, SAMPLERS)
        checks.integer("trials", self.num_trials, minimum=1)
        checks.integer("seed", self.seed, minimum=0)
        object.__setattr__(self, "storage", normalize_url(self.storage))
        if not isinstance(self.study_name, str) or not self.study_name:
            raise ValueError(f"study_name must be a non-empty string, got {self.study_name!r}")
        checks.integer("workers", self.num_workers, minimum=1)
        if self.storage == MEMORY and (self.num_workers > 1 or self.join):
            raise ValueError(f"storage {MEMORY!r} holds the study in this process only: "
                             "it takes one worker and no join")
        checks.integer("tpe_startup_trials", self.tpe_startup_trials, minimum=1)
        checks.positive("poll_s", self.poll_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Job:
    storage: str
    study_name: str
    sampler: str
    seed: int
    tpe_startup_trials: int
    num_trials: int
    objective: Objective


def _worker_seed(seed: int, existing: int, worker: int) -> int:
    return int(np.random.SeedSequence([seed, existing, worker]).generate_state(1)[0])


def _run_job(job: _Job, callbacks: list[Callable[[optuna.Study, FrozenTrial], None]] | None = None,
             storage: BaseStorage | None = None) -> int:
    """Run ``job.num_trials`` trials of the study (the body of each pool worker).

    ``storage``: the one this process already opened (else ``job.storage`` is opened).
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = make_sampler(job.sampler, seed=job.seed, tpe_startup_trials=job.tpe_startup_trials)
    ladder = job.objective.ladder if job.objective.climbs else None
    storage = storage or open_storage(job.storage)
    study = optuna.load_study(study_name=job.study_name, storage=storage, sampler=sampler,
                              pruner=ladder.pruner() if ladder else NopPruner())
    objective = replace(job.objective, seen=SeenTrials(storage, job.study_name))
    study.optimize(objective, n_trials=job.num_trials, callbacks=callbacks)
    return job.num_trials


def _enqueue_grid(study: optuna.Study, space: SearchSpace) -> int:
    """Enqueue grid points neither COMPLETE nor WAITING; return the grid size."""
    points = space.grid()
    held = {t.user_attrs.get("grid_index") for t in study.get_trials(
        deepcopy=False, states=(TrialState.COMPLETE, TrialState.WAITING))}
    for i, (label, batch, s) in enumerate(points):
        if i not in held:
            params: dict[str, object] = {"alloc": label, "B": batch}
            if space.remote_fraction is None:  # else s is fixed, not a parameter
                params["s"] = s
            study.enqueue_trial(params, user_attrs={"grid_index": i})
    return len(points)


def _quotas(remaining: int, workers: int) -> list[int]:
    k = max(1, min(workers, remaining))
    return [remaining // k + (1 if i < remaining % k else 0) for i in range(k)]


def _count_complete(study: optuna.Study) -> int:
    return len(finished_trials(study))


def run_search(space: SearchSpace, evaluator: Evaluator, settings: SearchSettings, *,
               progress: Progress | None = None, backend: Backend | None = None) -> optuna.Study:
    """Create or resume the study and run it to its planned size; return it.

    The ``settings.num_workers`` jobs run on ``backend``; without one, a
    single job runs in this process and several on a local pool of that
    many processes. Off this process, ``evaluator`` must pickle (a
    module-level class or :func:`functools.partial`): each job gets a copy.
    """
    storage = open_storage(settings.storage)
    if settings.join and settings.sampler == "grid":
        raise ValueError("join: the grid is enqueued by one process; join tpe or random studies")
    state = prepare_study(storage, settings.study_name, fail_stale=not settings.join)
    study = optuna.load_study(study_name=settings.study_name, storage=storage)
    recorded = study.user_attrs.get("sampler")
    if recorded not in (None, settings.sampler):
        raise ValueError(
            f"sampler: study {settings.study_name!r} was run with {recorded!r}, not {settings.sampler!r}"
        )
    study.set_user_attr("sampler", settings.sampler)
    planned = _enqueue_grid(study, space) if settings.sampler == "grid" else settings.num_trials
    study.set_user_attr("planned_trials", planned)
    remaining = planned - state.num_complete
    if progress:
        progress(state.num_complete, planned)
    if remaining <= 0:
        return study
    for round_ in range(1 + MAX_TOP_UPS):
        _run_round(space, evaluator, settings, (storage, study), (remaining, planned),
                   progress=progress, backend=backend)
        if settings.storage != MEMORY:  # read it afresh: nothing a long-lived cache missed
            storage = open_storage(settings.storage)
            study = optuna.load_study(study_name=settings.study_name, storage=storage)
        remaining = planned - _count_complete(study)
        if progress:
            progress(planned - remaining, planned)
        if remaining <= 0 or settings.join or settings.sampler == "grid" or round_ == MAX_TOP_UPS:
            break
        # every job has returned, so a trial not finished was lost (left RUNNING or FAIL by an error
        # Optuna absorbed, a value it would not store): run that many again, as a rerun would
        checks.notice(f"study {settings.study_name!r}: {remaining} of {planned} trials were lost "
                      "(not finished when their job returned); running them again")
        prepare_study(storage, settings.study_name)
    if remaining > 0 and not settings.join:  # joined: the other workers run the rest
        checks.notice(f"study {settings.study_name!r}: holds {planned - remaining} of its {planned} "
                      "planned trials; rerun the command to run the rest")
    return study


def _run_round(space: SearchSpace, evaluator: Evaluator, settings: SearchSettings,
               opened: tuple[BaseStorage, optuna.Study], counts: tuple[int, int], *,
               progress: Progress | None, backend: Backend | None) -> None:
    """Run ``remaining`` more trials of the study as ``settings.num_workers`` jobs (see :func:`run_search`).

    ``opened``: the storage and the study on it this process holds; ``counts``: (remaining, planned).
    """
    storage, study = opened
    remaining, planned = counts
    existing = len(study.get_trials(deepcopy=False))
    jobs = [
        _Job(storage=settings.storage, study_name=settings.study_name, sampler=settings.sampler,
             seed=_worker_seed(settings.seed, existing, w),
             tpe_startup_trials=settings.tpe_startup_trials, num_trials=n,
             objective=Objective(space=space, evaluator=evaluator, ladder=settings.ladder))
        for w, n in enumerate(_quotas(remaining, settings.num_workers))
    ]
    if len(jobs) == 1 and backend is None:
        def tick(study_: optuna.Study, trial: FrozenTrial) -> None:
            if progress:
                progress(_count_complete(study_), planned)
        _run_job(jobs[0], [tick], storage=storage)
        return
    if settings.storage == MEMORY:
        raise ValueError(f"storage {MEMORY!r} holds the study in this process only: run it without a backend")

    def poll() -> None:
        if progress:
            progress(_count_complete(study), planned)

    if backend is not None:
        backend.map(_run_job, jobs, poll=poll)
    else:
        with open_backend(BackendSettings(num_jobs=len(jobs), poll_s=settings.poll_s)) as pool:
            pool.map(_run_job, jobs, poll=poll)
