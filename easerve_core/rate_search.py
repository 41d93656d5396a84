"""The highest arrival rate that holds: three searches, one shape, one answer.

Every search here is a clock-agnostic policy like the batcher: it proposes
the next rate to try (``next_probe``, a frozen :class:`Probe`), hears whether
that rate held (``observe``: a run at it sustained the SLO, e.g. by
:func:`easerve_core.slo.sustains`, or the screen carried it) and, when it
proposes nothing more, answers a :class:`Capacity` (``result``). None runs
anything; :func:`find_capacity` drives one with a verdict function.

* :class:`RateBisection` (``easerve capacity``; docs/metrics.md, "Capacity"):
  **bracket**: try ``start_hz``; while the last rate sustained, multiply it by
  ``growth`` (stop at ``max_rate_hz``: censored there); while it failed,
  divide by ``growth`` (stop below ``min_rate_hz``: nothing sustains);
  **bisect**: try the midpoint of the highest sustained and the lowest failed
  rate until they are within ``rel_tol_frac`` of the failed one. The answer
  is a sustained rate with a failing one within the tolerance above it; on a
  curve that is not monotone (noise near the cliff) one such boundary, not
  necessarily the highest. Runs that reuse one seed at every rate (the same
  requests, their gaps scaled) keep the curve as smooth as the model allows.
* :class:`GeometricBisection` (the controller studies' screened capacity): a
  bracket taken as given, halved in log space a fixed number of times.
* :class:`RateLadder` (HAS's step down to a rate the screen carries;
  :func:`easerve_core.slo.max_rate_within_slo` over a finished sweep): a
  fixed list of rates walked until the verdict flips, ``DOWN`` to the first
  that holds, ``UP`` to the first that fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from easerve_core import checks


class Phase(StrEnum):
    BRACKET = "bracket"
    BISECT = "bisect"
    LADDER = "ladder"


class Outcome(StrEnum):
    """How the search ended."""

    FOUND = "found"            # a sustained rate with a failing one (within the tolerance) above
    CENSORED = "censored"      # still sustained at the highest rate tried: the capacity is at least that
    NONE = "none"              # failed down to the lowest rate the search may try
    STEPS = "steps"            # max_steps ran out before the bracket closed


@dataclass(frozen=True, slots=True)
class Probe:
    """Run at ``rate_hz`` next (``step`` counts from 0)."""

    rate_hz: float
    phase: Phase
    step: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Capacity:
    """The search's answer: ``capacity_hz`` sustained (0.0 if none held; for
    :class:`GeometricBisection`, the bracket's lower end), ``failed_hz`` the
    lowest failing rate above it (None if none was seen)."""

    capacity_hz: float
    failed_hz: float | None
    outcome: Outcome
    num_steps: int


class RateSearch(Protocol):
    """What every strategy here offers: propose a rate, hear its verdict, answer when done."""

    def next_probe(self) -> Probe | None:
        """The next rate to try, or None when the search is over; asked again before
        :meth:`observe`, the same probe."""
        ...

    def observe(self, rate_hz: float, sustained: bool) -> None:
        """The pending probe's rate did (not) hold."""
        ...

    def result(self) -> Capacity:
        """The answer once :meth:`next_probe` has returned None."""
        ...


def find_capacity(search: RateSearch, holds: Callable[[float], bool]) -> Capacity:
    """Drive ``search`` to its answer: ``holds(rate_hz)`` judges each probe, in the order proposed."""
    while (probe := search.next_probe()) is not None:
        search.observe(probe.rate_hz, holds(probe.rate_hz))
    return search.result()


def _pending(probe: Probe | None, rate_hz: float) -> Probe:
    """The pending probe, if ``rate_hz`` is its rate; else a ValueError."""
    if probe is None or not math.isclose(rate_hz, probe.rate_hz, rel_tol=1e-12):
        raise ValueError(f"observe: no probe at {rate_hz!r} is pending")
    return probe


class _Probing:
    """What every strategy keeps: the probe it waits on and how many runs it has heard."""

    _pending: Probe | None
    _steps: int

    def _heard(self, rate_hz: float) -> float:
        """The pending probe's verdict came in: its rate (``rate_hz`` must be it); the next may start."""
        rate = _pending(self._pending, rate_hz).rate_hz
        self._pending = None
        self._steps += 1
        return rate


def _not_over() -> ValueError:
    return ValueError("result: the search is not over; run the pending probe first")


class RateBisection(_Probing):
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
        self._heard(rate_hz)
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
            raise _not_over()
        assert self._outcome is not None
        return Capacity(capacity_hz=self._lo or 0.0, failed_hz=self._hi, outcome=self._outcome,
                        num_steps=self._steps)


class GeometricBisection(_Probing):
    """Halve ``[lo_hz, hi_hz]`` in log space ``num_steps`` times (see the module docstring).

    The bracket is taken as given: ``lo_hz`` is assumed to hold and ``hi_hz``
    to fail, and neither is tried. Each probe is the geometric midpoint
    ``(lo * hi) ** 0.5``; it becomes the new ``lo`` when it holds, the new
    ``hi`` when not. The answer is ``lo`` after the last step (``lo_hz``
    itself when nothing held: outcome ``NONE``; ``CENSORED`` when everything
    held).
    """

    def __init__(self, lo_hz: float, hi_hz: float, *, num_steps: int) -> None:
        self.lo_hz = checks.positive("lo_hz", lo_hz)
        self.hi_hz = checks.positive("hi_hz", hi_hz)
        if self.hi_hz <= self.lo_hz:
            raise ValueError(f"hi_hz must be > lo_hz ({lo_hz!r}), got {hi_hz!r}")
        self.num_steps = checks.integer("num_steps", num_steps, minimum=0)
        self._lo, self._hi = lo_hz, hi_hz
        self._held = self._failed = False
        self._pending: Probe | None = None
        self._steps = 0

    def next_probe(self) -> Probe | None:
        if self._pending is None and self._steps < self.num_steps:
            self._pending = Probe(rate_hz=(self._lo * self._hi) ** 0.5, phase=Phase.BISECT,
                                  step=self._steps)
        return self._pending

    def observe(self, rate_hz: float, sustained: bool) -> None:
        rate = self._heard(rate_hz)
        if sustained:
            self._lo, self._held = rate, True
        else:
            self._hi, self._failed = rate, True

    def result(self) -> Capacity:
        if self.next_probe() is not None:
            raise _not_over()
        outcome = (Outcome.NONE if not self._held else Outcome.FOUND if self._failed
                   else Outcome.CENSORED)
        return Capacity(capacity_hz=self._lo, failed_hz=self._hi, outcome=outcome, num_steps=self._steps)


class Direction(StrEnum):
    """Which way a :class:`RateLadder` walks, and the verdict that stops it."""

    DOWN = "down"  # highest rate first; stop at the first that holds (the answer)
    UP = "up"      # lowest rate first; stop at the first that fails (the answer: the last that held)


class RateLadder(_Probing):
    """Walk a fixed list of rates in order until the verdict flips (see the module docstring).

    ``rates_hz`` must run the ladder's way: strictly falling for ``DOWN``,
    strictly rising for ``UP``; it may be empty (then nothing holds). The
    answer is the rate that held at the stop (``DOWN``) or the last that held
    before it (``UP``), 0.0 if none did; ``failed_hz`` the lowest failing rate
    seen above it. ``CENSORED``: the ladder's highest rate held.
    """

    def __init__(self, rates_hz: Sequence[float], *, direction: Direction | str) -> None:
        self.direction = Direction(direction)
        self.rates_hz = tuple(rates_hz)
        pairs = zip(self.rates_hz, self.rates_hz[1:], strict=False)
        if not all((a > b) if self.direction is Direction.DOWN else (a < b) for a, b in pairs):
            way = "falling" if self.direction is Direction.DOWN else "rising"
            raise ValueError(f"rates_hz must be strictly {way} for a {self.direction} ladder, "
                             f"got {self.rates_hz!r}")
        self._held: float | None = None
        self._failed: float | None = None
        self._pending: Probe | None = None
        self._steps = 0
        self._stopped = False

    def next_probe(self) -> Probe | None:
        if self._pending is None and not self._stopped and self._steps < len(self.rates_hz):
            self._pending = Probe(rate_hz=self.rates_hz[self._steps], phase=Phase.LADDER, step=self._steps)
        return self._pending

    def observe(self, rate_hz: float, sustained: bool) -> None:
        rate = self._heard(rate_hz)
        if sustained:
            self._held = rate
        else:
            self._failed = rate
        self._stopped = sustained == (self.direction is Direction.DOWN)

    def result(self) -> Capacity:
        if self.next_probe() is not None:
            raise _not_over()
        held, failed = self._held, self._failed
        outcome = Outcome.NONE if held is None else Outcome.CENSORED if failed is None else Outcome.FOUND
        return Capacity(capacity_hz=0.0 if held is None else held, failed_hz=failed, outcome=outcome,
                        num_steps=self._steps)
