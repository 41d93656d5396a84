"""SLO tiers, goodput and the run summary (DESIGN.md §4.4).

An SLO is a pair of per-request limits, on TTFT and on TPOT. A tier scales
a model's *unloaded* TTFT and TPOT on the cluster (one request alone on an
idle deployment), DistServe-style, so one tier name means the same
strictness for every model and GPU. The numbers and why are in
docs/metrics.md:

=========  =============  =============
tier       TTFT x unloaded  TPOT x unloaded
=========  =============  =============
tight      5                2
moderate   15               5
loose      40               10
=========  =============  =============

A request meets the SLO when it finished ``ok`` and both its TTFT and its
TPOT are within the limits (a one-token output has no TPOT and meets that
half). ``goodput_rps`` counts such requests per second of makespan (first
arrival to last finish); ``attainment`` is their fraction of all requests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from easerve_core import checks
from easerve_core.request import Status, tpot_s, ttft_s


@dataclass(frozen=True, slots=True, kw_only=True)
class SLOTier:
    name: str
    ttft_scale: float
    tpot_scale: float

    def __post_init__(self) -> None:
        checks.positive("ttft_scale", self.ttft_scale)
        checks.positive("tpot_scale", self.tpot_scale)


SLO_TIERS: Mapping[str, SLOTier] = {
    "tight": SLOTier(name="tight", ttft_scale=5.0, tpot_scale=2.0),
    "moderate": SLOTier(name="moderate", ttft_scale=15.0, tpot_scale=5.0),
    "loose": SLOTier(name="loose", ttft_scale=40.0, tpot_scale=10.0),
}
DEFAULT_TIER = "moderate"


def tier(name: str) -> SLOTier:
    checks.one_of("slo tier", name, SLO_TIERS)
    return SLO_TIERS[name]


@dataclass(frozen=True, slots=True, kw_only=True)
class SLO:
    """Absolute per-request limits in seconds."""

    ttft_s: float
    tpot_s: float
    tier: str = "custom"

    def __post_init__(self) -> None:
        checks.positive("ttft_s", self.ttft_s)
        checks.positive("tpot_s", self.tpot_s)

    @classmethod
    def from_tier(cls, name: str, *, unloaded_ttft_s: float, unloaded_tpot_s: float) -> SLO:
        t = tier(name)
        return cls(
            ttft_s=t.ttft_scale * checks.positive("unloaded_ttft_s", unloaded_ttft_s),
            tpot_s=t.tpot_scale * checks.positive("unloaded_tpot_s", unloaded_tpot_s),
            tier=name,
        )


def meets_slo(frame: pd.DataFrame, slo: SLO) -> pd.Series:
    """Per record: finished ok with TTFT and TPOT within ``slo``."""
    ok = frame["status"] == Status.OK.value
    ttft = ttft_s(frame)
    tpot = tpot_s(frame)
    return (ok & (ttft <= slo.ttft_s) & (tpot.isna() | (tpot <= slo.tpot_s))).fillna(False)


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


def max_rate_within_slo(summaries: Mapping[float, Summary]) -> float:
    """The highest arrival rate whose run kept P99 TTFT and P99 TPOT within its SLO.

    ``summaries`` maps arrival rate to the summary of a run at that rate (each
    summarised with an SLO). Rates above the first failing one do not count:
    the answer is the largest rate r such that every rate <= r passed. 0.0 if
    the lowest rate already fails.
    """
    best = 0.0
    for rate in sorted(summaries):
        s = summaries[rate]
        if s.slo_ttft_s is None or s.slo_tpot_s is None:
            raise ValueError(f"summary at rate {rate!r} was made without an SLO")
        tpot_ok = math.isnan(s.tpot_p99_s) or s.tpot_p99_s <= s.slo_tpot_s
        if s.num_ok and s.ttft_p99_s <= s.slo_ttft_s and tpot_ok:
            best = rate
        else:
            break
    return best
