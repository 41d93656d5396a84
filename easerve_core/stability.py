"""Is a deployment's queue still growing at the end of a stream? (HAS ranks such a run last.)

A finite stream always drains, so a deployment that cannot keep up shows
it only as a trend: each later arrival waits longer. :func:`assess` reads
a run's records (arrivals in order, TTFT, whether each met the SLO) and
calls the run **unstable** when either test fires (docs/has.md §7):

1. **TTFT trend over the second half.** The requests that arrived in the
   second half of the arrival span, in arrival order, are cut into
   ``m = min(20, n // 10)`` chunks of equal count; each chunk's median TTFT
   (a request that did not finish ok counts as infinitely late) is one
   point. Kendall's tau between chunk order and chunk median tests for an
   upward trend at the one-sided 1% level (``z = tau / sd >= 2.326``,
   ``sd = sqrt(2 (2m + 5) / (9 m (m - 1)))``); chunk medians rather than
   single requests keep the test from reading the short-range correlation
   of queueing delays as a trend. The trend also has to matter: the
   Theil-Sen slope of chunk median against chunk arrival time, times the
   half's span, must rise by at least ``rise_frac`` (default 0.25) of the
   TTFT limit. A queue that grows at 5% of the rate over a stream of the
   growth horizon (:mod:`easerve_core.trial_length`) rises by about half
   the limit over the second half.
2. **The tail falls behind.** The SLO attainment of the last third of the
   arrivals is below the whole run's by at least ``tail_drop`` (default
   0.05): the late requests fare worse than the run as a whole.

Pure: numpy and pandas on a record frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from easerve_core import checks
from easerve_core.request import Status, ttft_s
from easerve_core.settings import Settings, rule
from easerve_core.slo import SLO, meets_slo

#: one-sided 1% critical value of the standard normal
Z_CRITICAL = 2.326
#: the most chunks the trend test cuts the second half into
MAX_CHUNKS = 20
#: requests per chunk at least
MIN_CHUNK = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class StabilityRule(Settings):
    """The two tests' thresholds (module docstring)."""

    rise_frac: float = field(default=0.25, metadata=rule(checks.positive))
    tail_drop: float = field(default=0.05, metadata=rule(checks.fraction))
    z_critical: float = field(default=Z_CRITICAL, metadata=rule(checks.positive))


@dataclass(frozen=True, slots=True, kw_only=True)
class Stability:
    """What :func:`assess` found in one run."""

    unstable: bool
    #: Kendall z of chunk median TTFT over the second half (0 when too few requests)
    trend_z: float
    #: Theil-Sen rise of chunk median TTFT over the second half, seconds (inf: the tail never finished)
    rise_s: float
    attainment: float
    tail_attainment: float
    #: which test fired: "", "trend", "tail" or "trend+tail"
    reason: str


def _kendall_z(values: np.ndarray) -> float:
    m = len(values)
    if m < 3:
        return 0.0
    with np.errstate(invalid="ignore"):  # inf - inf: a tie
        diff = np.sign(values[None, :] - values[:, None])  # [i, j]: sign(v_j - v_i)
    upper = np.triu(np.nan_to_num(diff, nan=0.0), k=1)
    tau = upper.sum() / (m * (m - 1) / 2)
    sd = math.sqrt(2.0 * (2 * m + 5) / (9.0 * m * (m - 1)))
    return float(tau / sd)


def _theil_sen_rise(times: np.ndarray, values: np.ndarray) -> float:
    """Median pairwise slope times the span of ``times``; inf when the last point is inf."""
    if len(values) < 2:
        return 0.0
    if math.isinf(values[-1]) and not math.isinf(values[0]):
        return math.inf
    finite = np.isfinite(values)
    t, v = times[finite], values[finite]
    if len(v) < 2:
        return 0.0
    i, j = np.triu_indices(len(v), k=1)
    dt = t[j] - t[i]
    keep = dt > 0
    if not keep.any():
        return 0.0
    slope = float(np.median((v[j] - v[i])[keep] / dt[keep]))
    return slope * float(times[-1] - times[0])


def _chunks(arrival: np.ndarray, ttft: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = min(MAX_CHUNKS, len(ttft) // MIN_CHUNK)
    if m < 3:
        return np.empty(0), np.empty(0)
    parts = np.array_split(np.arange(len(ttft)), m)
    times = np.array([float(np.mean(arrival[p])) for p in parts])
    medians = np.array([float(np.median(ttft[p])) for p in parts])
    return times, medians


def assess(frame: pd.DataFrame, slo: SLO, rule: StabilityRule | None = None) -> Stability:
    """Whether the run in ``frame`` ended with its queue still growing (module docstring)."""
    rule = rule or StabilityRule()
    if frame.empty:
        return Stability(unstable=False, trend_z=0.0, rise_s=0.0, attainment=0.0, tail_attainment=0.0,
                         reason="")
    ordered = frame.sort_values("arrival_s", kind="stable")
    arrival = ordered["arrival_s"].to_numpy(dtype=float)
    ok = (ordered["status"] == Status.OK.value).to_numpy()
    ttft = np.where(ok, ttft_s(ordered).to_numpy(dtype=float), np.inf)
    ttft = np.where(np.isnan(ttft), np.inf, ttft)
    met = meets_slo(ordered, slo).to_numpy(dtype=bool)

    mid = arrival[0] + (arrival[-1] - arrival[0]) / 2.0
    half = arrival >= mid
    times, medians = _chunks(arrival[half], ttft[half])
    z = _kendall_z(medians) if len(medians) else 0.0
    rise = _theil_sen_rise(times, medians) if len(medians) else 0.0
    trend = z >= rule.z_critical and rise >= rule.rise_frac * slo.ttft_s

    whole = float(met.mean())
    tail_start = arrival[0] + 2.0 * (arrival[-1] - arrival[0]) / 3.0
    tail = met[arrival >= tail_start]
    tail_att = float(tail.mean()) if len(tail) else whole
    falls = whole - tail_att >= rule.tail_drop
    reason = "+".join(name for name, fired in (("trend", trend), ("tail", falls)) if fired)
    return Stability(unstable=bool(trend or falls), trend_z=z, rise_s=rise, attainment=whole,
                     tail_attainment=tail_att, reason=reason)
