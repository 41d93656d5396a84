"""Which deployments a study has evaluated, and their values, without rereading the study.

HAS's objective asks at every trial whether the deployment the sampler
proposed was already evaluated (TPE proposes a categorical point again and
again): reading every trial of the study to answer (``study.get_trials``)
makes a study of N trials read N^2 / 2 trials, which on a database storage
is the search's cost. :class:`SeenTrials` answers from an in-process map of
deployment key -> value, and reads only what changed since it last looked:
the trials numbered past the last one it read, and those it read while they
were still running (parallel workers). A key it knows costs no read at all;
a study of N trials with W running at once reads O(N x W) trials in all.

The answer is the one the full scan gives: the value of the first finished,
``COMPLETE`` trial (by number) whose user attribute ``key_attr`` holds the
key, or None. Pure apart from the storage it is handed (Optuna's public
storage API: ``get_n_trials``, ``get_trial_id_from_study_id_trial_number``,
``get_trial``); no clock, no randomness.
"""

from __future__ import annotations

from collections.abc import Hashable

from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState


class SeenTrials:
    """Deployment key -> value of a study's complete trials, refreshed incrementally.

    Args:
        storage: the study's storage object (the same one the study uses; an
            in-memory storage is not shared between objects).
        study_name: the study's name in it.
        key_attr: the trial user attribute that holds the deployment's key.
    """

    def __init__(self, storage: BaseStorage, study_name: str, *, key_attr: str = "key") -> None:
        self._storage = storage
        self._study_id = storage.get_study_id_from_name(study_name)
        self._key_attr = key_attr
        self._values: dict[Hashable, tuple[int, float]] = {}  # key -> (trial number, value)
        self._finished: dict[Hashable, list[FrozenTrial]] = {}  # key -> finished trials, by number
        self._next = 0  # the first trial number not read yet
        self._open: set[int] = set()  # numbers read before they finished: read again
        #: trials read from the storage so far (tests and benchmarks count them)
        self.reads = 0

    def value_of(self, key: Hashable) -> float | None:
        """The value of the first complete trial with ``key``, or None if there is none yet."""
        if key not in self._values:
            self.refresh()
        found = self._values.get(key)
        return None if found is None else found[1]

    def finished_with(self, key: Hashable) -> list[FrozenTrial]:
        """The finished trials (COMPLETE, or PRUNED on HAS's ladder) with ``key``, by number."""
        if key not in self._finished:
            self.refresh()
        return list(self._finished.get(key, ()))

    def refresh(self) -> None:
        """Read the trials added since the last refresh, and those that were still running then."""
        total = self._storage.get_n_trials(self._study_id)
        for number in [*sorted(self._open), *range(self._next, total)]:
            trial_id = self._storage.get_trial_id_from_study_id_trial_number(self._study_id, number)
            trial = self._storage.get_trial(trial_id)
            self.reads += 1
            if trial.state.is_finished():
                self._open.discard(number)
                self._record(trial)
            else:
                self._open.add(number)
        self._next = max(self._next, total)

    def _record(self, trial: FrozenTrial) -> None:
        key = trial.user_attrs.get(self._key_attr)
        if key is not None and trial.state in (TrialState.COMPLETE, TrialState.PRUNED) and not (
                trial.user_attrs.get("surplus")):
            self._finished.setdefault(key, []).append(trial)
            self._finished[key].sort(key=lambda t: t.number)
        if trial.state is not TrialState.COMPLETE or trial.value is None or key is None:
            return
        known = self._values.get(key)
        if known is None or trial.number < known[0]:  # the first by number, as a scan finds it
            self._values[key] = (trial.number, float(trial.value))
