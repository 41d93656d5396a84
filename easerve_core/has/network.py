"""HAS screen on several nodes: an allocation's cross-node traffic against its nodes' NICs.

Per request, the embedding (Encode -> remote Prefill, a fraction s of
requests) and the KV cache (Prefill -> Decode) each leave from a node and
arrive at one, as the simulator routes them (:mod:`sim.network`):
hand-offs go to the least-loaded receiver, which on average spreads them over
the receivers in proportion to their worker counts; with ``locality =
"node"`` a sender whose node holds receivers keeps them on its node. The
front end spreads requests over encode workers evenly. The bytes that cross
each NIC, out and in, per request of the stream, give the rate at which
the busiest NIC saturates: the network's capacity (requests/s). It is taken
at the most favourable s the allocation allows (its two ends: the bytes
are linear in s), as the screen takes each stage at its best knobs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from easerve_core.cluster import Cluster
from easerve_core.placement import Placement, Stage, place


def route_matrix(src_share: Sequence[float] | np.ndarray, dst_counts: Sequence[int] | np.ndarray,
                 locality: str) -> np.ndarray:
    """Fraction of requests sent from node i to node j, given each node's share sent and receivers."""
    share, counts = np.asarray(src_share, float), np.asarray(dst_counts, float)
    out = np.zeros((len(share), len(share)))
    total = counts.sum()
    if total == 0:
        return out
    for i, frac in enumerate(share):
        if locality == "node" and counts[i] > 0:
            out[i, i] = frac
        else:
            out[i, :] = frac * counts / total
    return out


def traffic_bytes(stages: Mapping[str, Stage], placement: Placement | None, cluster: Cluster, *,
                  remote_fraction: float, embed_bytes: float, kv_bytes: float) -> np.ndarray:
    """Bytes per request from node i to node j (i != j: over the NICs)."""
    plc = placement or Placement()
    lay = place(stages, plc, cluster)
    n = cluster.num_nodes
    count = {s: np.bincount(np.asarray(lay.nodes(s), dtype=int), minlength=n) for s in
             ("encode", "prefill", "decode")}
    enc_share = count["encode"] / max(1, count["encode"].sum())
    embed = route_matrix(enc_share * remote_fraction, count["prefill"], plc.locality)
    prefill_at = embed.sum(axis=0) + enc_share * (1.0 - remote_fraction)
    kv = route_matrix(prefill_at, count["decode"], plc.locality)
    out: np.ndarray = embed_bytes * embed + kv_bytes * kv
    return out


def network_rps(stages: Mapping[str, Stage], placement: Placement | None, cluster: Cluster, *,
                s_bounds: tuple[float, float], embed_bytes: float, kv_bytes: float) -> float:
    """Requests/s at which the busiest NIC saturates, at the best s in ``s_bounds`` (inf on one node)."""
    if cluster.num_nodes == 1:
        return math.inf
    best = 0.0
    for s in sorted(set(s_bounds)):
        flows = traffic_bytes(stages, placement, cluster, remote_fraction=s, embed_bytes=embed_bytes,
                              kv_bytes=kv_bytes)
        np.fill_diagonal(flows, 0.0)
        worst = max(float(flows.sum(axis=1).max()), float(flows.sum(axis=0).max()))
        best = max(best, math.inf if worst == 0 else cluster.nic_bytes_per_s / worst)
    return best
