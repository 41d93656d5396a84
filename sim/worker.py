"""The shape every simulated worker shares: one SimPy process, an alarm, a doorbell.

A worker is one SimPy process that loops: do everything that is due now
(:meth:`Worker.step`), ask when it next has something to do
(:meth:`Worker.next_due`), then sleep until that time or until another part
of the model rings its doorbell (:meth:`Worker.notify`) with new work. So a
worker costs events per change of its state, never per request waiting in
it or per token it generates.

Times a worker stamps on records are the planned times of its work (``start
+ latency``), not ``env.now``, so floating-point rounding of SimPy's
``now + delay`` never leaks into the records; when the alarm rings, ``step``
is called with the planned time it was set for.
"""

from __future__ import annotations

import math
from collections.abc import Generator

import simpy

from sim.recorder import Recorder


class Worker:
    """Base class: the process loop (see the module docstring)."""

    stage = "worker"

    def __init__(self, env: simpy.Environment, index: int, gpus: tuple[int, ...],
                 recorder: Recorder) -> None:
        self.env = env
        self.index = index
        self.gpus = gpus
        self.rec = recorder
        self._doorbell: simpy.Event | None = None
        self._alarm_s = math.inf
        self.last_start_s = -math.inf  # when this worker last started a batch (any lane)
        env.process(self._run())

    def step(self, now: float) -> None:
        """Finish what is due at ``now`` and start what can start."""
        raise NotImplementedError

    def next_due(self) -> float:
        """When this worker next has something to do on its own (inf: nothing)."""
        raise NotImplementedError

    def notify(self) -> None:
        """Ring the doorbell: new work arrived or a plan changed."""
        bell = self._doorbell
        if bell is not None and not bell.triggered:
            bell.succeed()

    def wakes_before(self, when: float) -> bool:
        """Whether the sleeping worker's alarm rings at or before ``when``."""
        return self._alarm_s <= when

    def _run(self) -> Generator[simpy.Event, object, None]:
        env = self.env
        now = float(env.now)
        while True:
            self._doorbell = None
            self.step(now)
            due = self.next_due()
            self._alarm_s = due
            bell = self._doorbell = env.event()
            if due == math.inf:
                yield bell
                now = env.now
                continue
            alarm = env.timeout(max(0.0, due - env.now))
            yield alarm | bell
            # The alarm's own time, not now + (due - now) rounded by SimPy.
            now = max(due, env.now) if alarm.triggered and not bell.triggered else env.now
