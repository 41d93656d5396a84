"""Exact traces: the order of simultaneous events is pinned (docs/simulator.md §Ties).

Latencies are powers of two so every time is exact in binary floating point.
One encode worker (fixed batch of 2, timeout 0.5 s, s = 0.5, dynamic sharing
with Encode at half the SMs), one Prefill and one Decode worker of one GPU.
Requests 0 and 1 arrive at 0; request 2 arrives at 0.25, the instant the
first encode batch ends.
"""

from __future__ import annotations

from easerve_core import Cluster, Deployment, Modality, Request, SMShareTable, StageGroup
from easerve_core.plan import assemble
from sim import simulate
from tests.sim.conftest import AffineProfile

PROFILE = AffineProfile(encode_base_s=0.25, encode_fill_frac=0.5, prefill_base_s=0.5,
                        decode_base_s=0.125, embed_bytes_per_token=1, kv_bytes_per_token=1)
CLUSTER = Cluster(gpu="test-gpu", num_gpus=3, link_bytes_per_s=1024, link_latency_s=0.0, num_links=2)
DEPLOYMENT = Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                        decode=StageGroup(num_workers=1), max_encode_batch=2, batching="fixed",
                        batch_timeout_s=0.5, remote_fraction=0.5)


def _requests() -> list[Request]:
    return [Request(request_id=i, arrival_s=t, modality=Modality.IMAGE, prompt_tokens=0,
                    output_tokens=3, mm_tokens_per_item=(256,))
            for i, t in enumerate([0.0, 0.0, 0.25])]


def test_exact_trace() -> None:
    log: list[tuple[object, ...]] = []
    simulate(assemble(DEPLOYMENT, _requests(), cluster=CLUSTER, sm_table=SMShareTable({2: 0.5}),
                     profile=PROFILE), PROFILE, trace=log)
    assert log == [
        (0.0, "arrive", 0, (0,)),
        (0.0, "arrive", 0, (1,)),
        (0.0, "encode_start", 0, (0, 1)),  # the batch closed on size
        (0.25, "arrive", 0, (2,)),  # the dispatcher's timer was set before the encoder's
        (0.25, "encode_end", 0, (0, 1)),
        (0.25, "route_remote", 0, (0,)),  # deficit router: owed 0.5 -> remote
        (0.25, "route_local", 0, (1,)),
        (0.25, "local_prefill_start", 0, (1,)),  # whole GPU: no encode batch runs
        (0.5, "prefill_arrive", 0, (0,)),  # 256 B embedding at 1024 B/s
        (0.5, "prefill_start", 0, (0,)),
        (0.75, "local_prefill_end", 0, (1,)),  # prefill is finished before the batcher's poll
        (0.75, "encode_start", 0, (2,)),  # timeout batch of one
        (1.0, "decode_arrive", 0, (1,)),  # a transfer's delivery runs before workers wake
        (1.0, "prefill_end", 0, (0,)),
        (1.0, "decode_join", 0, (1,)),
        (1.0, "encode_end", 0, (2,)),
        (1.0, "route_remote", 0, (2,)),
        (1.25, "decode_arrive", 0, (0,)),  # arrives at a step boundary: no cut needed
        (1.25, "prefill_arrive", 0, (2,)),
        (1.25, "decode_leave", 0, (1,)),  # leaves before joins at one boundary
        (1.25, "decode_join", 0, (0,)),
        (1.25, "prefill_start", 0, (2,)),
        (1.5, "decode_leave", 0, (0,)),
        (1.75, "prefill_end", 0, (2,)),
        (2.0, "decode_arrive", 0, (2,)),
        (2.0, "decode_join", 0, (2,)),
        (2.25, "decode_leave", 0, (2,)),
    ]


def test_exact_utilization_steps() -> None:
    result = simulate(assemble(DEPLOYMENT, _requests(), cluster=CLUSTER, sm_table=SMShareTable({2: 0.5}),
                              profile=PROFILE), PROFILE)
    encoder = result.utilization[result.utilization["gpu"] == 0]
    assert list(zip(encoder["time_s"], encoder["busy_frac"], strict=True)) == [
        (0.0, 0.5),  # encode batch of 2 fills half the SMs
        (0.25, 1.0),  # local prefill alone holds the GPU
        (0.75, 0.5),
        (1.0, 0.0),
    ]


def test_mid_segment_join_waits_for_the_step_boundary() -> None:
    """A request whose KV lands mid-step joins when the step in progress ends."""
    profile = AffineProfile(encode_base_s=0.25, encode_fill_frac=0.5, prefill_base_s=0.5,
                            decode_base_s=0.125, embed_bytes_per_token=1, kv_bytes_per_token=1)
    dep = DEPLOYMENT.with_(remote_fraction=1.0, max_encode_batch=1, sm_sharing="none")
    reqs = [Request(request_id=0, arrival_s=0.0, modality=Modality.IMAGE, prompt_tokens=0,
                    output_tokens=9, mm_tokens_per_item=(256,)),
            Request(request_id=1, arrival_s=0.5625, modality=Modality.IMAGE, prompt_tokens=0,
                    output_tokens=3, mm_tokens_per_item=(256,))]
    log: list[tuple[object, ...]] = []
    simulate(assemble(dep, reqs, cluster=CLUSTER, profile=profile), profile, trace=log)
    decode = [(t, what, ids) for t, what, _, ids in log if what.startswith("decode")]
    # 0 joins at 1.25 for 8 steps of 0.125 s (to 2.25). 1 is encoded 0.5625-0.8125, its
    # embedding lands at 1.0625, prefill ends at 1.5625 and its KV lands at 1.8125, inside
    # step 5 (1.75-1.875): it joins at 1.875 and leaves after 2 steps, at 2.125.
    assert decode == [
        (1.25, "decode_arrive", (0,)),
        (1.25, "decode_join", (0,)),
        (1.8125, "decode_arrive", (1,)),
        (1.875, "decode_join", (1,)),
        (2.125, "decode_leave", (1,)),
        (2.25, "decode_leave", (0,)),
    ]
