"""HAS on a real database: two workers share one study on a throw-away PostgreSQL server."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from easerve_core.cluster import Cluster
from easerve_core.has import SearchSpace, enumerate_allocations
from runtime.has import SearchSettings, open_storage, run_search
from tests.has.toy import AnalyticEvaluator, ToyProfile

BEST = "E2x2 P1x2 D1x2"


def test_two_workers_share_one_study_on_postgres(pg_url: str) -> None:
    space = SearchSpace(allocations=tuple(enumerate_allocations(ToyProfile(),
                                                                Cluster(gpu="toy", num_gpus=8))))
    settings = SearchSettings(storage=pg_url, study_name="pg", num_trials=12, num_workers=2,
                              poll_s=0.1)
    seen: list[int] = []
    run_search(space, AnalyticEvaluator(BEST), settings, progress=lambda done, _: seen.append(done))
    study = optuna.load_study(study_name="pg", storage=open_storage(pg_url))  # a fresh connection
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 12
    assert sorted(t.number for t in trials) == list(range(12))
    assert seen[-1] == 12
