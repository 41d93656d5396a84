"""The multi-node transfer model: exact times of scripted transfers, and the N = 1 case.

Sizes and bandwidths are powers of two or small integers so that every
expected time is exact in binary floating point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from easerve_core import Cluster, Deployment, Modality, Request, StageGroup
from easerve_core.placement import Placement
from easerve_core.plan import assemble
from easerve_core.workload import WorkloadSpec, generate
from sim import simulate
from sim.clock import SimEnvironment
from sim.fairshare import FairShare, Flow, max_min_rates
from sim.link import Link
from sim.network import Network, make_link
from tests.sim.conftest import AffineProfile

NIC = 100.0  # bytes/s: a 1,000-byte transfer alone takes 10 s


@dataclass
class Worker:
    gpus: tuple[int, ...]


def _cluster(**kw: object) -> Cluster:
    values: dict[str, object] = dict(gpu="test-gpu", num_gpus=16, num_nodes=2, link_bytes_per_s=1000.0,
                                     link_latency_s=0.0, num_links=2, nic_bytes_per_s=NIC,
                                     nic_latency_s=0.0)
    values.update(kw)
    return Cluster(**values)  # type: ignore[arg-type]


def _run(cluster: Cluster, transfers: list[tuple[float, int, Worker, Worker]]) -> list[float]:
    """Start each ``(at_s, bytes, sender, receiver)``; return each delivery time, in that order."""
    env = SimEnvironment()
    net = Network(env, cluster)
    out: list[float] = [float("nan")] * len(transfers)
    for i, (at, nbytes, src, dst) in enumerate(transfers):
        def go(_call: object, i: int = i, nbytes: int = nbytes, src: Worker = src, dst: Worker = dst) -> None:
            net.send(env.now, nbytes, lambda end: out.__setitem__(i, end), ends=(src, dst))
        env.call_later(at, go)
    env.run_all()
    return out


A0, B0, A1, B1 = Worker((0,)), Worker((1,)), Worker((8,)), Worker((9,))


def test_a_transfer_alone_takes_latency_plus_size_over_bandwidth() -> None:
    cluster = _cluster(nic_latency_s=0.25)
    assert _run(cluster, [(1.0, 1000, A0, A1)]) == [1.0 + 0.25 + 1000 / NIC]


def test_two_transfers_on_one_nic_each_take_twice_as_long() -> None:
    # both start together: each at half speed throughout
    assert _run(_cluster(), [(0.0, 1000, A0, A1), (0.0, 1000, B0, B1)]) == [20.0, 20.0]
    # staggered: the first runs alone 2 s (200 bytes), both at 50 B/s until it ends at 18 s,
    # then the second (200 bytes left) alone until 20 s
    assert _run(_cluster(), [(0.0, 1000, A0, A1), (2.0, 1000, B0, B1)]) == [18.0, 20.0]


def test_ingress_is_shared_and_the_reverse_direction_is_not() -> None:
    three = _cluster(num_gpus=24, num_nodes=3)
    c0 = Worker((16,))
    # node 0 -> 1 and node 2 -> 1 share node 1's NIC in
    assert _run(three, [(0.0, 1000, A0, A1), (0.0, 1000, c0, B1)]) == [20.0, 20.0]
    # 0 -> 1 and 1 -> 0: full duplex, no sharing
    assert _run(three, [(0.0, 1000, A0, A1), (0.0, 1000, A1, A0)]) == [10.0, 10.0]


def test_max_min_rates() -> None:
    # f1 crosses x only, f2 crosses x and y, f3 crosses y only; y is the scarce one
    flows = [Flow(r, 1, float("inf"), lambda _t: None, i)
             for i, r in enumerate([("x",), ("x", "y"), ("y",)])]
    max_min_rates(flows, {"x": 10.0, "y": 4.0})
    assert [f.rate for f in flows] == [8.0, 2.0, 2.0]
    capped = [Flow(("x",), 1, 1.0, lambda _t: None, 0), Flow(("x",), 1, float("inf"), lambda _t: None, 1)]
    max_min_rates(capped, {"x": 10.0})
    assert [f.rate for f in capped] == [1.0, 9.0]


def test_fair_links_inside_a_node_share_paths_and_cap_one_path() -> None:
    fair = _cluster(link_sharing="fair")  # 2 paths of 1,000 B/s per node
    two = [(0.0, 1000, A0, B0), (0.0, 1000, B0, A0)]
    assert _run(fair, two) == [1.0, 1.0]  # one path each
    three = [*two, (0.0, 1000, A0, B0)]
    assert _run(fair, three) == [1.5, 1.5, 1.5]  # 2,000 B/s shared three ways
    fcfs = _cluster()
    assert _run(fcfs, three) == [1.0, 1.0, 2.0]  # the single-node model: the third waits


def test_zero_bytes_arrive_after_the_latency() -> None:
    assert _run(_cluster(nic_latency_s=0.5), [(0.0, 0, A0, A1)]) == [0.5]


def test_fairshare_refuses_a_zero_capacity() -> None:
    with pytest.raises(ValueError, match="capacity"):
        FairShare(SimEnvironment(), {"nic": 0.0})


def test_one_node_keeps_the_single_node_link() -> None:
    env = SimEnvironment()
    dep = Deployment()
    assert type(make_link(env, Cluster(gpu="g"), dep)) is Link
    assert type(make_link(env, Cluster(gpu="g", link_sharing="fair"), dep)) is Network
    assert type(make_link(env, Cluster(gpu="g", num_gpus=16, num_nodes=2), dep)) is Network


# -- the simulator: a cross-node KV transfer -------------------------------------------------------

PROFILE = AffineProfile(encode_base_s=0.012, encode_per_token_s=3e-6, prefill_base_s=0.02,
                        prefill_per_token_s=4e-5, decode_base_s=0.004, decode_per_ctx_s=2e-8,
                        embed_bytes_per_token=14336, kv_bytes_per_token=245760)
REQUEST = Request(request_id=7, arrival_s=1.5, modality=Modality.IMAGE, prompt_tokens=300,
                  output_tokens=9, mm_tokens_per_item=(2928,))
TWO_NODES = Cluster(gpu="test-gpu", num_gpus=16, num_nodes=2, link_bytes_per_s=25e9, link_latency_s=1e-5,
                    num_links=4, nic_bytes_per_s=12.5e9, nic_latency_s=2e-5)


def _dep(decode_node: int) -> Deployment:
    return Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1, tp=2),
                      decode=StageGroup(num_workers=1, tp=2), max_encode_batch=1, remote_fraction=1.0,
                      placement=Placement(strategy="explicit", encode=(0,), prefill=(0,),
                                          decode=(decode_node,)))


def _record(dep: Deployment, cluster: Cluster) -> dict[str, float]:
    plan = assemble(dep, [REQUEST], cluster=cluster, profile=PROFILE)
    return dict(simulate(plan, PROFILE).records.iloc[0])


def test_a_cross_node_kv_transfer_delays_decode_by_exactly_its_time() -> None:
    local, remote = _record(_dep(0), TWO_NODES), _record(_dep(1), TWO_NODES)
    kv = PROFILE.kv_bytes(REQUEST.input_tokens)
    intra = TWO_NODES.link_latency_s + kv / TWO_NODES.link_bytes_per_s
    cross = TWO_NODES.nic_latency_s + kv / TWO_NODES.nic_bytes_per_s
    assert remote["first_token_s"] == local["first_token_s"]
    assert remote["finish_s"] - local["finish_s"] == pytest.approx(cross - intra, rel=1e-9, abs=1e-12)
    one = Cluster(gpu="test-gpu", num_gpus=8, link_bytes_per_s=25e9, link_latency_s=1e-5, num_links=4)
    single = _record(_dep(0).with_(placement=None), one)
    assert single["finish_s"] == local["finish_s"]  # node 0 of two is the single node


def test_two_nodes_with_everything_on_node_zero_reproduce_one_node(profile: AffineProfile,
                                                                    epd: Deployment) -> None:
    """Every transfer inside node 0: the per-node FCFS pool is the single-node link, record for record."""
    reqs = generate(WorkloadSpec.from_dict({"mix": "llava-image", "rate_hz": 4.0, "num_requests": 200}),
                    np.random.default_rng(3))
    one = Cluster(gpu="test-gpu", num_gpus=8, link_bytes_per_s=1e9, link_latency_s=1e-4, num_links=2)
    two = Cluster(gpu="test-gpu", num_gpus=16, num_nodes=2, link_bytes_per_s=1e9, link_latency_s=1e-4,
                  num_links=2)
    a = simulate(assemble(epd, reqs, cluster=one, profile=profile), profile).records
    b = simulate(assemble(epd, reqs, cluster=two, profile=profile), profile).records
    assert a.equals(b)
