"""Fair bandwidth sharing: concurrent transfers split the capacity of the resources they cross.

A transfer (a *flow*) crosses a few resources (a node's NIC out, another's
NIC in, a node's GPU-to-GPU paths), each with a capacity in bytes/s, and may
carry its own rate cap (one PCIe path). Rates are max-min fair (progressive
filling): all unfrozen flows grow at one rate until a resource saturates or
a flow reaches its cap; those flows freeze; repeat. On a single resource this
is processor sharing: ``k`` flows each get ``capacity / k``.

Rates change only when a flow starts or ends: then every flow's remaining
bytes are advanced at its old rate, rates are recomputed and the next
completion is scheduled as one timer (a newer timer makes older ones stale;
they fire and do nothing). A flow whose remaining bytes fall below
``_DONE_BYTES`` at a completion instant is done (float rounding between two
flows that finish together).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence

from sim.clock import SimEnvironment

_DONE_BYTES = 1e-6  # a millionth of a byte: the rounding between flows that end together


class Flow:
    """One transfer in flight."""

    __slots__ = ("cap", "done", "order", "rate", "remaining", "resources")

    def __init__(self, resources: tuple[Hashable, ...], num_bytes: float, cap: float,
                 done: Callable[[float], None], order: int) -> None:
        self.resources, self.cap, self.remaining = resources, cap, float(num_bytes)
        self.rate = 0.0
        self.done = done
        self.order = order


def max_min_rates(flows: Sequence[Flow], capacity: dict[Hashable, float]) -> None:
    """Set every flow's ``rate`` to its max-min fair share (progressive filling)."""
    left = {r: capacity[r] for f in flows for r in f.resources}
    active = list(flows)
    for f in active:
        f.rate = 0.0
    level = 0.0
    while active:
        count: dict[Hashable, int] = {}
        for f in active:
            for r in f.resources:
                count[r] = count.get(r, 0) + 1
        # the next level at which a resource saturates or a flow hits its cap
        step = min(left[r] / n for r, n in count.items())
        step = min(step, min(f.cap - level for f in active))
        level += step
        for r, n in count.items():
            left[r] -= step * n
        frozen = [f for f in active if level >= f.cap * (1 - 1e-12)
                  or any(left[r] <= 1e-12 * capacity[r] for r in f.resources)]
        for f in frozen:
            f.rate = level
        active = [f for f in active if f not in frozen] if frozen else []


class FairShare:
    """Flows over capacitated resources, max-min fair (see the module docstring)."""

    def __init__(self, env: SimEnvironment, capacity: dict[Hashable, float]) -> None:
        for name, cap in capacity.items():
            if not cap > 0:
                raise ValueError(f"capacity of {name!r} must be > 0, got {cap!r}")
        self.env = env
        self.capacity = capacity
        self.flows: list[Flow] = []
        self._updated_s = 0.0
        self._version = 0
        self._order = 0

    def start(self, resources: tuple[Hashable, ...], num_bytes: float, done: Callable[[float], None], *,
              cap: float = math.inf) -> None:
        """Start a flow of ``num_bytes`` now; ``done(end_s)`` is called when its last byte is through."""
        now = self.env.now
        if num_bytes <= 0:
            done(now)
            return
        self._advance(now)
        self._order += 1
        self.flows.append(Flow(resources, num_bytes, cap, done, self._order))
        self._reschedule(now)

    def _advance(self, now: float) -> None:
        dt = now - self._updated_s
        if dt > 0:
            for f in self.flows:
                f.remaining -= f.rate * dt
        self._updated_s = now

    def _reschedule(self, now: float) -> None:
        self._version += 1
        if not self.flows:
            return
        max_min_rates(self.flows, self.capacity)
        wait = min(f.remaining / f.rate for f in self.flows)
        version = self._version
        self.env.call_later(max(0.0, wait), lambda _call: self._complete(version))

    def _complete(self, version: int) -> None:
        if version != self._version:
            return  # a flow started or ended since this timer was set
        now = self.env.now
        self._advance(now)
        finished = [f for f in self.flows if f.remaining <= max(_DONE_BYTES, 1e-12 * f.rate)]
        if not finished:  # rounding left a sliver: run it out
            finished = [min(self.flows, key=lambda f: f.remaining / f.rate)]
        self.flows = [f for f in self.flows if f not in finished]
        self._reschedule(now)
        for f in sorted(finished, key=lambda f: f.order):
            f.done(now)
