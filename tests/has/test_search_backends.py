"""A HAS study's jobs on a backend: Ray tasks share the study through its storage, as workers do.

``run_search(..., backend=)`` sends its ``num_workers`` jobs to the backend;
each opens the storage by URL. With two Ray jobs on one SQLite file the
study ends with exactly the planned COMPLETE trials, numbered 0..N-1, and a
rerun resumes it as with ``--workers``: a trial left RUNNING becomes FAIL
and only the remainder runs.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from easerve_core.cluster import Cluster
from easerve_core.has import SearchSpace, enumerate_allocations
from runtime.has import SearchSettings, run_search
from runtime.parallel import BackendSettings, open_backend
from tests.backends import needs_ray
from tests.has.toy import AnalyticEvaluator, ToyProfile

BEST = "E2x2 P1x2 D1x2"


@pytest.mark.parametrize("backend", ["local", pytest.param("ray", marks=needs_ray)])
def test_jobs_on_a_backend_share_one_study_and_resume(tmp_path: Path, backend: str,
                                                      request: pytest.FixtureRequest) -> None:
    if backend == "ray":
        request.getfixturevalue("ray_session")
    allocations = enumerate_allocations(ToyProfile(), Cluster(gpu="toy", num_gpus=8))
    space = SearchSpace(allocations=tuple(allocations))
    settings = SearchSettings(storage=str(tmp_path / "study.db"), study_name="t", num_trials=10,
                              num_workers=2, poll_s=0.05)
    seen: list[int] = []
    with open_backend(BackendSettings(name=backend, num_jobs=2, poll_s=0.05)) as pool:
        study = run_search(space, AnalyticEvaluator(BEST), settings, backend=pool,
                           progress=lambda done, total: seen.append(done))
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        assert sorted(t.number for t in complete) == list(range(10)) and seen[-1] == 10
        study.ask()  # a trial left RUNNING, as by a lost worker
        more = SearchSettings(storage=settings.storage, study_name="t", num_trials=13, num_workers=2,
                              poll_s=0.05)
        study = run_search(space, AnalyticEvaluator(BEST), more, backend=pool)
    states = [t.state for t in optuna.load_study(study_name="t", storage=settings.storage).trials]
    assert states.count(TrialState.COMPLETE) == 13 and states.count(TrialState.FAIL) == 1
    assert TrialState.RUNNING not in states
