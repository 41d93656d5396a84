"""HAS's ladder: successive halving over stream length, unstable runs last, the recheck's pick."""

from __future__ import annotations

import math
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from easerve_core.cluster import Cluster
from easerve_core.has import (
    Ladder,
    SearchSpace,
    Verdict,
    enumerate_allocations,
    finished_trials,
    recheck,
    recheck_frame,
    top_k,
    trials_frame,
)
from easerve_core.has.objective import _guard_budget
from runtime.has import SearchSettings, run_search
from tests.has.toy import AnalyticEvaluator, LadderToy, ToyProfile

BEST = "E2x2 P1x2 D1x2"


@pytest.fixture(scope="module")
def space() -> SearchSpace:
    return SearchSpace(allocations=tuple(enumerate_allocations(ToyProfile(), Cluster(gpu="toy", num_gpus=8))))


def _settings(tmp_path: Path, **kw: object) -> SearchSettings:
    base = {"storage": str(tmp_path / "study.db"), "study_name": "t", "num_trials": 27, "ladder": Ladder()}
    return SearchSettings(**{**base, **kw})  # type: ignore[arg-type]


def test_unstable_scores_rank_below_every_stable_one() -> None:
    stable_zero = Verdict(goodput_rps=0.0, attainment=0.0, unstable=False, offered_rps=3.0, num_requests=9)
    unstable_high = Verdict(goodput_rps=2.9, attainment=0.9, unstable=True, offered_rps=3.0, num_requests=9)
    unstable_low = Verdict(goodput_rps=1.0, attainment=0.3, unstable=True, offered_rps=3.0, num_requests=9)
    assert stable_zero.score > unstable_high.score > unstable_low.score


def test_the_ladder_prunes_and_the_study_holds_its_planned_trials(tmp_path: Path, space: SearchSpace) -> None:
    toy = LadderToy(AnalyticEvaluator(BEST))
    study = run_search(space, toy, _settings(tmp_path))
    frame = trials_frame(study)
    assert len(frame) == 27 == len(finished_trials(study))
    assert frame["pruned"].any() and (~frame["pruned"]).any()
    # a pruned trial stopped below the last rung; a complete one climbed all three
    assert set(frame.loc[frame["pruned"], "rung"]) <= {0, 1}
    assert set(frame.loc[~frame["pruned"], "rung"]) == {2}
    fractions = [f for kind, _, f in toy.calls if kind == "verdict"]
    assert fractions.count(1 / 9) > fractions.count(1 / 3) > fractions.count(1.0) > 0
    assert top_k(frame, 1).iloc[0]["alloc"] == BEST


def test_an_unstable_deployment_is_never_the_best(tmp_path: Path, space: SearchSpace) -> None:
    toy = LadderToy(AnalyticEvaluator(BEST), unstable_label=BEST)
    frame = trials_frame(run_search(space, toy, _settings(tmp_path)))
    assert frame.loc[frame["alloc"] == BEST, "unstable"].all()
    assert top_k(frame, 1).iloc[0]["alloc"] != BEST
    assert not top_k(frame, 1).iloc[0]["unstable"]


def test_the_recheck_picks_the_best_stable_on_long_streams_and_resumes(tmp_path: Path,
                                                                       space: SearchSpace) -> None:
    settings = _settings(tmp_path, num_trials=40)
    study = run_search(space, LadderToy(AnalyticEvaluator(BEST)), settings)
    frame = trials_frame(study)
    leader = str(top_k(frame, 1).iloc[0]["label"])
    toy = LadderToy(AnalyticEvaluator(BEST), fragile=frozenset({leader}))  # the trials could not tell
    picked = recheck(study, toy, Ladder(), trials=frame)
    assert len(picked) == 3 and all(len(r.verdicts) == 3 for r in picked)
    assert picked[0].label != leader and not picked[0].merged.unstable
    assert picked[-1].merged.unstable  # the fragile one ranks last
    low, high = picked[0].interval()
    assert low < picked[0].merged.goodput_rps < high
    table = recheck_frame(picked)
    assert list(table["rank"]) == [1, 2, 3] and table["unstable"].iloc[-1]

    # resumed: no trial and no long run again
    calls = len(toy.calls)
    again = run_search(space, toy, settings)
    picked_again = recheck(again, toy, Ladder(), trials=trials_frame(again))
    assert len(toy.calls) == calls
    assert [r.key for r in picked_again] == [r.key for r in picked]


def test_a_rerun_reuses_rungs_a_deployment_already_climbed(tmp_path: Path, space: SearchSpace) -> None:
    small = SearchSpace(allocations=space.allocations[:1], max_encode_batch=1, grid_batches=(1,),
                        remote_fraction=1.0)
    toy = LadderToy(AnalyticEvaluator(BEST))
    study = run_search(small, toy, _settings(tmp_path, num_trials=6))  # one point, six times
    frame = trials_frame(study)
    assert frame["cached"].sum() == 5
    assert len([c for c in toy.calls if c[0] == "verdict"]) == 3  # each rung once


def test_surplus_trials_do_not_count_as_pruned(tmp_path: Path, space: SearchSpace) -> None:
    study = run_search(space, LadderToy(AnalyticEvaluator(BEST)), _settings(tmp_path, num_trials=9))
    pruned = study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))
    assert all(not t.user_attrs.get("surplus") for t in pruned)
    assert len(finished_trials(optuna.load_study(study_name="t", storage=str(
        "sqlite:///" + str(tmp_path / "study.db"))))) == 9


def test_a_trial_pruned_while_the_budget_is_counted_is_counted_once(tmp_path: Path) -> None:
    """Trial 4 leaves RUNNING for PRUNED while trial 5 counts the trials before it (6 planned).

    The study's storage answers each read with the state at that moment: a count that read
    COMPLETE and RUNNING trials, then PRUNED ones, saw trial 4 twice and called trial 5 surplus
    (the race a parallel search met on a loaded machine).
    """
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'race.db'}", study_name="race",
                                direction="maximize")
    study.set_user_attr("planned_trials", 6)
    for _ in range(4):
        done = study.ask()
        study.tell(done, 1.0)
    racing = study.ask()  # trial 4, RUNNING until the count is halfway
    racing.report(0.5, 1)
    trial = study.ask()  # trial 5, the one the guard checks
    reads = {"n": 0}
    real = study.get_trials

    def get_trials(*args: object, **kwargs: object) -> list[optuna.trial.FrozenTrial]:
        reads["n"] += 1
        if reads["n"] == 2:
            study.tell(racing, state=TrialState.PRUNED)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    study.get_trials = get_trials  # type: ignore[method-assign]
    _guard_budget(trial)  # not surplus: five trials precede it
    del study.get_trials  # the real method again
    assert not trial.user_attrs.get("surplus")
    if reads["n"] < 2:  # one read: the racing trial is pruned after it, as it may be
        study.tell(racing, state=TrialState.PRUNED)
    assert sum(t.number < 5 for t in finished_trials(study)) == 5


def test_the_pick_s_lead_is_paired_over_the_shared_streams_and_names_the_ties() -> None:
    from easerve_core.deployment import Deployment
    from easerve_core.has import Rechecked

    def rechecked(label: str, goodputs: list[float], unstable: bool = False) -> Rechecked:
        verdicts = tuple(Verdict(goodput_rps=g, attainment=1.0, unstable=unstable, offered_rps=10.0,
                                 num_requests=100) for g in goodputs)
        return Rechecked(key=label, label=label, deployment=Deployment(), search_score=0.0, verdicts=verdicts)

    streams = [8.0, 10.0, 12.0]  # the streams differ far more than the deployments do
    pick = rechecked("pick", [g + 0.10 for g in streams])
    steady = rechecked("steady", [g + 0.05 for g in streams])  # always 0.05 behind: parted
    noisy = rechecked("noisy", [g + d for g, d in zip(streams, (0.3, -0.1, 0.1), strict=True)])
    unstable = rechecked("unstable", [g + 0.10 for g in streams], unstable=True)
    assert pick.interval()[0] < steady.interval()[1]  # the separate intervals overlap...
    lead, low, high = pick.lead_over(steady)
    assert lead == pytest.approx(0.05) and low == pytest.approx(0.05) == pytest.approx(high)
    assert pick.ties(steady) is False  # ...the paired lead does not hold 0
    assert pick.ties(noisy) is True and pick.ties(unstable) is False
    one = rechecked("one", [9.0])
    assert one.ties(rechecked("other", [8.0])) is None  # one stream: no verdict...
    assert all(math.isnan(x) for x in (*one.interval(), *one.lead_over(rechecked("o", [8.0]))[1:]))
    single = recheck_frame([one, rechecked("other", [8.0])])  # ...and no interval in the table
    assert single[["ci_low_rps", "ci_high_rps", "pick_lead_low_rps"]].isna().all().all()
    table = recheck_frame([pick, steady, noisy])
    assert list(table["ties_pick"]) == [None, False, True]
    assert table["pick_lead_rps"].iloc[0] == 0.0 and table["pick_lead_rps"].iloc[1] == pytest.approx(0.05)


def test_a_trace_is_rechecked_once_and_claims_no_interval(tmp_path: Path, space: SearchSpace) -> None:
    from dataclasses import replace

    settings = _settings(tmp_path, num_trials=20)
    study = run_search(space, LadderToy(AnalyticEvaluator(BEST)), settings)
    frame = trials_frame(study)
    toy = replace(LadderToy(AnalyticEvaluator(BEST)), distinct_long_streams=1)  # a trace: one stream
    picked = recheck(study, toy, Ladder(), trials=frame)
    assert all(len(r.verdicts) == 1 for r in picked)
    assert len([c for c in toy.calls if c[0] == "recheck"]) == len(picked)  # once each, not three times
    assert picked[0].ties(picked[1]) is None  # one stream: no verdict either way


def test_merged_rechecks_list_each_deployment_once_best_first() -> None:
    from easerve_core.deployment import Deployment
    from easerve_core.has import Rechecked, ranked

    def one(key: str, goodput: float, unstable: bool = False) -> Rechecked:
        verdict = Verdict(goodput_rps=goodput, attainment=1.0, unstable=unstable, offered_rps=3.0,
                          num_requests=9)
        return Rechecked(key=key, label=key, deployment=Deployment(), search_score=0.0,
                         verdicts=(verdict,) * 2)

    tpe = [one("a", 2.0), one("b", 1.5), one("u", 2.9, unstable=True)]
    random = [one("c", 1.8), one("a", 2.0), one("b", 1.5)]  # a and b rechecked by both samplers
    assert [r.key for r in ranked(tpe + random)] == ["a", "c", "b", "u"]
