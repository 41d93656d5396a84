"""Host preprocessing: a FIFO stage of host threads in front of the encoder (sim.preprocess).

Exact traces on small scripted cases. Latencies are powers of two so every
time is exact in binary floating point: preprocessing 0.125 s per item (the
"0.1 s" of the brief, made exact), encoding 0.25 s a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from easerve_core import Cluster, Deployment, Modality, Request, SMShareTable, StageGroup
from easerve_core.plan import assemble
from easerve_core.profile import host_preprocess_s
from sim import SimOptions, simulate
from sim.options import Scheduling
from tests.sim.conftest import AffineProfile

PRE_S = 0.125
ENC_S = 0.25
CLUSTER = Cluster(gpu="test-gpu", num_gpus=4, link_bytes_per_s=1024, link_latency_s=0.0, num_links=2)


@dataclass(frozen=True, slots=True, kw_only=True)
class HostProfile(AffineProfile):
    """:class:`AffineProfile` plus ``host_per_item_s`` of host preprocessing per item."""

    host_per_item_s: float = PRE_S

    def host_preprocess_s(self, mm_tokens_per_item: Sequence[int]) -> float:
        return self.host_per_item_s * len(mm_tokens_per_item)


PROFILE = HostProfile(encode_base_s=ENC_S, prefill_base_s=0.5, decode_base_s=0.125,
                      embed_bytes_per_token=1, kv_bytes_per_token=1)


def _requests(n: int = 3, items: tuple[int, ...] = (256,)) -> list[Request]:
    return [Request(request_id=i, arrival_s=0.0, modality=Modality.IMAGE, prompt_tokens=0,
                    output_tokens=3, mm_tokens_per_item=items) for i in range(n)]


def _encode_only(batch: int, threads: int = 1, profile: AffineProfile = PROFILE,
                 requests: list[Request] | None = None) -> list[tuple[object, ...]]:
    dep = Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                     decode=StageGroup(num_workers=1), max_encode_batch=batch, batching="fixed",
                     batch_timeout_s=0.0, remote_fraction=1.0, sm_sharing="none")
    log: list[tuple[object, ...]] = []
    simulate(assemble(dep, requests or _requests(), cluster=CLUSTER, profile=profile), profile,
             options=SimOptions(encode_only=True, num_preprocess_threads=threads), trace=log)
    return log


def test_one_thread_makes_request_k_ready_at_k_times_the_preprocessing_and_overlaps_the_encoder():
    assert _encode_only(batch=1) == [
        (0.0, "arrive", 0, (0,)),
        (0.0, "arrive", 0, (1,)),
        (0.0, "arrive", 0, (2,)),
        (0.125, "preprocessed", 0, (0,)),  # request k is ready at 0.125 * (k + 1)
        (0.125, "encode_start", 0, (0,)),
        (0.25, "preprocessed", 0, (1,)),  # while request 0 is on the GPU
        (0.375, "preprocessed", 0, (2,)),  # a timer set before the encoder's alarm
        (0.375, "encode_end", 0, (0,)),
        (0.375, "encode_start", 0, (1,)),  # ready since 0.25: no host time on the critical path
        (0.625, "encode_end", 0, (1,)),
        (0.625, "encode_start", 0, (2,)),
        (0.875, "encode_end", 0, (2,)),
    ]


def test_a_batch_forms_from_preprocessed_requests_only():
    """B = 2: all three arrive at 0, yet the first batch holds one request, the one ready."""
    assert _encode_only(batch=2) == [
        (0.0, "arrive", 0, (0,)),
        (0.0, "arrive", 0, (1,)),
        (0.0, "arrive", 0, (2,)),
        (0.125, "preprocessed", 0, (0,)),
        (0.125, "encode_start", 0, (0,)),  # timeout 0: a batch of the one ready request
        (0.25, "preprocessed", 0, (1,)),
        (0.375, "preprocessed", 0, (2,)),
        (0.375, "encode_end", 0, (0,)),
        (0.375, "encode_start", 0, (1, 2)),  # both ready while request 0 encoded: coalesced
        (0.625, "encode_end", 0, (1, 2)),
    ]


def test_two_threads_preprocess_two_requests_at_once():
    log = [e for e in _encode_only(batch=1, threads=2) if e[1] == "preprocessed"]
    assert log == [(0.125, "preprocessed", 0, (0,)), (0.125, "preprocessed", 0, (1,)),
                   (0.25, "preprocessed", 0, (2,))]


def test_preprocessing_is_per_item():
    log = _encode_only(batch=1, requests=_requests(2, items=(256, 256)))
    assert [e for e in log if e[1] == "preprocessed"] == [(0.25, "preprocessed", 0, (0,)),
                                                          (0.5, "preprocessed", 0, (1,))]


def test_no_stage_and_no_event_without_host_preprocessing():
    plain = AffineProfile(encode_base_s=ENC_S, prefill_base_s=0.5, decode_base_s=0.125,
                          embed_bytes_per_token=1, kv_bytes_per_token=1)
    free = HostProfile(encode_base_s=ENC_S, prefill_base_s=0.5, decode_base_s=0.125,
                       embed_bytes_per_token=1, kv_bytes_per_token=1, host_per_item_s=0.0)
    assert host_preprocess_s(plain, [256]) == 0.0
    assert _encode_only(batch=1, profile=plain) == _encode_only(batch=1, profile=free)
    assert not [e for e in _encode_only(batch=1, profile=free) if e[1] == "preprocessed"]


def test_aggregated_instance_preprocesses_before_its_engine_sees_the_request():
    dep = Deployment(encode=StageGroup(num_workers=0), prefill=StageGroup(num_workers=0),
                     decode=StageGroup(num_workers=1), architecture="aggregated")
    log: list[tuple[object, ...]] = []
    prefill_first = SimOptions(scheduler=Scheduling(chunked_prefill=False))  # its phases in the trace
    result = simulate(assemble(dep, _requests(2), cluster=CLUSTER, profile=PROFILE), PROFILE,
                      options=prefill_first, trace=log)
    assert log[:6] == [
        (0.125, "preprocessed", 0, (0,)),
        (0.125, "arrive", 0, (0,)),  # the engine core's arrival
        (0.125, "phase_start", 0, (0,)),
        (0.25, "preprocessed", 0, (1,)),  # during request 0's phase
        (0.25, "arrive", 0, (1,)),
        (0.875, "phase_end", 0, (0,)),  # encode 0.25 + prefill 0.5
    ]
    first = result.records.set_index("request_id")["first_token_s"]
    assert first[0] == pytest.approx(PRE_S + ENC_S + 0.5)


def test_least_loaded_dispatch_counts_requests_in_preprocessing():
    dep = Deployment(encode=StageGroup(num_workers=2), prefill=StageGroup(num_workers=1),
                     decode=StageGroup(num_workers=1), max_encode_batch=1, batching="fixed",
                     batch_timeout_s=0.0, remote_fraction=1.0, sm_sharing="none")
    log: list[tuple[object, ...]] = []
    simulate(assemble(dep, _requests(4), cluster=CLUSTER, profile=PROFILE), PROFILE,
             options=SimOptions(encode_only=True, dispatch="least-loaded"), trace=log)
    assert [(e[2], e[3]) for e in log if e[1] == "arrive"] == [(0, (0,)), (1, (1,)), (0, (2,)), (1, (3,))]


def test_thread_count_is_validated():
    with pytest.raises(ValueError, match=r"sim\.num_preprocess_threads"):
        SimOptions(num_preprocess_threads=0)
    assert SimOptions.from_dict({"num_preprocess_threads": 2}).num_preprocess_threads == 2


def test_the_sm_share_slows_the_encoder_not_the_host_part():
    """Dynamic sharing gives a batch of one half the SMs: encoding takes twice as long,
    preprocessing still 0.125 s a request."""
    profile = HostProfile(encode_base_s=ENC_S, prefill_base_s=0.5, decode_base_s=0.125,
                          embed_bytes_per_token=1, kv_bytes_per_token=1)
    dep = Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                     decode=StageGroup(num_workers=1), max_encode_batch=1, batching="fixed",
                     batch_timeout_s=0.0, remote_fraction=1.0)
    log: list[tuple[object, ...]] = []
    simulate(assemble(dep, _requests(2), cluster=CLUSTER, sm_table=SMShareTable({1: 0.5}), profile=profile),
             profile, options=SimOptions(encode_only=True), trace=log)
    assert log == [
        (0.0, "arrive", 0, (0,)),
        (0.0, "arrive", 0, (1,)),
        (0.125, "preprocessed", 0, (0,)),
        (0.125, "encode_start", 0, (0,)),
        (0.25, "preprocessed", 0, (1,)),
        (0.625, "encode_end", 0, (0,)),  # 0.25 s of work at half the SMs
        (0.625, "encode_start", 0, (1,)),
        (1.125, "encode_end", 0, (1,)),
    ]
