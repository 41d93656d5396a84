"""Which trials count toward a study's plan: COMPLETE ones, and those the ladder PRUNED.

A trial pruned only because the study already held its planned trials (several
workers raced past the plan) is marked :data:`SURPLUS` and does not count.
Pure: it reads the study it is handed (Optuna's public API), nothing else;
opening storages is :mod:`runtime.has.storage`'s.
"""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState

#: the user attribute that marks a trial pruned only because the study already held its planned trials
SURPLUS = "surplus"


def finished_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The trials that count toward a study's plan: COMPLETE, and PRUNED by the ladder (not surplus)."""
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
            if t.state == TrialState.COMPLETE or not t.user_attrs.get(SURPLUS)]
