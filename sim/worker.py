"""The shape every simulated worker shares: a loop of SimPy events, an alarm, a doorbell.

A worker loops: do everything that is due now (:meth:`Worker.step`), ask
when it next has something to do (:meth:`Worker.next_due`), then sleep until
that time or until another part of the model rings its doorbell
(:meth:`Worker.notify`) with new work. So a worker costs events per change of
its state, never per request waiting in it or per token it generates.

The loop is written as event callbacks rather than a generator process, with
the same events a process waiting on ``alarm | doorbell`` would schedule, in
the same order: the start at the instant the worker is built, ahead of
ordinary events (as SimPy starts a process); the alarm when it goes to sleep;
the doorbell when it is rung (made then: most sleeps end without a ring); and
the wake-up when the first of the two is processed, one event later
(docs/simulator.md, tie-break rule 2), or at the ring itself when no alarm
is set. Alarms, doorbells and wake-ups are light timers
(:meth:`~sim.clock.SimEnvironment.call_later`); a wake-up that would be the
very next event is made at once (:meth:`~sim.clock.SimEnvironment.claim_now`).
A process would add a generator resume and a condition's bookkeeping to
every wake-up; these callbacks do not.

Times a worker stamps on records are the planned times of its work (``start
+ latency``), not ``env.now``, so floating-point rounding of SimPy's
``now + delay`` never leaks into the records; when the alarm rings, ``step``
is called with the planned time it was set for.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

from sim.clock import Call, SimEnvironment
from sim.recorder import Recorder, Traced

_INF = math.inf


class Worker:
    """Base class: the loop (see the module docstring)."""

    stage = "worker"
    #: told ``(worker, now)`` whenever the worker goes to sleep with nothing due: the roster
    #: (sim.roster) sets it on a draining worker to hear when it may have run empty
    on_idle: Callable[[Worker, float], None] | None = None

    def __init__(self, env: SimEnvironment, index: int, gpus: tuple[int, ...],
                 recorder: Recorder) -> None:
        self.env = env
        self.index = index
        self.gpus = gpus
        self.rec = recorder
        self._asleep = False  # between its step and its wake-up: a ring wakes it
        self._rung = False  # the doorbell rang since it went to sleep
        self._waking = False  # this sleep's wake-up is still to come (its alarm is set)
        self._alarm: Call | None = None  # this sleep's alarm
        self._bell: Call | None = None  # this sleep's doorbell, once rung with an alarm set
        self._alarm_s = math.inf
        self.last_start_s = -math.inf  # when this worker last started a batch (any lane)
        self._shown_busy = -1.0  # the busy fraction last reported for this worker's GPUs
        self._gpu_slot = recorder.gpu_slot(gpus)
        env.call_first(self._started)

    def step(self, now: float) -> None:
        """Finish what is due at ``now`` and start what can start."""
        raise NotImplementedError

    def next_due(self) -> float:
        """When this worker next has something to do on its own (inf: nothing)."""
        raise NotImplementedError

    def drained(self) -> bool:
        """Whether the worker holds no request at all (queued, running or in flight to it)."""
        raise NotImplementedError

    def notify(self) -> None:
        """Ring the doorbell: new work arrived or a plan changed."""
        if self._asleep and not self._rung:
            self._rung = True
            if self._alarm is None:
                self.env.call_later(0, self._rang)
            else:
                self._bell = self.env.call_later(0, self._bell_rang)

    def show_busy(self, now: float, frac: float) -> None:
        """Report the busy fraction of this worker's GPUs; only a change reaches the recorder
        (which would drop a repeat anyway: no other worker reports these GPUs)."""
        if frac != self._shown_busy:
            self._shown_busy = frac
            self.rec.busy(self._gpu_slot, now, frac)

    def enqueue(self, queue: deque[Any], job: Traced, now: float, event: str, slot: int) -> None:
        """``job`` joins the back of ``queue``: traced as ``event``, the new length recorded at ``slot``."""
        queue.append(job)
        self.rec.log(now, event, self.index, (job,))
        self.rec.queue(slot, now, len(queue))

    def wakes_before(self, when: float) -> bool:
        """Whether the sleeping worker's alarm rings at or before ``when``."""
        return self._alarm_s <= when

    # -- the loop: step, then sleep on the alarm or the doorbell ----------------------
    def _cycle(self, now: float) -> None:
        self._asleep = False  # a ring during the worker's own step changes nothing
        self.step(now)
        due = self._alarm_s = self.next_due()
        self._asleep, self._rung, self._bell = True, False, None
        if due == _INF:
            self._alarm = None
            if self.on_idle is not None:
                self.on_idle(self, now)
            return
        env = self.env
        self._waking = True
        delay = due - env.now
        self._alarm = env.call_later(delay if delay > 0.0 else 0.0, self._alarm_rang)

    def _started(self, _event: Any) -> None:
        self._cycle(float(self.env.now))

    def _rang(self, _event: Any) -> None:
        self._cycle(self.env.now)

    # An alarm or doorbell of an earlier sleep (the other one woke the worker) is not this one.
    # The wake-up is one event later; when nothing else is due now that event would be the
    # next one processed, so the worker wakes at once (SimEnvironment.claim_now).
    def _alarm_rang(self, call: Call) -> None:
        if call is self._alarm and self._waking:
            self._waking = False
            env = self.env
            if env.claim_now():
                now = env.now
                self._cycle(now if self._rung else max(self._alarm_s, now))
            else:
                env.call_later(0, self._woken)

    def _bell_rang(self, call: Call) -> None:
        if call is self._bell and self._waking:
            self._waking = False
            env = self.env
            if env.claim_now():
                self._cycle(env.now)  # rung: now
            else:
                env.call_later(0, self._woken)

    def _woken(self, _event: Any) -> None:
        now = self.env.now
        # The alarm's own time, not now + (due - now) rounded by SimPy.
        self._cycle(now if self._rung else max(self._alarm_s, now))
