"""Arrival processes: when requests arrive, from an injected random generator.

Every process answers ``sample(n, rng) -> times``: ``n`` absolute arrival
times in seconds, non-decreasing, starting after time zero. The same
generator state gives the same times. ``with_rate(rate_hz)`` is the same
process at another mean rate: every rate scaled by one factor, every
duration kept.

* :class:`PoissonArrivals`: exponential gaps at ``rate_hz``.
* :class:`GammaArrivals`: Gamma-distributed gaps with mean ``1/rate_hz`` and
  coefficient of variation ``cv``: shape ``k = 1/cv**2``. ``cv = 1`` is
  Poisson, ``cv > 1`` is bursty. vLLM's ``--burstiness`` is the Gamma shape,
  so ``burstiness = 1 / cv**2`` (burstiness 0.1 is cv 3.16).
* :class:`RateSchedule`: a piecewise-constant rate (rate shifts) with
  renewal gaps of coefficient of variation ``cv`` inside, built by time
  change: a unit-rate renewal process is mapped through the inverse of the
  cumulative rate. The schedule repeats when it runs out.
* :class:`ReplayedGaps`: a recorded sequence of gaps (a trace's), replayed in
  order from a drawn start, cyclically, scaled to ``rate_hz``: the trace's
  bursts, gap after gap, at another mean rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from easerve_core import checks, limits
from easerve_core.settings import Settings, rule


class ArrivalProcess(Protocol):
    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray: ...

    @property
    def mean_rate_hz(self) -> float: ...

    def with_rate(self, rate_hz: float) -> ArrivalProcess: ...


def _unit_gaps(n: int, cv: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` renewal gaps with mean 1 and coefficient of variation ``cv``."""
    if cv == 1.0:
        return rng.exponential(1.0, size=n)
    shape = 1.0 / (cv * cv)
    return rng.gamma(shape, 1.0 / shape, size=n)


class _Renewal:
    """Independent gaps of mean ``1 / rate_hz`` and coefficient of variation ``cv``."""

    __slots__ = ()
    rate_hz: float
    cv: float

    @property
    def mean_rate_hz(self) -> float:
        return self.rate_hz

    def with_rate(self, rate_hz: float) -> Any:
        return replace(self, rate_hz=rate_hz)  # type: ignore[type-var]

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        n = checks.integer("num_requests", n, minimum=0)
        return np.cumsum(_unit_gaps(n, self.cv, rng)) / self.rate_hz


@dataclass(frozen=True, slots=True, kw_only=True)
class PoissonArrivals(_Renewal, Settings):
    rate_hz: float = field(metadata=rule(limits.rate))

    @property
    def cv(self) -> float:  # type: ignore[override]
        return 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class GammaArrivals(_Renewal, Settings):
    rate_hz: float = field(metadata=rule(limits.rate))
    cv: float = field(default=1.0, metadata=rule(checks.positive))

    @property
    def burstiness(self) -> float:
        """vLLM's ``--burstiness`` for this process (the Gamma shape)."""
        return 1.0 / (self.cv * self.cv)


@dataclass(frozen=True, slots=True, kw_only=True)
class RateSegment(Settings):
    duration_s: float = field(metadata=rule(checks.positive))
    rate_hz: float = field(metadata=rule(checks.non_negative))


@dataclass(frozen=True, slots=True, kw_only=True)
class RateSchedule:
    """Piecewise-constant arrival rate, repeated; gaps of CV ``cv`` within."""

    segments: tuple[RateSegment, ...]
    cv: float = 1.0

    def __post_init__(self) -> None:
        segs = tuple(
            s if isinstance(s, RateSegment) else RateSegment(duration_s=s[0], rate_hz=s[1])
            for s in self.segments
        )
        if not segs:
            raise ValueError("schedule must hold at least one (duration_s, rate_hz) segment")
        if sum(s.rate_hz * s.duration_s for s in segs) <= 0:
            raise ValueError("schedule must have a positive rate in some segment")
        object.__setattr__(self, "segments", segs)
        checks.positive("cv", self.cv)

    @property
    def period_s(self) -> float:
        return sum(s.duration_s for s in self.segments)

    @property
    def mean_rate_hz(self) -> float:
        return sum(s.rate_hz * s.duration_s for s in self.segments) / self.period_s

    def with_rate(self, rate_hz: float) -> RateSchedule:
        factor = limits.rate("rate_hz", rate_hz) / self.mean_rate_hz
        segs = tuple(replace(s, rate_hz=s.rate_hz * factor) for s in self.segments)
        return replace(self, segments=segs)

    def rate_at(self, t: float) -> float:
        t = t % self.period_s
        for seg in self.segments:
            if t < seg.duration_s:
                return seg.rate_hz
            t -= seg.duration_s
        return self.segments[-1].rate_hz

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        n = checks.integer("num_requests", n, minimum=0)
        # Cumulative intensity at segment boundaries over one period.
        durations = np.array([s.duration_s for s in self.segments])
        rates = np.array([s.rate_hz for s in self.segments])
        edges_t = np.concatenate(([0.0], np.cumsum(durations)))
        edges_l = np.concatenate(([0.0], np.cumsum(durations * rates)))
        per_period = edges_l[-1]
        targets = np.cumsum(_unit_gaps(n, self.cv, rng))
        periods, within = np.divmod(targets, per_period)
        # Segment holding each target; zero-rate segments have no width in
        # intensity, so searchsorted skips them.
        idx = np.searchsorted(edges_l, within, side="right") - 1
        idx = np.clip(idx, 0, len(self.segments) - 1)
        offset = (within - edges_l[idx]) / np.where(rates[idx] > 0, rates[idx], 1.0)
        return periods * self.period_s + edges_t[idx] + offset


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayedGaps:
    """A recorded sequence of gaps between arrivals (a trace's), replayed at ``rate_hz``.

    A sample starts at a gap the generator draws and takes the next ``n`` in their recorded
    order, wrapping around to the first, each scaled by one factor so their mean is
    ``1 / rate_hz``: the order of the gaps, and so the bursts, is kept, where a renewal process
    would shuffle them. Two generators give two stretches of the recording.
    """

    gaps_s: tuple[float, ...]
    rate_hz: float

    def __post_init__(self) -> None:
        gaps = np.asarray(self.gaps_s, dtype=float)
        if gaps.size < 2:
            raise ValueError(f"gaps_s must hold at least two gaps, got {gaps.size}")
        if not (np.isfinite(gaps).all() and (gaps >= 0).all() and gaps.sum() > 0):
            raise ValueError("gaps_s must be finite and >= 0, and not all 0")
        object.__setattr__(self, "gaps_s", tuple(float(g) for g in gaps))
        limits.rate("rate_hz", self.rate_hz)

    @property
    def mean_rate_hz(self) -> float:
        return self.rate_hz

    def with_rate(self, rate_hz: float) -> ReplayedGaps:
        return replace(self, rate_hz=rate_hz)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        n = checks.integer("num_requests", n, minimum=0)
        gaps = np.asarray(self.gaps_s)
        start = int(rng.integers(gaps.size))
        taken = gaps[(start + np.arange(n)) % gaps.size]
        return np.cumsum(taken / (gaps.mean() * self.rate_hz))
