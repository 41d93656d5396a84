"""HAS inside the evaluation: the EAServe deployment per modality, and convergence.

:func:`choose` screens the modality's cluster at the target rate and runs a
TPE search on the simulator, exactly as ``easerve search`` does, with the
setup's own profile (so a what-if profile gets its own deployment). When no
allocation survives the screen at the target rate, it steps down a ladder of
rates and says so: the report shows the rate HAS could plan for.
:func:`convergence` runs TPE and random search over several seeds and the
exhaustive grid once, and returns the best-so-far curves. Both are made of
independent tasks (a whole study; one grid point) that run on a backend
(:mod:`runtime.parallel`), each study on one job, so a result does not
depend on where it ran. A study is held in memory (``storage="memory:"``)
unless a storage is given: the same trials as an SQLite file, without a
database round trip per trial.

:func:`choose_baseline` gives each baseline the same treatment (equal
tuning, docs/has.md §8): its best deployment at the rate, under the same
trial budget, sampler, request streams and screen as :func:`choose`, each
candidate simulated under the baseline's preset. Request-at-a-time EPD
(``dynamo``) searches the allocation and TPs with B = 1 and s = 1;
fixed-batch EPD the allocation, B and the batch timeout with s = 1; the
aggregated engine (``vllm``) the instance TP and number of instances.
A space with no more points than the budget is evaluated whole.

The module stays past 300 lines because :func:`choose`, :func:`choose_baseline` and
:func:`convergence` must run HAS the same way (one screen, one evaluator, one study
builder) to keep the tuning equal; one module keeps that sameness in view. The step
down the rate ladder is the core's ``DOWN`` :class:`~easerve_core.rate_search.RateLadder`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

import optuna
import pandas as pd

from easerve.experiments.setup import Setup
from easerve_core import Deployment, StageGroup, checks
from easerve_core.has import (
    ScreenReport,
    SearchSpace,
    best_deployment,
    enumerate_allocations,
    memory_need,
    screen,
    trials_frame,
    typical_shape,
)
from easerve_core.has.objective import short_key
from easerve_core.has.space import GRID_BATCHES, aggregated_tps
from easerve_core.plan import DEFAULT_PRESET, replan
from easerve_core.presets import apply_preset
from easerve_core.rate_search import Direction, Outcome, RateLadder, find_capacity
from runtime.has import MEMORY, SearchSettings, make_sampler, run_search
from runtime.parallel import IN_PROCESS, Backend, run_tasks
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
    #: the system chosen for: ``easerve`` or a baseline's preset
    system: str = DEFAULT_PRESET
    #: every point of the space was evaluated (it had no more points than the budget)
    exhaustive: bool = False


def _space(setup: Setup, rate_hz: float, tier: str, num_gpus: int | None = None
           ) -> tuple[ScreenReport, SearchSpace]:
    allocations = None
    if num_gpus is not None:  # allocations of exactly that many of the cluster's GPUs
        cluster = replace(setup.plan.cluster, num_gpus=num_gpus)
        need = memory_need(typical_shape(setup.mix))
        allocations = enumerate_allocations(setup.profile, cluster, need=need)
        if not allocations:
            raise ValueError(f"no allocation of {num_gpus} x {cluster.gpu} fits in memory")
    report = screen(setup.profile, setup.plan.cluster, setup.mix, rate_hz=rate_hz,
                    slo=setup.slos[tier], allocations=allocations)
    base = setup.deployment.with_(rate_hint_hz=rate_hz)
    return report, SearchSpace(allocations=report.survivor_allocations, base=base)


#: HAS draws its request streams from seeds far from the evaluation's (0, 1, 2, ...),
#: so a deployment is chosen on other requests than those it is judged on
HAS_SEED_OFFSET = 1000


def _evaluator(setup: Setup, *, rate_hz: float, tier: str, num_requests: int,
               num_samples: int, preset: str = DEFAULT_PRESET) -> SimEvaluator:
    """Goodput at ``rate_hz`` on HAS's own request streams (the same for every study, seed and
    system), each deployment simulated under ``preset`` on that preset's profile."""
    plan = replan(setup.plan, seed=HAS_SEED_OFFSET, slo=setup.slos[tier])
    return make_evaluator(plan, setup.profile_for(preset), rate_hz=rate_hz,
                          num_requests=num_requests, num_samples=num_samples, preset=preset)


def _study(setup: Setup, space: SearchSpace, *, rate_hz: float, tier: str, sampler: str,
           trials: int, seed: int, num_requests: int, storage: str,
           num_samples: int = 1, system: str = DEFAULT_PRESET) -> pd.DataFrame:
    """One study; ``seed`` seeds the sampler, the request streams are the same for every seed."""
    evaluator = _evaluator(setup, rate_hz=rate_hz, tier=tier, num_requests=num_requests,
                           num_samples=num_samples, preset=system)
    who = "" if system == DEFAULT_PRESET else f"{system}-"
    name = (f"{setup.modality}-{who}{tier}-r{rate_hz:g}-{sampler}-seed{seed}-n{num_requests}"
            f"x{num_samples}-t{trials}")
    settings = SearchSettings(sampler=sampler, num_trials=trials, seed=seed, storage=storage,
                              study_name=name)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return trials_frame(run_search(space, evaluator, settings))


def choose(setup: Setup, *, rate_hz: float, tier: str = "moderate", trials: int = 30,
           seed: int = 0, num_requests: int = 250, num_samples: int = 1,
           storage: str | None = None, num_gpus: int | None = None) -> Choice:
    """The TPE-chosen EAServe deployment for ``setup`` at ``rate_hz`` (or the next feasible rate);
    ``num_gpus``: on that many of the cluster's GPUs (the others idle), not all of them."""
    return _on_ladder(setup, partial(_space, setup, tier=tier, num_gpus=num_gpus), system=DEFAULT_PRESET,
                      rate_hz=rate_hz, tier=tier, trials=trials, seed=seed,
                      num_requests=num_requests, num_samples=num_samples, storage=storage)


SpaceAt = Callable[[float], tuple[ScreenReport, SearchSpace]]


def _feasible(setup: Setup, space_at: SpaceAt, rate_hz: float) -> tuple[float, ScreenReport, SearchSpace]:
    """The first rate of ``rate_hz`` and the ladder below it that some allocation carries: a
    ``DOWN`` :class:`~easerve_core.rate_search.RateLadder` on the screen's verdict."""
    ladder = [rate_hz] + [r for r in RATE_LADDER_HZ if r < rate_hz]
    spaces: dict[float, tuple[ScreenReport, SearchSpace]] = {}
    errors: list[ValueError] = []

    def carried(rate: float) -> bool:
        try:
            spaces[rate] = space_at(rate)
        except ValueError as exc:  # nothing carries this rate: plan for a lower one
            errors.append(exc)
            return False
        return True

    answer = find_capacity(RateLadder(ladder, direction=Direction.DOWN), carried)
    if answer.outcome is Outcome.NONE:
        raise ValueError(f"{setup.modality}: no allocation carries even {ladder[-1]} req/s "
                         f"({errors[-1]})")
    return (answer.capacity_hz, *spaces[answer.capacity_hz])


def _on_ladder(setup: Setup, space_at: SpaceAt, *, system: str, rate_hz: float, tier: str,
               trials: int, seed: int, num_requests: int, num_samples: int,
               storage: str | None) -> Choice:
    """Screen and search at ``rate_hz``, or at the first rate of the ladder below it that some
    allocation carries; a space of no more than ``trials`` grid points (no continuous knob)
    is evaluated whole, in the grid's order."""
    rate, report, space = _feasible(setup, space_at, rate_hz)
    whole = (space.remote_fraction is not None and space.timeout_range_s is None
             and len(space.grid()) <= trials)
    frame = _study(setup, space, rate_hz=rate, tier=tier, sampler="grid" if whole else "tpe",
                   trials=trials, seed=seed, num_requests=num_requests,
                   storage=storage or MEMORY, num_samples=num_samples, system=system)
    return Choice(modality=setup.modality, deployment=best_deployment(frame),
                  planned_rate_hz=rate, requested_rate_hz=rate_hz,
                  num_candidates=len(report.candidates), num_survivors=len(report.survivors),
                  best_goodput_rps=float(frame["goodput_rps"].max()), trials=frame,
                  system=system, exhaustive=whole)


def planned_rate(setup: Setup, rate_hz: float, *, system: str = DEFAULT_PRESET,
                 tier: str = "moderate") -> float:
    """The rate :func:`choose` (``easerve``) or :func:`choose_baseline` plans for at ``rate_hz``
    (``rate_hz`` itself for ``vllm``, which has no ladder); screens only, so it is cheap. A
    choice at ``rate_hz`` is the choice at this rate, but for its ``requested_rate_hz``."""
    if system == "vllm":
        return rate_hz
    space_at = (partial(_space, setup, tier=tier) if system == DEFAULT_PRESET
                else partial(_epd_baseline_space, setup, system=system, tier=tier))
    return _feasible(setup, space_at, rate_hz)[0]


#: the baselines :func:`choose_baseline` tunes, each by its preset's name
BASELINES = ("dynamo", "fixed-batch", "vllm")
#: fixed-batch EPD's batch timeout, searched log-uniform: from 10 ms to EAServe's own 1 s
#: oldest-request cap (``Deployment.max_wait_s``), the preset's default 50 ms inside
BASELINE_TIMEOUT_RANGE_S = (0.01, 1.0)
#: the largest B fixed-batch EPD may pick: EAServe's (:class:`SearchSpace`'s default)
BASELINE_MAX_BATCH = 32
#: the restricted spaces of the EPD baselines: (largest B, timeout range); s is always 1
_EPD_SPACES: dict[str, tuple[int, tuple[float, float] | None]] = {
    "dynamo": (1, None),
    "fixed-batch": (BASELINE_MAX_BATCH, BASELINE_TIMEOUT_RANGE_S),
}


def _epd_baseline_space(setup: Setup, rate_hz: float, *, system: str,
                        tier: str) -> tuple[ScreenReport, SearchSpace]:
    """An EPD baseline's space: the allocations with a prefill worker, every prefill remote.

    Local prefill is switched off before the screen, so the screen charges
    Prefill to the remote workers alone, and Encode at the baseline's
    largest B, as the baseline runs.
    """
    max_batch, timeouts = _EPD_SPACES[system]
    cluster = setup.plan.cluster
    allocations = [replace(a, local_prefill_fits=False) for a in enumerate_allocations(
        setup.profile, cluster, need=memory_need(typical_shape(setup.mix))) if a.prefill.num_workers]
    report = screen(setup.profile, cluster, setup.mix, rate_hz=rate_hz, slo=setup.slos[tier],
                    max_encode_batch=max_batch, allocations=allocations)
    space = SearchSpace(allocations=report.survivor_allocations,
                        base=apply_preset(system, setup.deployment, cluster), max_encode_batch=max_batch,
                        grid_batches=tuple(b for b in GRID_BATCHES if b <= max_batch),
                        remote_fraction=1.0, timeout_range_s=timeouts)
    return report, space


def aggregated_candidates(setup: Setup) -> list[Deployment]:
    """Every aggregated (vLLM-like) deployment that fits the cluster: each instance TP at which
    one instance holds encoder, LM and a typical request's KV, with the most instances first."""
    cluster = setup.plan.cluster
    tps = aggregated_tps(setup.profile_for("vllm"), cluster,
                         need=memory_need(typical_shape(setup.mix)))
    if not tps:
        raise ValueError(f"{setup.modality}: no aggregated instance fits on {cluster.gpu}")
    base = apply_preset("vllm", setup.deployment, cluster)
    return [base.with_(decode=StageGroup(num_workers=n, tp=tp))
            for tp in tps for n in range(cluster.gpus_per_node // tp * cluster.num_nodes, 0, -1)]


def choose_baseline(setup: Setup, system: str, *, rate_hz: float, tier: str = "moderate",
                    trials: int = 30, seed: int = 0, num_requests: int = 250,
                    num_samples: int = 1, storage: str | None = None) -> Choice:
    """Baseline ``system``'s best deployment at ``rate_hz`` under :func:`choose`'s budget.

    ``dynamo`` and ``fixed-batch`` are screened and searched as EAServe is,
    in their restricted spaces (module docstring), stepping down the same
    ladder of rates when nothing survives the screen. ``vllm`` enumerates
    :func:`aggregated_candidates` (the screen models EPD stages, so only its
    memory test applies): all of them when they are no more than
    ``trials``, else a TPE study of ``trials`` over them (in memory:
    ``storage`` holds the EPD baselines' studies only). On a tie the
    earlier candidate wins.
    """
    checks.one_of("baseline", system, BASELINES)
    if system == "vllm":
        return _choose_aggregated(setup, rate_hz=rate_hz, tier=tier, trials=trials, seed=seed,
                                  num_requests=num_requests, num_samples=num_samples)
    return _on_ladder(setup, partial(_epd_baseline_space, setup, system=system, tier=tier),
                      system=system, rate_hz=rate_hz, tier=tier, trials=trials, seed=seed,
                      num_requests=num_requests, num_samples=num_samples, storage=storage)


def _choose_aggregated(setup: Setup, *, rate_hz: float, tier: str, trials: int, seed: int,
                       num_requests: int, num_samples: int) -> Choice:
    candidates = aggregated_candidates(setup)
    evaluate = _evaluator(setup, rate_hz=rate_hz, tier=tier, num_requests=num_requests,
                          num_samples=num_samples, preset="vllm")
    whole = len(candidates) <= trials
    if whole:
        tried, values = candidates, [evaluate(d) for d in candidates]
    else:
        tried, values = _tpe_over(candidates, evaluate, trials=trials, seed=seed)
    frame = pd.DataFrame({
        "trial": range(len(tried)), "goodput_rps": values, "label": [d.label() for d in tried],
        "decode_workers": [d.decode.num_workers for d in tried],
        "decode_tp": [d.decode.tp for d in tried], "key": [short_key(d) for d in tried],
        "deployment_json": [json.dumps(d.to_dict(), sort_keys=True) for d in tried]})
    frame.insert(2, "best_so_far_rps", frame["goodput_rps"].cummax())
    return Choice(modality=setup.modality, deployment=best_deployment(frame),
                  planned_rate_hz=rate_hz, requested_rate_hz=rate_hz,
                  num_candidates=len(candidates), num_survivors=len(candidates),
                  best_goodput_rps=float(frame["goodput_rps"].max()), trials=frame,
                  system="vllm", exhaustive=whole)


def _tpe_over(candidates: Sequence[Deployment], evaluate: Callable[[Deployment], float], *,
              trials: int, seed: int) -> tuple[list[Deployment], list[float]]:
    """``trials`` TPE trials over a list of candidates (a repeat reuses its value)."""
    by_label = {d.label(): d for d in candidates}
    seen: dict[str, float] = {}
    tried: list[Deployment] = []

    def objective(trial: optuna.Trial) -> float:
        label = str(trial.suggest_categorical("instances", list(by_label)))
        if label not in seen:
            seen[label] = evaluate(by_label[label])
        tried.append(by_label[label])
        return seen[label]

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=make_sampler("tpe", seed=seed))
    study.optimize(objective, n_trials=trials)
    return tried, [seen[d.label()] for d in tried]


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
