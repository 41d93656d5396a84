"""SeenTrials answers "evaluated before, with what value?" as a full scan does, reading a trial O(1) times."""

from __future__ import annotations

import optuna
from optuna.storages import InMemoryStorage
from optuna.trial import TrialState

from runtime.has.seen import SeenTrials

optuna.logging.set_verbosity(optuna.logging.WARNING)


class CountingStorage(InMemoryStorage):
    """An in-memory storage that counts the trials read from it, however they are read."""

    def __init__(self) -> None:
        super().__init__()
        self.trials_read = 0
        self._counting = True

    def get_trial(self, trial_id):
        self.trials_read += self._counting
        return super().get_trial(trial_id)

    def get_all_trials(self, study_id, deepcopy=True, states=None):
        trials = super().get_all_trials(study_id, deepcopy=deepcopy, states=states)
        self.trials_read += len(trials) * self._counting
        return trials

    def get_n_trials(self, study_id, state=None):
        # a count (one COUNT query on a database), not a read of the trials: the base class
        # counts through get_all_trials, which must not count here
        self._counting = False
        try:
            return super().get_n_trials(study_id, state)
        finally:
            self._counting = True


def _scan(study: optuna.Study, key: str) -> float | None:
    """The objective's answer today: every complete trial, read at every trial."""
    for done in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if done.user_attrs.get("key") == key and done.value is not None:
            return float(done.value)
    return None


def _study(n: int, *, incremental: bool) -> tuple[int, list[float | None]]:
    storage = CountingStorage()
    study = optuna.create_study(storage=storage, study_name="s")
    seen = SeenTrials(storage, "s")
    answers = []
    lookups = 0
    for i in range(n):
        trial = study.ask()
        key = f"k{(i * 7) % (n // 2 + 1)}"  # keys come back, as TPE's proposals do
        trial.set_user_attr("key", key)
        before = storage.trials_read
        value = seen.value_of(key) if incremental else _scan(study, key)
        lookups += storage.trials_read - before  # Optuna's own ask and tell read trials too
        answers.append(value)
        if i % 11 == 5:
            study.tell(trial, state=TrialState.FAIL)
        else:
            study.tell(trial, float(i) if value is None else value)
    return lookups, answers


def test_the_answers_are_the_full_scan_s():
    assert _study(120, incremental=True)[1] == _study(120, incremental=False)[1]


def test_trials_read_grow_linearly_not_quadratically():
    incremental = {n: _study(n, incremental=True)[0] for n in (100, 200, 400)}
    scan = {n: _study(n, incremental=False)[0] for n in (100, 200)}
    for n, reads in incremental.items():
        assert reads <= 2 * n, incremental
    assert incremental[400] <= 2.2 * incremental[200] and incremental[200] <= 2.2 * incremental[100]
    assert scan[200] >= 3.5 * scan[100]  # the scan: quadratic
    assert scan[200] > 20 * incremental[200]


def test_a_trial_read_while_running_is_read_again_when_it_finishes():
    storage = CountingStorage()
    study = optuna.create_study(storage=storage, study_name="s")
    seen = SeenTrials(storage, "s")
    slow = study.ask()  # a parallel worker's trial, still running
    slow.set_user_attr("key", "a")
    assert seen.value_of("a") is None
    study.tell(slow, 3.0)
    assert seen.value_of("a") == 3.0
    reads = seen.reads
    assert seen.value_of("a") == 3.0 and seen.reads == reads  # a known key reads nothing
