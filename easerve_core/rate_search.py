"""The highest arrival rate a deployment sustains within its SLO, found by bisection.

:class:`RateBisection` is a clock-agnostic policy like the batcher: it
proposes the next rate to try (:meth:`~RateBisection.next_probe`, a frozen
:class:`Probe`), hears whether a run at that rate sustained the SLO
(:meth:`~RateBisection.observe`; the engine decides, e.g. with
:func:`easerve_core.slo.sustains`) and, when it proposes nothing more,
answers with a :class:`Capacity`. It never runs anything itself.

The search has two phases (docs/metrics.md, "Capacity"):

1. **bracket**: try ``start_hz``; while the last rate sustained, multiply it
   by ``growth`` (stop at ``max_rate_hz``: the capacity is censored there);
   while it failed, divide by ``growth`` (stop below ``min_rate_hz``: the
   deployment sustains nothing the search looked at);
2. **bisect**: try the midpoint of the highest sustained and the lowest
   failed rate until they are within ``rel_tol_frac`` of the failed one.

The answer is the highest rate seen to sustain with a failing rate above it
within the tolerance. A curve that is not monotone in the rate (noise near
the cliff) still gives one such boundary, not necessarily the highest; runs
that reuse one seed at every rate (the same requests, their gaps scaled)
keep the curve as smooth as the model allows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from easerve_core import checks


class Phase(StrEnum):
    BRACKET = "bracket"
    BISECT = "bisect"


class Outcome(StrEnum):
    """How the search ended."""

    FOUND = "found"            # a sustained rate with a failing one within the tolerance above
    CENSORED = "censored"      # still sustained at max_rate_hz: the capacity is at least that
    NONE = "none"              # failed down to min_rate_hz
    STEPS = "steps"            # max_steps ran out before the bracket closed


@dataclass(frozen=True, slots=True)
class Probe:
    """Run at ``rate_hz`` next (``step`` counts from 0)."""

    rate_hz: float
    phase: Phase
    step: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Capacity:
    """The search's answer: ``capacity_hz`` sustained (0.0 if none), ``failed_hz`` the lowest failing
    rate above it (None if none was seen)."""

    capacity_hz: float
    failed_hz: float | None
    outcome: Outcome
    num_steps: int


class RateBisection:
    """Bracket, then bisect, the highest sustained arrival rate (see the module docstring)."""

    def __init__(self, start_hz: float, *, max_rate_hz: float, min_rate_hz: float | None = None,
                 growth: float = 2.0, rel_tol_frac: float = 0.02, max_steps: int = 30) -> None:
        self.start_hz = checks.positive("start_hz", start_hz)
        self.max_rate_hz = checks.positive("max_rate_hz", max_rate_hz)
        if self.max_rate_hz < self.start_hz:
            raise ValueError(f"max_rate_hz must be >= start_hz ({start_hz!r}), got {max_rate_hz!r}")
        self.min_rate_hz = checks.positive("min_rate_hz", self.start_hz / 1024 if min_rate_hz is None
                                           else min_rate_hz)
        if self.min_rate_hz > self.start_hz:
            raise ValueError(f"min_rate_hz must be <= start_hz ({start_hz!r}), got {min_rate_hz!r}")
        self.growth = checks.finite("growth", growth)
        if self.growth <= 1.0:
            raise ValueError(f"growth must be > 1, got {growth!r}")
        self.rel_tol_frac = checks.positive("rel_tol_frac", rel_tol_frac)
        if self.rel_tol_frac >= 1.0:
            raise ValueError(f"rel_tol_frac must be < 1, got {rel_tol_frac!r}")
        self.max_steps = checks.integer("max_steps", max_steps, minimum=1)
        self._lo: float | None = None  # highest sustained
        self._hi: float | None = None  # lowest failed
        self._pending: Probe | None = None
        self._steps = 0
        self._outcome: Outcome | None = None

    def next_probe(self) -> Probe | None:
        """The next rate to run, or None when the search is over (then ask :meth:`result`).

        Asking again before :meth:`observe` repeats the same probe.
        """
        if self._pending is not None:
            return self._pending
        if self._outcome is None:
            self._outcome = self._finished()
        if self._outcome is not None:
            return None
        lo, hi = self._lo, self._hi
        if lo is None and hi is None:
            rate, phase = self.start_hz, Phase.BRACKET
        elif hi is None:
            assert lo is not None
            rate, phase = min(lo * self.growth, self.max_rate_hz), Phase.BRACKET
        elif lo is None:
            rate, phase = hi / self.growth, Phase.BRACKET
        else:
            rate, phase = (lo + hi) / 2, Phase.BISECT
        self._pending = Probe(rate_hz=rate, phase=phase, step=self._steps)
        return self._pending

    def observe(self, rate_hz: float, sustained: bool) -> None:
        """The run at the pending probe's rate did (not) sustain the SLO."""
        if self._pending is None or not math.isclose(rate_hz, self._pending.rate_hz, rel_tol=1e-12):
            raise ValueError(f"observe: no probe at {rate_hz!r} is pending")
        self._pending = None
        self._steps += 1
        if sustained:
            self._lo = rate_hz if self._lo is None else max(self._lo, rate_hz)
        else:
            self._hi = rate_hz if self._hi is None else min(self._hi, rate_hz)

    def _finished(self) -> Outcome | None:
        lo, hi = self._lo, self._hi
        if lo is not None and hi is not None and hi - lo <= self.rel_tol_frac * hi:
            return Outcome.FOUND
        if hi is None and lo is not None and lo >= self.max_rate_hz:
            return Outcome.CENSORED
        if lo is None and hi is not None and hi / self.growth < self.min_rate_hz:
            return Outcome.NONE
        if self._steps >= self.max_steps:
            return Outcome.STEPS
        return None

    def result(self) -> Capacity:
        """The answer once :meth:`next_probe` has returned None."""
        if self.next_probe() is not None:
            raise ValueError("result: the search is not over; run the pending probe first")
        assert self._outcome is not None
        return Capacity(capacity_hz=self._lo or 0.0, failed_hz=self._hi, outcome=self._outcome,
                        num_steps=self._steps)
