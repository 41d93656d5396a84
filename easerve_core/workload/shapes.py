"""Arrival shapes: Poisson arrivals whose rate moves like real traffic.

Four shapes of the rate ``rate(t)``, ``t`` in seconds from the start of the
run (docs/workloads.md, "Arrival shapes"):

* :class:`SineArrivals`, diurnal: ``rate_hz * (1 + amplitude_frac *
  sin(2 pi (t / period_s + phase_frac)))``.
* :class:`StepArrivals`: ``rate_before_hz`` until ``at_s``, then
  ``rate_after_hz``.
* :class:`SpikeArrivals`: ``rate_hz``, but ``spike_rate_hz`` from
  ``start_s`` for ``duration_s``.
* :class:`DriftArrivals`: linear from ``start_rate_hz`` at 0 to
  ``end_rate_hz`` at ``duration_s``, then ``end_rate_hz``.

Sampling is exact, by time inversion (the time-rescaling theorem): the
arrival times ``y_1 < y_2 < ...`` of a unit-rate Poisson process (sums of
Exp(1) gaps from the injected generator) go through the inverse of the
cumulative rate ``cumulative(t)``, the integral of ``rate`` over [0, t];
``t_i = cumulative^-1(y_i)`` is then a Poisson process of rate ``rate(t)``.
The inverse is closed-form for step, spike (piecewise linear) and drift (a
quadratic); the sine's is found by bisection to float precision. The unit
draws do not depend on the rates, so a rate rescale moves every arrival
monotonically, the same seed giving common random numbers across a sweep.

``mean_rate_hz`` is the long-run rate, the limit of ``cumulative(t) / t``:
``rate_hz`` for sine and spike, ``rate_after_hz`` for step,
``end_rate_hz`` for drift; it must be > 0 so that every run ends.
``with_rate`` scales every rate by one factor and keeps every time.
:data:`SHAPES` is the one table from an ``arrival`` name to its shape.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, ClassVar, Self

import numpy as np

from easerve_core import checks, limits
from easerve_core.settings import Settings, rule

_BISECTION_STEPS = 64  # halves a bracket of any width below one float ulp


def _unit_arrivals(n: int, rng: np.random.Generator) -> np.ndarray:
    n = checks.integer("num_requests", n, minimum=0)
    return np.cumsum(rng.exponential(1.0, size=n))


def _piecewise_cumulative(edges_s: np.ndarray, rates_hz: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The integral of ``rates_hz[k]`` on ``[edges_s[k], edges_s[k+1])`` (the last forever)."""
    cum = np.concatenate(([0.0], np.cumsum(np.diff(edges_s) * rates_hz[:-1])))
    idx = np.clip(np.searchsorted(edges_s, t, side="right") - 1, 0, len(rates_hz) - 1)
    return np.asarray(cum[idx] + rates_hz[idx] * (t - edges_s[idx]), dtype=float)


def _piecewise_inverse(edges_s: np.ndarray, rates_hz: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The inverse of :func:`_piecewise_cumulative`; the last rate must be > 0."""
    cum = np.concatenate(([0.0], np.cumsum(np.diff(edges_s) * rates_hz[:-1])))
    # A zero-rate segment has no width in ``cum``, so side="right" steps over it.
    idx = np.clip(np.searchsorted(cum, y, side="right") - 1, 0, len(rates_hz) - 1)
    return np.asarray(edges_s[idx] + (y - cum[idx]) / rates_hz[idx], dtype=float)


@dataclass(frozen=True, slots=True, kw_only=True)
class _TwoRates(Settings):
    """A shape with two rates, one of them its long-run rate: the field ``_mean`` names.
    :meth:`with_rate` sets that one and scales the other, ``_scaled``, by the same factor."""

    _mean: ClassVar[str]
    _scaled: ClassVar[str]

    @property
    def mean_rate_hz(self) -> float:
        rate: float = getattr(self, self._mean)
        return rate

    def with_rate(self, rate_hz: float) -> Self:
        f = limits.rate("rate_hz", rate_hz) / self.mean_rate_hz
        return replace(self, **{self._scaled: getattr(self, self._scaled) * f, self._mean: rate_hz})


@dataclass(frozen=True, slots=True, kw_only=True)
class SineArrivals(Settings):
    """Diurnal traffic: a sine around ``rate_hz``, never negative (``amplitude_frac <= 1``)."""

    rate_hz: float = field(metadata=rule(limits.rate))
    amplitude_frac: float = field(metadata=rule(checks.fraction))
    period_s: float = field(metadata=rule(checks.positive))
    phase_frac: float = field(default=0.0, metadata=rule(checks.fraction))

    @property
    def mean_rate_hz(self) -> float:
        return self.rate_hz

    def with_rate(self, rate_hz: float) -> SineArrivals:
        return replace(self, rate_hz=limits.rate("rate_hz", rate_hz))

    def _angle(self, t: Any) -> np.ndarray:
        return 2.0 * math.pi * (np.asarray(t, dtype=float) / self.period_s + self.phase_frac)

    def rate_at(self, t: Any) -> np.ndarray:
        return np.asarray(self.rate_hz * (1.0 + self.amplitude_frac * np.sin(self._angle(t))))

    def cumulative(self, t: Any) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        swing = self.rate_hz * self.amplitude_frac * self.period_s / (2.0 * math.pi)
        start = math.cos(2.0 * math.pi * self.phase_frac)
        return np.asarray(self.rate_hz * t - swing * (np.cos(self._angle(t)) - start))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        y = _unit_arrivals(n, rng)
        # cumulative(t) is within rate * amplitude * period / pi of rate * t.
        width = self.amplitude_frac * self.period_s / math.pi
        lo = np.maximum(y / self.rate_hz - width, 0.0)
        hi = y / self.rate_hz + width
        for _ in range(_BISECTION_STEPS if width > 0 else 0):
            mid = 0.5 * (lo + hi)
            below = self.cumulative(mid) < y
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return np.maximum.accumulate(0.5 * (lo + hi)) if y.size else y


class _Piecewise:
    """Arrivals whose rate is constant between edges: ``_pieces()`` gives (edges, rates)."""

    __slots__ = ()

    def _pieces(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def cumulative(self, t: Any) -> np.ndarray:
        return _piecewise_cumulative(*self._pieces(), np.asarray(t, dtype=float))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return _piecewise_inverse(*self._pieces(), _unit_arrivals(n, rng))


@dataclass(frozen=True, slots=True, kw_only=True)
class StepArrivals(_Piecewise, _TwoRates):
    """A rate shift: ``rate_before_hz`` (may be 0) until ``at_s``, ``rate_after_hz`` after."""

    _mean, _scaled = "rate_after_hz", "rate_before_hz"
    rate_before_hz: float = field(metadata=rule(checks.non_negative))
    rate_after_hz: float = field(metadata=rule(limits.rate))
    at_s: float = field(metadata=rule(checks.non_negative))

    def _pieces(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array([0.0, self.at_s]), np.array([self.rate_before_hz, self.rate_after_hz])

    def rate_at(self, t: Any) -> np.ndarray:
        return np.where(np.asarray(t, dtype=float) < self.at_s, self.rate_before_hz, self.rate_after_hz)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpikeArrivals(_Piecewise, _TwoRates):
    """A burst: ``spike_rate_hz`` (higher or lower) for ``duration_s`` from ``start_s``."""

    _mean, _scaled = "rate_hz", "spike_rate_hz"
    rate_hz: float = field(metadata=rule(limits.rate))
    spike_rate_hz: float = field(metadata=rule(checks.non_negative))
    start_s: float = field(metadata=rule(checks.non_negative))
    duration_s: float = field(metadata=rule(checks.positive))

    def _pieces(self) -> tuple[np.ndarray, np.ndarray]:
        edges = np.array([0.0, self.start_s, self.start_s + self.duration_s])
        return edges, np.array([self.rate_hz, self.spike_rate_hz, self.rate_hz])

    def rate_at(self, t: Any) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        inside = (t >= self.start_s) & (t < self.start_s + self.duration_s)
        return np.where(inside, self.spike_rate_hz, self.rate_hz)


@dataclass(frozen=True, slots=True, kw_only=True)
class DriftArrivals(_TwoRates):
    """A slow drift: linear from ``start_rate_hz`` to ``end_rate_hz`` over ``duration_s``."""

    _mean, _scaled = "end_rate_hz", "start_rate_hz"
    start_rate_hz: float = field(metadata=rule(checks.non_negative))
    end_rate_hz: float = field(metadata=rule(checks.positive))
    duration_s: float = field(metadata=rule(checks.positive))

    @property
    def _slope(self) -> float:
        return (self.end_rate_hz - self.start_rate_hz) / self.duration_s

    def rate_at(self, t: Any) -> np.ndarray:
        t = np.minimum(np.asarray(t, dtype=float), self.duration_s)
        return np.asarray(self.start_rate_hz + self._slope * t)

    def cumulative(self, t: Any) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        ramp = np.minimum(t, self.duration_s)
        return np.asarray(self.start_rate_hz * ramp + 0.5 * self._slope * ramp**2
                          + self.end_rate_hz * np.maximum(t - self.duration_s, 0.0))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        y = _unit_arrivals(n, rng)
        s, k, d = self.start_rate_hz, self._slope, self.duration_s
        ramp_total = 0.5 * (s + self.end_rate_hz) * d
        # Root of s t + k t^2 / 2 = y in the stable form 2y / (s + sqrt(s^2 + 2ky)); within
        # the ramp s^2 + 2ky = rate(t)^2 >= 0.
        root = s + np.sqrt(np.maximum(s * s + 2.0 * k * np.minimum(y, ramp_total), 0.0))
        on_ramp = 2.0 * y / np.where(root > 0, root, 1.0)
        after = d + (y - ramp_total) / self.end_rate_hz
        return np.where(y <= ramp_total, on_ramp, after)


#: arrival name -> shape class (its dataclass fields are the [workload] keys)
SHAPES: Mapping[str, type[SineArrivals | StepArrivals | SpikeArrivals | DriftArrivals]] = {
    "sine": SineArrivals,
    "step": StepArrivals,
    "spike": SpikeArrivals,
    "drift": DriftArrivals,
}


def shape_fields(kind: str) -> tuple[str, ...]:
    """The ``[workload]`` keys of the shape ``kind``, in declaration order."""
    return tuple(f.name for f in fields(SHAPES[kind]))


def required_fields(kind: str) -> tuple[str, ...]:
    """The keys of the shape ``kind`` that have no default."""
    return tuple(f.name for f in fields(SHAPES[kind])
                 if f.default is MISSING and f.default_factory is MISSING)
