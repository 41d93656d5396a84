"""HAS on several nodes: placements enumerated, cross-node traffic over NIC capacity screens out."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calibration.registry import analytic_profile, cluster_for
from easerve_core import StageGroup
from easerve_core.has.network import network_rps, route_matrix, traffic_bytes
from easerve_core.has.screen import allocation_capacity, screen, typical_shape
from easerve_core.has.space import Allocation, SearchSpace, enumerate_allocations
from easerve_core.placement import Placement
from easerve_core.workload.mixes import mix

PROFILE = analytic_profile("qwen2.5-vl-32b", "rtx6000ada")
TWO = cluster_for("rtx6000ada", 16, num_nodes=2, network="ndr-400g")


def _alloc(placement: str) -> Allocation:
    return Allocation(encode=StageGroup(num_workers=4), prefill=StageGroup(num_workers=2, tp=2),
                      decode=StageGroup(num_workers=4, tp=2), placement=Placement(strategy=placement))


def test_route_matrix_keeps_hand_offs_on_the_node_when_it_can() -> None:
    assert route_matrix([0.5, 0.5], [1, 1], "node").tolist() == [[0.5, 0.0], [0.0, 0.5]]
    assert route_matrix([1.0, 0.0], [0, 2], "node").tolist() == [[0.0, 1.0], [0.0, 0.0]]
    assert route_matrix([0.5, 0.5], [1, 1], "any").tolist() == [[0.25, 0.25], [0.25, 0.25]]


def test_packed_crosses_every_kv_and_spread_none() -> None:
    # packed: E4 P2x2 on node 0 (8 GPUs), D4x2 on node 1: every KV cache crosses, no embedding does
    packed = traffic_bytes(_alloc("packed").stages, Placement(), TWO, remote_fraction=1.0,
                           embed_bytes=3.0, kv_bytes=100.0)
    assert packed.tolist() == [[3.0, 100.0], [0.0, 0.0]]
    spread = traffic_bytes(_alloc("spread").stages, Placement(strategy="spread"), TWO, remote_fraction=1.0,
                           embed_bytes=3.0, kv_bytes=100.0)
    assert spread[0, 1] == spread[1, 0] == 0.0
    rps = network_rps(_alloc("packed").stages, None, TWO, s_bounds=(0.0, 1.0), embed_bytes=3.0,
                      kv_bytes=100.0)
    assert rps == TWO.nic_bytes_per_s / 100.0
    assert math.isinf(network_rps(_alloc("spread").stages, Placement(strategy="spread"), TWO,
                                  s_bounds=(0.0, 1.0), embed_bytes=3.0, kv_bytes=100.0))


def test_enumeration_offers_each_distinct_placement_once() -> None:
    allocs = enumerate_allocations(PROFILE, TWO)
    labels = [a.label for a in allocs]
    assert len(set(labels)) == len(labels)
    assert {a.placement.strategy for a in allocs if a.placement} == {"packed", "spread"}
    assert all(max(a.encode.tp, a.prefill.tp, a.decode.tp) <= 8 for a in allocs)
    space = SearchSpace(allocations=tuple(allocs))
    dep = space.deployment(labels[0], 4, 1.0)
    assert dep.placement == allocs[0].placement
    dep.check_fits(TWO)


def test_a_slow_network_screens_out_the_allocations_whose_kv_crosses_it() -> None:
    video = mix("qwen-video")
    slow = cluster_for("rtx6000ada", 16, num_nodes=2).__class__(
        **{**{k: getattr(TWO, k) for k in TWO.__dataclass_fields__}, "nic_bytes_per_s": 1e9})
    shape = typical_shape(video)
    kv = PROFILE.for_tp(2).kv_bytes(shape.seq_len)
    cap = allocation_capacity(_alloc("packed"), PROFILE, shape, rate_hz=1.0, cluster=slow)
    assert cap.network_rps == pytest.approx(1e9 / kv)
    assert cap.bottleneck == "network"
    report = screen(PROFILE, slow, video, rate_hz=1e9 / kv * 1.5)  # above what a crossing KV allows
    kept = {c.allocation.label for c in report.survivors}
    assert kept and all(c.capacity.network_rps >= report.rate_hz for c in report.survivors)
    # some allocations carry the rate on every stage but the network, and only they are lost to it
    rate = report.rate_hz
    by_network = [c for c in report.candidates if c.capacity.network_rps < rate
                  and min(c.capacity.encode_rps, c.capacity.prefill_rps, c.capacity.decode_rps) >= rate]
    assert by_network and not kept & {c.allocation.label for c in by_network}
    assert np.isinf([c.capacity.network_rps for c in report.survivors]).any()
