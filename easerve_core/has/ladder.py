"""HAS's multi-fidelity ladder: what one stream says of a deployment, and how streams grow.

A :class:`Verdict` is one evaluation: goodput, attainment, and whether the
queue was still growing at the end (:mod:`easerve_core.stability`). Its
:attr:`~Verdict.score` is what the study maximises: the goodput of a stable
run, and for an unstable one ``goodput / offered - 1``, which is negative,
so every unstable run ranks below every stable one (a stable run's
goodput is at least 0) and among themselves the unstable keep their order.

A :class:`Ladder` says how a trial climbs (docs/has.md §3): the full stream
(sized by :mod:`easerve_core.trial_length`) is cut into nested prefixes,
``rungs`` of it (default 1/9, 1/3, 1); a trial is scored on the shortest
first, and Optuna's :class:`~optuna.pruners.SuccessiveHalvingPruner`
(reduction factor 3, the rung's share of the stream as the resource)
lets only the best third of the trials at a rung go on to the next. After
the search the ``recheck_top`` best distinct deployments that finished the
ladder run again on streams ``recheck_factor`` times the full length, drawn
with ``recheck_seeds`` new seeds, and the pick is the best of them there
(:mod:`easerve_core.has.recheck`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from optuna.pruners import SuccessiveHalvingPruner

from easerve_core import checks
from easerve_core.deployment import Deployment
from easerve_core.settings import Settings, rule


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """One evaluation of one deployment (the mean over the evaluator's streams)."""

    goodput_rps: float
    attainment: float
    unstable: bool
    #: requests per second of arrivals in the streams judged
    offered_rps: float
    num_requests: int
    #: which stability test fired ("" when stable)
    reason: str = ""

    @property
    def score(self) -> float:
        """The study's objective (module docstring)."""
        if not self.unstable:
            return self.goodput_rps
        offered = self.offered_rps if self.offered_rps > 0 else 1.0
        return min(self.goodput_rps / offered, 1.0) - 1.0 - 1e-9

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        return cls(**data)

    @classmethod
    def mean(cls, verdicts: Sequence[Verdict]) -> Verdict:
        """Several streams as one: mean goodput and attainment; unstable if any stream was."""
        if not verdicts:
            raise ValueError("no verdicts to merge")
        n = len(verdicts)
        reasons = sorted({v.reason for v in verdicts if v.reason})
        return cls(goodput_rps=sum(v.goodput_rps for v in verdicts) / n,
                   attainment=sum(v.attainment for v in verdicts) / n,
                   unstable=any(v.unstable for v in verdicts),
                   offered_rps=sum(v.offered_rps for v in verdicts) / n,
                   num_requests=sum(v.num_requests for v in verdicts), reason="+".join(reasons))


@runtime_checkable
class LadderEvaluator(Protocol):
    """An evaluator HAS can run on streams of several lengths (``sim.evaluate.SimEvaluator``)."""

    def verdict(self, deployment: Deployment, *, fraction: float = 1.0) -> Verdict:
        """The deployment on the first ``fraction`` of each of the evaluator's streams."""
        ...

    def recheck(self, deployment: Deployment, *, factor: float, index: int) -> Verdict:
        """The deployment on the ``index``-th long stream, ``factor`` times the full length
        (drawn with :func:`easerve_core.has.recheck.recheck_seed` of the evaluator's seed)."""
        ...

    @property
    def distinct_long_streams(self) -> int | None:
        """How many different long streams :meth:`recheck` can give (None: as many as asked; a
        trace, replayed as is, gives one)."""
        ...


def _rungs(name: str, rungs: Any) -> Any:
    if (not rungs or any(not 0 < r <= 1 for r in rungs) or list(rungs) != sorted(set(rungs))
            or rungs[-1] != 1.0):
        raise ValueError(f"{name} must rise strictly within (0, 1] and end at 1, got {rungs!r}")
    return rungs


def _at_least_one(name: str, value: Any) -> Any:
    if checks.positive(name, value) < 1.0:
        raise ValueError(f"{name} must be at least 1, got {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Ladder(Settings):
    """How trials climb from short streams to long ones (module docstring)."""

    rungs: tuple[float, ...] = field(default=(1 / 9, 1 / 3, 1.0), metadata=rule(_rungs))
    reduction_factor: int = field(default=3, metadata=rule(checks.integer, minimum=2))
    recheck_top: int = field(default=3, metadata=rule(checks.integer, minimum=0, label="recheck-top"))
    recheck_factor: float = field(default=4.0, metadata=rule(_at_least_one))
    recheck_seeds: int = field(default=3, metadata=rule(checks.integer, minimum=1, label="recheck-seeds"))

    def __post_init__(self) -> None:
        self.validate()
        if any(self.step(k) != self.reduction_factor ** k for k in range(len(self.rungs))):
            raise ValueError(f"rungs must grow by the reduction factor {self.reduction_factor} "
                             f"(the pruner's rungs), got {self.rungs!r}")

    def step(self, rung: int) -> int:
        """The resource Optuna sees at ``rung``: its share of the stream in units of the first rung."""
        return max(1, round(self.rungs[rung] / self.rungs[0]))

    def pruner(self) -> SuccessiveHalvingPruner:
        return SuccessiveHalvingPruner(min_resource=1, reduction_factor=self.reduction_factor,
                                       min_early_stopping_rate=0)

    @property
    def single(self) -> bool:
        return len(self.rungs) == 1


#: one rung: every trial on the full stream (no pruning)
SINGLE_RUNG = Ladder(rungs=(1.0,), recheck_top=0)
