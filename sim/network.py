"""Data movement on a cluster of nodes: GPU-to-GPU paths inside each node, NICs between nodes.

:func:`make_link` picks the transfer model of a cluster
(:class:`easerve_core.Cluster`, docs/multinode.md):

* the single-node model (one node, ``link_sharing = "fcfs"``): the original
  :class:`~sim.link.Link`, unchanged, so single-node runs keep their records;
* otherwise a :class:`Network`. A transfer between two workers on one node
  uses that node's paths: its own first-come first-served :class:`Link` pool
  (``fcfs``), or a fair share of ``num_links x link_bytes_per_s``, at most one
  path's bandwidth per transfer (``fair``). A transfer between nodes crosses
  the sender's NIC out and the receiver's NIC in (full duplex, each
  ``nic_bytes_per_s``) and shares them max-min fairly with every other
  transfer on them (:mod:`sim.fairshare`): two transfers on one NIC each run
  at half speed while they overlap. A fair-shared transfer is delivered
  ``latency`` after its last byte (``nic_latency_s`` between nodes,
  ``link_latency_s`` inside one): alone it takes ``latency + bytes / bandwidth``.

A worker's node is its first GPU's (``gpu // gpus_per_node``, the numbering
of :func:`easerve_core.placement.layout`). With placement ``locality =
"node"``, :meth:`Network.near` narrows a hand-off's receivers to the
sender's node when that node has any.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from easerve_core import Cluster, Deployment
from sim.clock import SimEnvironment
from sim.fairshare import FairShare
from sim.link import Link

W = TypeVar("W")


class Network:
    """The transfer model of a multi-node (or fair-shared) cluster (see the module docstring)."""

    def __init__(self, env: SimEnvironment, cluster: Cluster, *, locality: str = "node") -> None:
        self.env = env
        self.gpus_per_node = cluster.gpus_per_node
        self.fair_links = cluster.link_sharing == "fair"
        self.link_bytes_per_s = float(cluster.link_bytes_per_s)
        self.link_latency_s = float(cluster.link_latency_s)
        self.nic_latency_s = float(cluster.nic_latency_s)
        capacity: dict[Hashable, float] = {}
        for n in range(cluster.num_nodes):
            capacity[("out", n)] = capacity[("in", n)] = float(cluster.nic_bytes_per_s)
            if self.fair_links:
                capacity[("link", n)] = cluster.num_links * self.link_bytes_per_s
        self.share = FairShare(env, capacity)
        self.links = [] if self.fair_links else [Link(env, cluster) for _ in range(cluster.num_nodes)]
        self.near: Callable[[Any, Sequence[W]], Sequence[W]] | None = (
            self._near if locality == "node" and cluster.num_nodes > 1 else None)
        self._fair_transfers = 0
        self._fair_bytes = 0
        self.cross_node_transfers = 0
        self.cross_node_bytes = 0

    def node_of(self, worker: Any) -> int:
        """The node of a worker (0 for None: a sender the pipeline did not name)."""
        return 0 if worker is None else int(worker.gpus[0]) // self.gpus_per_node

    def _near(self, sender: Any, workers: Sequence[W]) -> Sequence[W]:
        node = self.node_of(sender)
        local = [w for w in workers if self.node_of(w) == node]
        return local or workers

    def send(self, now: float, num_bytes: int, deliver: Callable[[float], None], *,
             extra_s: float = 0.0, ends: tuple[Any, Any] | None = None) -> None:
        """Move ``num_bytes`` from ``ends[0]``'s node to ``ends[1]``'s; ``deliver(end_s)`` on arrival.

        ``extra_s`` delays the delivery beyond the transfer without holding a path or NIC.
        """
        src, dst = (0, 0) if ends is None else (self.node_of(ends[0]), self.node_of(ends[1]))
        if src == dst and not self.fair_links:
            self.links[src].send(now, num_bytes, deliver, extra_s=extra_s)
            return
        self._fair_transfers += 1
        self._fair_bytes += num_bytes
        if src == dst:
            resources: tuple[Hashable, ...] = (("link", src),)
            latency, cap = self.link_latency_s, self.link_bytes_per_s
        else:
            self.cross_node_transfers += 1
            self.cross_node_bytes += num_bytes
            resources, latency, cap = (("out", src), ("in", dst)), self.nic_latency_s, math.inf
        env, wait = self.env, latency + extra_s

        def done(end: float) -> None:
            at = end + wait
            env.call_later(max(0.0, at - env.now), lambda _call: deliver(at))

        if now > env.now:
            env.call_later(now - env.now, lambda _call: self.share.start(resources, num_bytes, done, cap=cap))
        else:
            self.share.start(resources, num_bytes, done, cap=cap)

    @property
    def num_transfers(self) -> int:
        return self._fair_transfers + sum(link.num_transfers for link in self.links)

    @property
    def bytes_moved(self) -> int:
        return self._fair_bytes + sum(link.bytes_moved for link in self.links)

    def meta(self) -> dict[str, Any]:
        """What a run reports about its network (``summary.json`` meta)."""
        return {"cross_node_transfers": self.cross_node_transfers, "cross_node_bytes": self.cross_node_bytes}


def make_link(env: SimEnvironment, cluster: Cluster, deployment: Deployment) -> Link | Network:
    """The transfer model of ``cluster`` (see the module docstring)."""
    if cluster.single_node_model:
        return Link(env, cluster)
    locality = "node" if deployment.placement is None else deployment.placement.locality
    return Network(env, cluster, locality=locality)
