"""SLO tiers, absolute SLOs, goodput and the run summary (DESIGN.md §4.4).

An SLO is a pair of per-request limits, on TTFT and on TPOT. A tier scales
a model's *unloaded* TTFT and TPOT on the cluster (one request alone on an
idle deployment), DistServe-style, so one tier name means the same
strictness for every model and GPU. Five tiers, strictest first, each also
known by the paper's label (S1..S5, S3 "moderate"); the numbers and why
are in docs/metrics.md:

==========  =====  ===============  ===============
tier        label  TTFT x unloaded  TPOT x unloaded
==========  =====  ===============  ===============
strict      s1     2                1.5
tight       s2     5                2
moderate    s3     15               5
loose       s4     40               10
relaxed     s5     100              20
==========  =====  ===============  ===============

A user may instead set absolute limits (:class:`SLOSpec`: ``[slo] ttft_s``
and ``tpot_s``, as vLLM bench's ``--goodput ttft:MS tpot:MS``), each
replacing its tier's limit, and an attainment target.

A request meets the SLO when it finished ``ok`` and both its TTFT and its
TPOT are within the limits (a one-token output has no TPOT and meets that
half). ``goodput_rps`` counts such requests per second of makespan (first
arrival to last finish); ``attainment`` is their fraction of all requests.
A *run* sustains the SLO (:func:`sustains`) when its P99 TTFT and P99 TPOT
are within the limits (the paper's P99 SLO), or, when the SLO carries an
attainment target, when at least that fraction of its requests meet it.
:func:`within_slo` is that per-request rule, written once: the frame's
:func:`meets_slo` and the engines' controllers (:func:`request_meets_slo`)
apply it. The module runs past 300 lines because the SLO, the rule and the
summaries it feeds read as one unit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from easerve_core import checks
from easerve_core.rate_search import Direction, RateLadder, find_capacity
from easerve_core.request import Status, tpot_s, ttft_s
from easerve_core.settings import Settings, refuse_unknown, rule


@dataclass(frozen=True, slots=True, kw_only=True)
class SLOTier:
    name: str
    ttft_scale: float
    tpot_scale: float

    def __post_init__(self) -> None:
        checks.positive("ttft_scale", self.ttft_scale)
        checks.positive("tpot_scale", self.tpot_scale)


#: the five tiers, strictest first (module docstring)
SLO_TIERS: Mapping[str, SLOTier] = {
    "strict": SLOTier(name="strict", ttft_scale=2.0, tpot_scale=1.5),
    "tight": SLOTier(name="tight", ttft_scale=5.0, tpot_scale=2.0),
    "moderate": SLOTier(name="moderate", ttft_scale=15.0, tpot_scale=5.0),
    "loose": SLOTier(name="loose", ttft_scale=40.0, tpot_scale=10.0),
    "relaxed": SLOTier(name="relaxed", ttft_scale=100.0, tpot_scale=20.0),
}
#: the paper's labels of the five tiers (S1 strictest, S3 "moderate")
TIER_ALIASES: Mapping[str, str] = {f"s{i}": name for i, name in enumerate(SLO_TIERS, start=1)}
#: every name a tier may be given by
TIER_NAMES: tuple[str, ...] = (*SLO_TIERS, *TIER_ALIASES)
DEFAULT_TIER = "moderate"


def tier(name: str, what: str = "slo tier") -> SLOTier:
    """The tier called ``name`` (a tier's name or its label ``s1``..``s5``); ``what`` names it in errors."""
    checks.one_of(what, name, TIER_NAMES)
    return SLO_TIERS[TIER_ALIASES.get(name, name)]


@dataclass(frozen=True, slots=True, kw_only=True)
class SLO:
    """Absolute per-request limits in seconds, and the run's attainment target (None: P99)."""

    ttft_s: float
    tpot_s: float
    tier: str = "custom"
    attainment: float | None = None

    def __post_init__(self) -> None:
        checks.positive("ttft_s", self.ttft_s)
        checks.positive("tpot_s", self.tpot_s)
        if self.attainment is not None:
            _attainment_target("attainment", self.attainment)

    @classmethod
    def from_tier(cls, name: str, *, unloaded_ttft_s: float, unloaded_tpot_s: float) -> SLO:
        """The tier's limits (its canonical name as the SLO's ``tier``)."""
        t = tier(name)
        return cls(
            ttft_s=t.ttft_scale * checks.positive("unloaded_ttft_s", unloaded_ttft_s),
            tpot_s=t.tpot_scale * checks.positive("unloaded_tpot_s", unloaded_tpot_s),
            tier=t.name,
        )


def _attainment_target(name: str, value: Any) -> float:
    out = checks.finite(name, value)
    if not 0.0 < out <= 1.0:
        raise ValueError(f"{name} must be in (0, 1], got {value!r}")
    return out


def _tier_name(name: str, value: Any) -> str:
    return tier(value, name).name


def _unset(check: Any) -> Any:
    """A field left None, or checked and holding the check's value."""
    return field(default=None, metadata=rule(check, store=True, optional=True))


#: the keys of ``[slo]``
SLO_KEYS = ("tier", "ttft_s", "tpot_s", "attainment")


@dataclass(frozen=True, slots=True, kw_only=True)
class SLOSpec(Settings):
    """The SLO as a user sets it in ``[slo]``: a tier, absolute limits, an attainment target.

    ``ttft_s`` / ``tpot_s`` (seconds, per request) replace the tier's limit
    on that metric; with both given the tier does not matter and no profile
    is needed. The SLO is then called ``custom``. ``attainment`` (in (0, 1]):
    a run sustains the SLO when at least that fraction of its requests meet
    both limits; None keeps the P99 rule (:func:`sustains`).
    """

    prefix = "slo."
    tier: str = field(default=DEFAULT_TIER, metadata=rule(_tier_name))
    ttft_s: float | None = _unset(checks.positive)
    tpot_s: float | None = _unset(checks.positive)
    attainment: float | None = _unset(_attainment_target)

    @classmethod
    def from_dict(cls, table: Mapping[str, Any]) -> SLOSpec:
        refuse_unknown(table, SLO_KEYS, "slo", list_known=False)
        name = table.get("tier", DEFAULT_TIER)
        if not isinstance(name, str):
            raise ValueError(f"slo.tier must be a tier name, got {name!r}")
        return cls(tier=name, ttft_s=table.get("ttft_s"), tpot_s=table.get("tpot_s"),
                   attainment=table.get("attainment"))

    def to_dict(self) -> dict[str, Any]:
        """``[slo]`` as given (keys left unset stay out)."""
        out: dict[str, Any] = {"tier": self.tier}
        out.update({k: getattr(self, k) for k in SLO_KEYS[1:] if getattr(self, k) is not None})
        return out

    def with_tier(self, name: str) -> SLOSpec:
        return replace(self, tier=name)

    @property
    def absolute(self) -> bool:
        """Both limits given: the SLO needs no unloaded latencies."""
        return self.ttft_s is not None and self.tpot_s is not None

    def resolve(self, *, unloaded_ttft_s: float | None = None,
                unloaded_tpot_s: float | None = None) -> SLO:
        """The absolute SLO; the unloaded latencies are needed for a limit the spec leaves to the tier."""
        t = tier(self.tier, "slo.tier")
        limits = []
        for given, scale, unloaded, what in ((self.ttft_s, t.ttft_scale, unloaded_ttft_s, "ttft"),
                                             (self.tpot_s, t.tpot_scale, unloaded_tpot_s, "tpot")):
            if given is None and unloaded is None:
                raise ValueError(f"slo.{what}_s is not set and tier {self.tier!r} needs the unloaded "
                                 f"{what.upper()} (a latency profile)")
            limits.append(given if given is not None
                          else scale * checks.positive(f"unloaded_{what}_s", unloaded))
        custom = self.ttft_s is not None or self.tpot_s is not None
        return SLO(ttft_s=limits[0], tpot_s=limits[1], tier="custom" if custom else t.name,
                   attainment=self.attainment)


def within_slo(ttft: Any, tpot: Any, slo: SLO) -> Any:
    """The one "met the SLO" rule, elementwise: TTFT within the limit, and TPOT within it or NaN.

    ``ttft`` and ``tpot`` are seconds: floats, numpy arrays or Series (a NaN
    TPOT is a one-token output, which meets that half; a NaN TTFT fails).
    :func:`meets_slo` applies it to a record frame, :func:`request_meets_slo`
    to one request as an engine's controller hears of it.
    """
    return (ttft <= slo.ttft_s) & (pd.isna(tpot) | (tpot <= slo.tpot_s))


def meets_slo(frame: pd.DataFrame, slo: SLO) -> pd.Series:
    """Per record: finished ok with TTFT and TPOT within ``slo``."""
    ok = frame["status"] == Status.OK.value
    return (ok & within_slo(ttft_s(frame), tpot_s(frame), slo)).fillna(False)


def request_meets_slo(slo: SLO | None, *, ok: bool, arrival_s: float, first_token_s: float,
                      finish_s: float, output_tokens: int) -> bool:
    """One settled request (the :func:`meets_slo` rule on scalars): ok, with TTFT and TPOT within
    ``slo``; every ok request meets no SLO (None). TPOT as :func:`~easerve_core.request.tpot_s`."""
    if not ok:
        return False
    if slo is None:
        return True
    steps = output_tokens - 1
    tpot = (finish_s - first_token_s) / steps if steps > 0 else math.nan
    return bool(within_slo(first_token_s - arrival_s, tpot, slo))


def makespan_s(frame: pd.DataFrame) -> float:
    """First arrival to last finish (0 for an empty or unfinished run)."""
    if frame.empty:
        return 0.0
    end = frame["finish_s"].max()
    if not math.isfinite(end):
        return 0.0
    return float(end - frame["arrival_s"].min())


def goodput_rps(frame: pd.DataFrame, slo: SLO) -> float:
    span = makespan_s(frame)
    return float(meets_slo(frame, slo).sum()) / span if span > 0 else 0.0


def attainment(frame: pd.DataFrame, slo: SLO) -> float:
    return float(meets_slo(frame, slo).mean()) if len(frame) else 0.0


def _pct(values: pd.Series, q: float) -> float:
    clean = values.dropna().to_numpy(dtype=float)
    return float(np.percentile(clean, q)) if clean.size else math.nan


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """The headline numbers of one run."""

    num_requests: int
    num_ok: int
    num_failed: int
    num_rejected: int
    makespan_s: float
    throughput_rps: float
    goodput_rps: float | None
    attainment: float | None
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    slo_tier: str | None
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_mean_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    tpot_p99_s: float

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v)
                for k, v in asdict(self).items()}


def summarize(frame: pd.DataFrame, slo: SLO | None = None) -> Summary:
    """Summarise a record frame (see :func:`easerve_core.request.records_to_frame`)."""
    ok = frame[frame["status"] == Status.OK.value]
    span = makespan_s(frame)
    ttft = ttft_s(ok)
    tpot = tpot_s(ok)
    return Summary(
        num_requests=len(frame),
        num_ok=len(ok),
        num_failed=int((frame["status"] == Status.FAILED.value).sum()),
        num_rejected=int((frame["status"] == Status.REJECTED.value).sum()),
        makespan_s=span,
        throughput_rps=len(ok) / span if span > 0 else 0.0,
        goodput_rps=None if slo is None else goodput_rps(frame, slo),
        attainment=None if slo is None else attainment(frame, slo),
        slo_ttft_s=None if slo is None else slo.ttft_s,
        slo_tpot_s=None if slo is None else slo.tpot_s,
        slo_tier=None if slo is None else slo.tier,
        ttft_mean_s=float(ttft.mean()) if len(ttft.dropna()) else math.nan,
        ttft_p50_s=_pct(ttft, 50),
        ttft_p90_s=_pct(ttft, 90),
        ttft_p99_s=_pct(ttft, 99),
        tpot_mean_s=float(tpot.mean()) if len(tpot.dropna()) else math.nan,
        tpot_p50_s=_pct(tpot, 50),
        tpot_p90_s=_pct(tpot, 90),
        tpot_p99_s=_pct(tpot, 99),
    )


def within_p99(s: Summary) -> bool:
    """A summary made with an SLO: some request ok, P99 TTFT and P99 TPOT within the limits."""
    if s.slo_ttft_s is None or s.slo_tpot_s is None:
        raise ValueError("the summary was made without an SLO")
    tpot_ok = math.isnan(s.tpot_p99_s) or s.tpot_p99_s <= s.slo_tpot_s
    return bool(s.num_ok) and s.ttft_p99_s <= s.slo_ttft_s and tpot_ok


def sustains(frame: pd.DataFrame, slo: SLO) -> bool:
    """Whether a run as a whole met ``slo`` (module docstring): its attainment reached the SLO's
    target, or, without a target, its P99 TTFT and P99 TPOT were within the limits."""
    if slo.attainment is not None:
        return len(frame) > 0 and attainment(frame, slo) >= slo.attainment
    return within_p99(summarize(frame, slo))


def max_rate_within_slo(summaries: Mapping[float, Summary]) -> float:
    """The highest arrival rate whose run kept P99 TTFT and P99 TPOT within its SLO.

    ``summaries`` maps arrival rate to the summary of a run at that rate (each
    summarised with an SLO). Rates above the first failing one do not count:
    the answer is the largest rate r such that every rate <= r passed. 0.0 if
    the lowest rate already fails. An ``UP``
    :class:`~easerve_core.rate_search.RateLadder` over the rates, judged by
    :func:`within_p99`.
    """
    def holds(rate: float) -> bool:
        s = summaries[rate]
        if s.slo_ttft_s is None or s.slo_tpot_s is None:
            raise ValueError(f"summary at rate {rate!r} was made without an SLO")
        return within_p99(s)

    return find_capacity(RateLadder(sorted(summaries), direction=Direction.UP), holds).capacity_hz
