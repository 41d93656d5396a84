"""Data movement between GPUs: a contended, bandwidth-limited interconnect.

The cluster has ``num_links`` transfer paths of ``link_bytes_per_s`` each and
a fixed ``link_latency_s`` per transfer (:class:`easerve_core.Cluster`). The
model is a first-come first-served queue with ``num_links`` servers: a
transfer takes the path that frees first, waits for it if all are busy, and
then holds it for ``latency + bytes / bandwidth``. Service times are known
when a transfer starts, so its end time is computed at once and costs one
SimPy event (a :meth:`~sim.clock.SimEnvironment.call_later` timer), not a process.

Not modelled here: bandwidth sharing between concurrent transfers on one
path, topology (which GPU pairs share a PCIe switch) and transfers within a
worker (local Prefill reads embeddings in place). This is the single-node
model; a cluster of several nodes, or one that asks for fair sharing, gets a
:class:`sim.network.Network` (:func:`sim.network.make_link`), which keeps one
of these pools per node. :class:`Transport` is what the pipeline needs of either.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from easerve_core import Cluster
from sim.clock import SimEnvironment


class Transport(Protocol):
    """What the pipeline needs of a transfer model."""

    env: SimEnvironment

    @property
    def near(self) -> Callable[[Any, Sequence[Any]], Sequence[Any]] | None: ...

    @property
    def num_transfers(self) -> int: ...

    @property
    def bytes_moved(self) -> int: ...

    def send(self, now: float, num_bytes: int, deliver: Callable[[float], None], *,
             extra_s: float = 0.0, ends: tuple[Any, Any] | None = None) -> Any: ...

    def meta(self) -> dict[str, Any]: ...


class Link:
    """The cluster's interconnect (see the module docstring)."""

    near = None  # one node: every receiver is near

    def __init__(self, env: SimEnvironment, cluster: Cluster) -> None:
        self.env = env
        self.bytes_per_s = float(cluster.link_bytes_per_s)
        self.latency_s = float(cluster.link_latency_s)
        self._free_at = [0.0] * cluster.num_links
        self.num_transfers = 0
        self.bytes_moved = 0

    def duration_s(self, num_bytes: int) -> float:
        """Time on a free path for ``num_bytes``."""
        return self.latency_s + num_bytes / self.bytes_per_s

    def end_time(self, now: float, num_bytes: int) -> float:
        """Reserve a path for ``num_bytes`` from ``now``; return when the transfer ends."""
        start = max(now, self._free_at[0])
        end = start + self.duration_s(num_bytes)
        heapq.heapreplace(self._free_at, end)
        self.num_transfers += 1
        self.bytes_moved += num_bytes
        return end

    def send(self, now: float, num_bytes: int, deliver: Callable[[float], None], *,
             extra_s: float = 0.0, ends: tuple[Any, Any] | None = None) -> float:
        """Move ``num_bytes`` and call ``deliver(end_s)`` when they arrive; return ``end_s``.

        ``extra_s`` delays the delivery beyond the transfer without holding the path;
        ``ends`` (sender, receiver) does not matter on one node.
        """
        end = self.end_time(now, num_bytes) + extra_s
        self.env.call_later(max(0.0, end - self.env.now), lambda _call: deliver(end))
        return end

    def meta(self) -> dict[str, Any]:
        """Nothing beyond ``link_transfers`` / ``link_bytes`` on one node."""
        return {}
