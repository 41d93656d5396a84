"""HAS's objective: suggest a deployment, evaluate it (or reuse an earlier evaluation), record it.

:class:`Objective` is what every sampler's study optimises
(:mod:`runtime.has.search` runs it): it suggests ``alloc``, ``B``,
``s`` (and ``timeout_s`` where the space has a timeout range), builds the
deployment and asks the injected evaluator. With a ladder it climbs short
streams to the full one under the study's pruner
(:mod:`easerve_core.has.ladder`). A deployment the study already evaluated
is not evaluated again; earlier trials are found through an injected
:class:`Seen` (the search's is :class:`runtime.has.seen.SeenTrials`), else by
reading the study. :func:`_guard_budget` prunes a trial that would take the
study past its planned size.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import optuna
from optuna.trial import FrozenTrial, Trial, TrialState

from easerve_core.deployment import Deployment
from easerve_core.has.ladder import Ladder, LadderEvaluator, Verdict
from easerve_core.has.space import SearchSpace, deployment_key
from easerve_core.has.trials import SURPLUS, finished_trials

Evaluator = Callable[[Deployment], float]


def short_key(deployment: Deployment) -> str:
    return hashlib.sha1(deployment_key(deployment).encode()).hexdigest()[:16]


class Seen(Protocol):
    """What the study already evaluated, by deployment key (:func:`short_key`).

    Answers as a scan of the study would; :class:`runtime.has.seen.SeenTrials`
    reads the storage incrementally to do so.
    """

    def value_of(self, key: str) -> float | None:
        """The value of the first COMPLETE trial with ``key``, or None."""
        ...

    def finished_with(self, key: str) -> list[FrozenTrial]:
        """The finished trials (COMPLETE, or ladder-PRUNED, not surplus) with ``key``, by number."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Objective:
    """The study's objective: suggest, build, evaluate (or reuse) and record.

    With a :class:`~easerve_core.has.ladder.Ladder` of several rungs and an
    evaluator that runs streams of several lengths (:class:`LadderEvaluator`),
    a trial climbs the ladder: it is scored on each rung's stream in turn,
    reports the score to the pruner and stops where the pruner says so
    (:mod:`easerve_core.has.ladder`). Each rung's verdict is a user
    attribute (``rung0``, ``rung1``, ...), so a deployment suggested again
    reuses the rungs it already climbed. Otherwise every trial is one call
    of the evaluator (its goodput, or a verdict's score).
    """

    space: SearchSpace
    evaluator: Evaluator | LadderEvaluator
    ladder: Ladder | None = None
    #: what the study already evaluated, read incrementally (set per process by the job that runs it)
    seen: Seen | None = field(default=None, compare=False)

    def suggest(self, trial: Trial) -> Deployment:
        label = trial.suggest_categorical("alloc", list(self.space.labels))
        batch = trial.suggest_int("B", 1, self.space.max_encode_batch, log=True)
        fixed_s = self.space.remote_fraction
        s = trial.suggest_float("s", 0.0, 1.0) if fixed_s is None else fixed_s
        timeout_s = None
        if self.space.timeout_range_s is not None:
            low, high = self.space.timeout_range_s
            timeout_s = trial.suggest_float("timeout_s", low, high, log=True)
        return self.space.deployment(str(label), batch, s, timeout_s=timeout_s)

    @property
    def climbs(self) -> bool:
        return self.ladder is not None and isinstance(self.evaluator, LadderEvaluator)

    def __call__(self, trial: Trial) -> float:
        _guard_budget(trial)
        dep = self.suggest(trial)
        key = short_key(dep)
        trial.set_user_attr("key", key)
        trial.set_user_attr("deployment", json.dumps(dep.to_dict(), sort_keys=True))
        if self.climbs:
            return self._climb(trial, dep, key)
        value = self._seen_value(trial, key)
        if value is not None:
            trial.set_user_attr("cached", True)
            return value
        trial.set_user_attr("cached", False)
        assert callable(self.evaluator)
        return float(self.evaluator(dep))

    def _seen_value(self, trial: Trial, key: str) -> float | None:
        if self.seen is not None:
            return self.seen.value_of(key)
        for done in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if done.user_attrs.get("key") == key and done.value is not None:
                return float(done.value)
        return None

    def _climb(self, trial: Trial, dep: Deployment, key: str) -> float:
        assert self.ladder is not None and isinstance(self.evaluator, LadderEvaluator)
        done = (self.seen.finished_with(key) if self.seen is not None
                else [t for t in finished_trials(trial.study) if t.user_attrs.get("key") == key])
        known = _climbed(done)
        trial.set_user_attr("cached", bool(known))
        last = len(self.ladder.rungs) - 1
        for rung, fraction in enumerate(self.ladder.rungs):
            verdict = known.get(rung) or self.evaluator.verdict(dep, fraction=fraction)
            self._record(trial, rung, verdict)
            if rung == last:
                return verdict.score
            trial.report(verdict.score, self.ladder.step(rung))
            if trial.should_prune():
                raise optuna.TrialPruned(f"pruned at rung {rung}")
        raise AssertionError("unreachable: the last rung returns")

    @staticmethod
    def _record(trial: Trial, rung: int, verdict: Verdict) -> Verdict:
        """One user attribute per rung: its verdict (the table reads the last rung's)."""
        trial.set_user_attr(f"rung{rung}", verdict.to_dict())
        return verdict


def _guard_budget(trial: Trial) -> None:
    """Prune (and stop) a trial that would take the study past its planned size.

    Trials are numbered by the storage; one whose number ranks past the plan
    among finished and RUNNING trials is surplus (several workers raced); it
    is marked ``surplus`` so it does not count as a ladder-pruned trial.
    """
    planned = trial.study.user_attrs.get("planned_trials")
    if planned is None:
        return
    # one read: two (COMPLETE and RUNNING, then PRUNED) counted twice a trial pruned between them
    live = [t for t in trial.study.get_trials(
        deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING, TrialState.PRUNED))
        if t.state != TrialState.PRUNED or not t.user_attrs.get(SURPLUS)]
    if sum(t.number < trial.number for t in live) >= int(planned):
        trial.set_user_attr(SURPLUS, True)
        trial.study.stop()
        raise optuna.TrialPruned("the study already holds its planned trials")


def _climbed(trials: list[FrozenTrial]) -> dict[int, Verdict]:
    """The rungs finished trials of one deployment climbed (the earliest trial's verdict per rung)."""
    known: dict[int, Verdict] = {}
    for done in trials:
        for name, value in done.user_attrs.items():
            if name.startswith("rung") and name[4:].isdigit():
                known.setdefault(int(name[4:]), Verdict.from_dict(value))
    return known
