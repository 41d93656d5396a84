"""Host CPU contention: processor sharing of a few cores between every running stage (opt-in).

On a GPU server each worker owns its GPUs and stages do not slow each other
down. When the "GPUs" are CPU worker processes on one small host (the live
executor on a development machine), they are not: every running stage is a
busy thread, and the host's cores are shared between all of them. The model
(docs/calibration.md, `[sim.host] num_host_cores`):

* each running stage (an encode batch, a local or remote Prefill batch, a
  decode segment) is one busy thread;
* with ``n`` busy threads plus ``background_cores`` of steady load (the front
  end) on ``num_host_cores`` cores, every thread progresses at
  ``min(1, cores / (n + background))`` of its exclusive speed (processor
  sharing);
* whenever a stage starts or ends anywhere, the factor is recomputed and
  every worker re-rates the work it has running, exactly as
  :mod:`sim.sharing` re-rates the two lanes of one encode worker.

A worker registers a callback with :meth:`HostCPU.join`; it reports its
number of busy threads with :meth:`HostCPU.set_busy`. When the factor changes
the host calls every registered callback with ``(now, factor)``, in the
order the workers joined (encode workers, then Prefill, then Decode); each
accounts its progress up to ``now``, re-plans its end times and rings its own
doorbell. Off (``num_host_cores = 0``) no host object exists and no worker
pays anything.
"""

from __future__ import annotations

from collections.abc import Callable


class HostCPU:
    """Processor sharing of ``num_cores`` cores (see the module docstring)."""

    def __init__(self, num_cores: float, *, background_cores: float = 0.0) -> None:
        if not num_cores > 0:
            raise ValueError(f"num_cores must be > 0, got {num_cores!r}")
        if not background_cores >= 0:
            raise ValueError(f"background_cores must be >= 0, got {background_cores!r}")
        self.num_cores = float(num_cores)
        self.background_cores = float(background_cores)
        self._busy: list[int] = []
        self._callbacks: list[Callable[[float, float], None]] = []
        self._total = 0
        self.factor = self._factor(0)
        self.num_changes = 0

    def join(self, on_change: Callable[[float, float], None]) -> int:
        """Register a worker; returns its slot for :meth:`set_busy`."""
        self._busy.append(0)
        self._callbacks.append(on_change)
        return len(self._busy) - 1

    def _factor(self, busy: int) -> float:
        demand = busy + self.background_cores
        return 1.0 if demand <= self.num_cores else self.num_cores / demand

    def set_busy(self, slot: int, now: float, threads: int) -> None:
        """Worker ``slot`` now has ``threads`` busy threads; re-rate everyone if the factor moved."""
        old = self._busy[slot]
        if threads == old:
            return
        self._busy[slot] = threads
        self._total += threads - old
        factor = self._factor(self._total)
        if factor == self.factor:
            return
        self.factor = factor
        self.num_changes += 1
        for callback in self._callbacks:
            callback(now, factor)


class Progress:
    """One piece of work measured in exclusive seconds, draining at a varying speed.

    ``begin(now, work_s, speed)`` starts it; ``rate(now, speed)`` accounts the
    work done up to ``now`` and runs on at the new speed; ``done_s(now)`` is the
    exclusive seconds of work done by ``now``; ``end_s`` is when it will finish
    at the present speed; ``resize(now, work_s)`` changes the total (a decode
    segment cut short by a join).
    """

    __slots__ = ("done", "end_s", "since_s", "speed", "work_s")

    def __init__(self) -> None:
        self.work_s = self.done = self.since_s = 0.0
        self.speed = 1.0
        self.end_s = float("inf")

    def begin(self, now: float, work_s: float, speed: float) -> None:
        self.work_s, self.done, self.since_s, self.speed = work_s, 0.0, now, speed
        self.end_s = now + work_s / speed

    def done_s(self, now: float) -> float:
        return self.done + (now - self.since_s) * self.speed

    def rate(self, now: float, speed: float) -> None:
        if self.end_s == float("inf") or speed == self.speed:
            return
        self.done = min(self.work_s, self.done_s(now))
        self.since_s, self.speed = now, speed
        self.end_s = now + (self.work_s - self.done) / speed

    def resize(self, now: float, work_s: float) -> None:
        self.done = min(work_s, self.done_s(now))
        self.since_s, self.work_s = now, work_s
        self.end_s = now + (work_s - self.done) / self.speed

    def stop(self) -> None:
        self.end_s = float("inf")
