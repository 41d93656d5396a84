"""Clusters: nodes of identical GPUs and the links between them, validated on construction.

A :class:`Cluster` is ``num_nodes`` nodes of identical GPUs: inside a node
the GPUs are joined by one kind of link, and each node reaches the others
through its NIC (docs/multinode.md). A deployment
(:class:`~easerve_core.deployment.Deployment`) splits its GPUs into workers;
placement (:mod:`easerve_core.placement`) puts those workers on its nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from easerve_core import checks, limits

#: how concurrent transfers share a node's GPU-to-GPU paths (``Cluster.link_sharing``)
LINK_SHARING = ("fcfs", "fair")


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """Nodes of identical GPUs: links inside a node, a NIC per node between them.

    Args:
        gpu: GPU name, resolved against the GPU specs by whoever builds profiles.
        num_gpus: GPUs in the cluster, all nodes together.
        link_bytes_per_s: bandwidth of one GPU-to-GPU transfer path in a node.
        link_latency_s: fixed cost of one transfer in a node.
        num_links: transfers that can run at full bandwidth at once in a node
            (PCIe switches, NVLink lanes); more concurrent transfers wait
            (``fcfs``) or share them (``fair``).
        num_nodes: nodes; ``num_gpus`` must be a multiple of it.
        nic_bytes_per_s: one node's network bandwidth, each direction (all
            its NICs together: a transfer stripes over them).
        nic_latency_s: fixed cost of one transfer between nodes.
        link_sharing: ``fcfs`` (the single-node model: a transfer waits for a
            free path, then runs at full speed) or ``fair`` (concurrent
            transfers share the node's paths' bandwidth, each at most one
            path's). Transfers between nodes always share the NICs fairly.
    """

    gpu: str
    num_gpus: int = 8
    link_bytes_per_s: float = 25e9
    link_latency_s: float = 10e-6
    num_links: int = 4
    num_nodes: int = 1
    nic_bytes_per_s: float = 50e9
    nic_latency_s: float = 10e-6
    link_sharing: str = "fcfs"

    def __post_init__(self) -> None:
        if not isinstance(self.gpu, str) or not self.gpu:
            raise ValueError(f"gpu must be a non-empty name, got {self.gpu!r}")
        limits.at_most("num_gpus", checks.integer("num_gpus", self.num_gpus, minimum=1), limits.MAX_NUM_GPUS,
                       "the simulator keeps per-GPU state and HAS enumerates the cluster's allocations")
        checks.positive("link_bytes_per_s", self.link_bytes_per_s)
        checks.non_negative("link_latency_s", self.link_latency_s)
        checks.integer("num_links", self.num_links, minimum=1)
        nodes = checks.integer("num_nodes", self.num_nodes, minimum=1)
        if self.num_gpus % nodes:
            raise ValueError(f"num_nodes must divide num_gpus ({self.num_gpus}), got {nodes!r}")
        checks.positive("nic_bytes_per_s", self.nic_bytes_per_s)
        checks.non_negative("nic_latency_s", self.nic_latency_s)
        checks.one_of("link_sharing", self.link_sharing, LINK_SHARING)

    @property
    def gpus_per_node(self) -> int:
        return self.num_gpus // self.num_nodes

    @property
    def single_node_model(self) -> bool:
        """One node with first-come first-served links: the simulator's original transfer model."""
        return self.num_nodes == 1 and self.link_sharing == "fcfs"
