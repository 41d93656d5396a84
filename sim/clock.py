"""The simulator's SimPy environment: SimPy's clock and event queue, a counted loop, light timers.

:class:`SimEnvironment` is a :class:`simpy.Environment` (processes, timeouts
and events all work on it) with three additions, all in this one place:

* it counts the events it processes (``num_events``, the simulator's
  ``meta["num_events"]``);
* :meth:`SimEnvironment.run_all` is SimPy's ``run()`` to an empty schedule
  with ``step()`` written inline (pop the next event, call its callbacks,
  crash on an unhandled failure): one Python call per event less;
* :meth:`SimEnvironment.call_later` schedules a callback exactly as a
  ``Timeout`` with that one callback would be scheduled (same time, same
  priority, the next event id, so the same place in the order of events),
  as a :class:`Call`: an object with nothing but the callback list that
  SimPy's loop reads. The workers' alarms, doorbells and wake-ups and the
  link's deliveries are these: several per request, and a SimPy ``Event``
  with its value, state checks and environment binding costs more than the
  work most of them trigger. :meth:`SimEnvironment.claim_now` says when a
  call due at this very instant would be the next event processed anyway, so
  the caller makes it at once: a worker's wake-up one event after its alarm.

Scheduling goes through SimPy's public API (``schedule``, ``peek``, ``now``).
Only :meth:`SimEnvironment.run_all` reads SimPy's internals (the ``_queue``
heap, ``_now``, an event's ``_ok`` and ``_value``), because it is SimPy's
``step()`` inlined: the public route, ``run()`` calling ``step()`` once per
event, was 3-6% slower on ``bench/sim_speed.py``'s rows (min of 7 paired
runs, 2026-12-02). ``tests/sim/test_clock.py`` pins that it processes the
same events in the same order as ``run()``, so a SimPy upgrade that changes
those internals fails there.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import simpy
from simpy.events import NORMAL, URGENT


class Call:
    """A scheduled callback: the least an event needs to sit in SimPy's queue.

    :meth:`SimEnvironment.run_all` calls ``fn(call)`` directly; SimPy's own
    ``step()`` finds the ``callbacks`` list and ``_ok`` it reads on any event.
    """

    __slots__ = ("fn",)
    _ok = True
    fn: Callable[[Any], None] | None

    @property
    def callbacks(self) -> list[Callable[[Any], None]] | None:
        return None if self.fn is None else [self.fn]

    @callbacks.setter
    def callbacks(self, value: list[Callable[[Any], None]] | None) -> None:
        self.fn = None if not value else value[0]


class SimEnvironment(simpy.Environment):
    """A SimPy environment that counts its events, with a fast loop and light timers."""

    def __init__(self) -> None:
        super().__init__()
        self.num_events = 0

    def call_later(self, delay: float, callback: Callable[[Any], None]) -> Call:
        """Call ``callback(call)`` ``delay`` seconds from now, ordered as a ``Timeout`` would be."""
        call = Call()
        call.fn = callback
        self.schedule(call, NORMAL, delay)  # type: ignore[arg-type]
        return call

    def call_first(self, callback: Callable[[Any], None]) -> Call:
        """Call ``callback(call)`` now, ahead of ordinary events at this instant (as SimPy
        starts a process: the same priority, so the same place in the order of events)."""
        call = Call()
        call.fn = callback
        self.schedule(call, URGENT)  # type: ignore[arg-type]
        return call

    def claim_now(self) -> bool:
        """Whether an event scheduled now would be the very next one processed.

        Only for the last thing the last callback of an event does: when no other
        event is due at this instant, the caller does at once what it would schedule
        with ``call_later(0, ...)``; that is counted as the event it stands for.
        """
        if self.peek() <= self.now:  # peek() is infinite on an empty schedule
            return False
        self.num_events += 1
        return True

    def step(self) -> None:
        self.num_events += 1
        super().step()

    def run_all(self) -> None:
        """Process events until none is left (``run()`` with no ``until``).

        Counts as :meth:`step` under ``run()`` does: every step, the last one (which
        finds the schedule empty) included, so ``meta["num_events"]`` keeps its meaning.
        """
        queue, pop, count = self._queue, heapq.heappop, 0
        while queue:
            self._now, _, _, event = pop(queue)
            count += 1
            if event.__class__ is Call:  # one callback, always ok
                event.fn(event)
                continue
            callbacks, event.callbacks = event.callbacks, None
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                # as SimPy: raise a copy of the failure, caused by the original
                exc = type(event._value)(*event._value.args)
                exc.__cause__ = event._value
                raise exc
        self.num_events += count + 1
