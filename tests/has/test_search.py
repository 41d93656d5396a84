"""HAS stage 2: seeded, resumable Optuna studies in real storage, and the baselines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest

from easerve_core.checks import Notice
from easerve_core.cluster import Cluster
from easerve_core.deployment import Deployment
from easerve_core.has import SearchSpace, enumerate_allocations, top_k, trials_frame
from runtime.has import SearchSettings, open_storage, run_search
from runtime.parallel import IN_PROCESS
from tests.has.toy import AnalyticEvaluator, ToyProfile

BEST = "E2x2 P1x2 D1x2"


@pytest.fixture(scope="module")
def space() -> SearchSpace:
    allocs = enumerate_allocations(ToyProfile(), Cluster(gpu="toy", num_gpus=8))
    return SearchSpace(allocations=tuple(allocs))


def _settings(tmp_path: Path, **kw: object) -> SearchSettings:
    base = {"storage": str(tmp_path / "study.db"), "study_name": "t", "num_trials": 12}
    return SearchSettings(**{**base, **kw})  # type: ignore[arg-type]


def test_seeded_search_is_reproducible(tmp_path: Path, space: SearchSpace) -> None:
    frames = []
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        study = run_search(space, AnalyticEvaluator(BEST),
                           _settings(tmp_path / run, seed=3, num_trials=14))
        frames.append(trials_frame(study))
    cols = ["alloc", "max_encode_batch", "remote_fraction", "goodput_rps"]
    assert len(frames[0]) == 14
    assert frames[0][cols].equals(frames[1][cols])


def test_tpe_finds_the_known_optimum(tmp_path: Path, space: SearchSpace) -> None:
    study = run_search(space, AnalyticEvaluator(BEST), _settings(tmp_path, num_trials=40))
    frame = trials_frame(study)
    assert frame["best_so_far_rps"].is_monotonic_increasing
    best = top_k(frame, 1).iloc[0]
    assert best["alloc"] == BEST and best["goodput_rps"] > 0.9 * 2.0


def test_grid_runs_every_distinct_point_once(tmp_path: Path, space: SearchSpace) -> None:
    small = SearchSpace(allocations=space.allocations[:3], grid_batches=(4, 8))
    study = run_search(small, AnalyticEvaluator(BEST), _settings(tmp_path, sampler="grid"))
    frame = trials_frame(study)
    assert len(frame) == len(small.grid())
    assert frame["key"].is_unique and not frame["cached"].any()


def test_random_baseline_and_evaluation_reuse(tmp_path: Path) -> None:
    tiny = SearchSpace(allocations=enumerate_allocations(
        ToyProfile(), Cluster(gpu="toy", num_gpus=5)), max_encode_batch=2,
        grid_batches=(1, 2))
    evaluator = AnalyticEvaluator(BEST)
    study = run_search(tiny, evaluator, _settings(tmp_path, sampler="random", num_trials=10))
    frame = trials_frame(study)
    assert len(frame) == 10 and study.user_attrs["sampler"] == "random"
    assert frame["cached"].sum() == 10 - len(evaluator.calls) > 0  # s is forced: few points


def test_resume_runs_only_the_remainder(tmp_path: Path, space: SearchSpace) -> None:
    settings = _settings(tmp_path, num_trials=10)
    with pytest.raises(RuntimeError, match="interrupted"):
        run_search(space, AnalyticEvaluator(BEST, fail_after=4), settings)
    storage = open_storage(settings.storage)
    study = optuna.load_study(study_name="t", storage=storage)
    first = trials_frame(study)
    assert 4 <= len(first) < 10
    study.ask()  # a trial left RUNNING, as by a killed process
    study = run_search(space, AnalyticEvaluator(BEST), settings)
    states = [t.state for t in study.get_trials(deepcopy=False)]
    assert states.count(optuna.trial.TrialState.COMPLETE) == 10
    assert optuna.trial.TrialState.RUNNING not in states
    frame = trials_frame(study)
    assert frame["trial"].is_unique
    assert frame.head(len(first))[["trial", "key"]].equals(first[["trial", "key"]])
    again = run_search(space, AnalyticEvaluator(BEST, fail_after=0), settings)  # nothing left
    assert len(trials_frame(again)) == 10


def test_parallel_workers_share_journal_storage(tmp_path: Path, space: SearchSpace) -> None:
    settings = _settings(tmp_path, storage=str(tmp_path / "study.journal"), num_trials=8,
                         num_workers=2, poll_s=0.1)
    seen: list[int] = []
    study = run_search(space, AnalyticEvaluator(BEST), settings,
                       progress=lambda done, total: seen.append(done))
    assert len(trials_frame(study)) == 8 and seen[-1] == 8


def test_mixing_samplers_in_one_study_is_refused(tmp_path: Path, space: SearchSpace) -> None:
    run_search(space, AnalyticEvaluator(BEST), _settings(tmp_path, num_trials=2))
    with pytest.raises(ValueError, match="sampler"):
        run_search(space, AnalyticEvaluator(BEST), _settings(tmp_path, sampler="random"))


@pytest.mark.parametrize("url", ["sqlite:////no/such/dir/x.db", "postgresql://nobody@127.0.0.1:1/x",
                                 "journal:/no/such/dir/x.journal"])
def test_unreachable_storage_is_a_value_error(url: str) -> None:
    with pytest.raises(ValueError, match=r"storage .* is unreachable"):
        open_storage(url)


@pytest.mark.parametrize(("field", "value"), [("sampler", "bayes"), ("num_trials", 0),
                                              ("num_workers", 0)])
def test_bad_settings_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=r"sampler|trials|workers"):
        SearchSettings(**{field: value})  # type: ignore[arg-type]


def test_joined_worker_leaves_others_running_trials_and_keeps_the_budget(
        tmp_path: Path, space: SearchSpace) -> None:
    settings = _settings(tmp_path, num_trials=6)
    with pytest.raises(RuntimeError, match="interrupted"):
        run_search(space, AnalyticEvaluator(BEST, fail_after=4), settings)
    study = optuna.load_study(study_name="t", storage=open_storage(settings.storage))
    other = study.ask()  # another worker's trial, still running
    joined = SearchSettings(**{**{f: getattr(settings, f) for f in settings.__dataclass_fields__},
                               "join": True})
    study = run_search(space, AnalyticEvaluator(BEST), joined)
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states[other.number] == optuna.trial.TrialState.RUNNING
    complete = sum(s == optuna.trial.TrialState.COMPLETE for s in states.values())
    assert complete + 1 == 6  # the running trial fills the plan


def test_memory_storage_runs_the_same_trials_as_a_file(tmp_path: Path, space: SearchSpace) -> None:
    cols = ["trial", "alloc", "max_encode_batch", "remote_fraction", "goodput_rps", "best_so_far_rps"]
    on_file = trials_frame(run_search(space, AnalyticEvaluator(BEST), _settings(tmp_path, seed=5)))
    in_memory = trials_frame(run_search(space, AnalyticEvaluator(BEST),
                                        _settings(tmp_path, seed=5, storage="memory:")))
    assert on_file[cols].equals(in_memory[cols])


def test_memory_storage_takes_one_worker_in_this_process(tmp_path: Path, space: SearchSpace) -> None:
    with pytest.raises(ValueError, match="this process only"):
        _settings(tmp_path, storage="memory:", num_workers=2)
    with pytest.raises(ValueError, match="without a backend"):
        run_search(space, AnalyticEvaluator(BEST), _settings(tmp_path, storage="memory:"), backend=IN_PROCESS)


@dataclass
class _LosesFirst:
    """:class:`AnalyticEvaluator` whose first ``lost`` values are NaN: Optuna stores those trials FAIL."""

    inner: AnalyticEvaluator
    lost: int
    calls: int = 0

    def __call__(self, dep: Deployment) -> float:
        self.calls += 1
        return float("nan") if self.calls <= self.lost else self.inner(dep)


@pytest.mark.parametrize(("lost", "held"), [(2, 6), (40, 0)])
def test_trials_lost_in_a_round_are_run_again(tmp_path: Path, space: SearchSpace,
                                              lost: int, held: int) -> None:
    settings = _settings(tmp_path, num_trials=6)
    with pytest.warns(Notice) as notices:
        study = run_search(space, _LosesFirst(AnalyticEvaluator(BEST), lost), settings)
    assert len(trials_frame(study)) == held  # 2 lost: run again; always lost: 3 rounds, then told
    said = [str(n.message) for n in notices]
    assert "2 of 6 trials were lost" in said[0] if held else "holds 0 of its 6 planned" in said[-1]
    states = [t.state for t in study.get_trials(deepcopy=False)]
    assert optuna.trial.TrialState.RUNNING not in states
