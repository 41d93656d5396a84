"""Per-stage capacity, checked against a stub profile with round numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from easerve_core import capacity
from easerve_core.capacity import RequestShape


class Stub:
    """encode: 10 ms + 1 ms per item; prefill: 1 us per token; decode: 20 ms + 0.1 ms per sequence."""

    def encode_s(self, mm_tokens_per_item: Sequence[int], sm_share: float = 1.0) -> float:
        return (0.010 + 0.001 * len(mm_tokens_per_item)) / sm_share

    def prefill_s(self, seq_lens: Sequence[int], sm_share: float = 1.0) -> float:
        return 1e-6 * sum(seq_lens) / sm_share

    def decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        return 0.020 + 0.0001 * batch_size

    def embed_bytes(self, mm_tokens: int) -> int:
        return mm_tokens

    def kv_bytes(self, num_tokens: int) -> int:
        return num_tokens


SHAPE = RequestShape(prompt_tokens=100, output_tokens=101, mm_tokens_per_item=(400, 500))


def test_encode_capacity_grows_with_the_batch():
    assert capacity.encode_rps(Stub(), SHAPE, batch_size=1) == pytest.approx(1 / 0.012)
    assert capacity.encode_rps(Stub(), SHAPE, batch_size=8) == pytest.approx(8 / 0.026)
    assert capacity.encode_rps(Stub(), SHAPE, batch_size=1, sm_share=0.5) == pytest.approx(0.5 / 0.012)


def test_prefill_and_decode_capacity():
    assert capacity.prefill_rps(Stub(), SHAPE) == pytest.approx(1 / 1e-3)
    # 100 steps per request, 10 in flight, 21 ms per step
    assert capacity.decode_rps(Stub(), SHAPE, batch_size=10) == pytest.approx(10 / (100 * 0.021))
    assert capacity.decode_rps(Stub(), SHAPE, batch_size=0) == 0.0


def test_decode_batch_is_bound_by_kv_and_the_sequence_cap():
    assert SHAPE.tokens_per_seq == 1101
    assert capacity.max_decode_batch(SHAPE, 11_010, max_num_seqs=256) == 10
    assert capacity.max_decode_batch(SHAPE, None, max_num_seqs=64) == 64
    assert capacity.max_decode_batch(SHAPE, 10**9, max_num_seqs=64) == 64


def test_stage_capacity_names_the_bottleneck():
    cap = capacity.stage_capacity(encode=Stub(), prefill=Stub(), decode=Stub(), shape=SHAPE,
                                  encode_batch=8, decode_kv_capacity_tokens=11_010)
    assert cap.decode_batch == 10 and cap.bottleneck == "decode"
    assert cap.min_rps == pytest.approx(cap.decode_rps)
    assert capacity.pool_rps(cap.decode_rps, 3) == pytest.approx(3 * cap.decode_rps)


class HostStub(Stub):
    """The stub with 50 ms of host preprocessing per item (100 ms per request of SHAPE)."""

    def host_preprocess_s(self, mm_tokens_per_item: Sequence[int]) -> float:
        return 0.050 * len(mm_tokens_per_item)


def test_host_preprocessing_caps_an_encode_worker_whatever_its_batch():
    # GPU-side 1 / 0.012 = 83 req/s at B = 1 and 308 at B = 8; one host thread carries 10
    assert capacity.encode_rps(HostStub(), SHAPE, batch_size=1) == pytest.approx(10.0)
    assert capacity.encode_rps(HostStub(), SHAPE, batch_size=8) == pytest.approx(10.0)
    assert capacity.encode_rps(HostStub(), SHAPE, batch_size=8, preprocess_threads=4) == pytest.approx(40.0)
    gpu_bound = capacity.encode_rps(HostStub(), SHAPE, batch_size=1, preprocess_threads=16)
    assert gpu_bound == pytest.approx(1 / 0.012)


def test_text_only_requests_never_wait_for_encode():
    text = RequestShape(prompt_tokens=10, output_tokens=1)
    assert capacity.encode_rps(Stub(), text, batch_size=4) == math.inf
    assert capacity.decode_rps(Stub(), text, batch_size=4) == math.inf


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="output_tokens"):
        RequestShape(prompt_tokens=1, output_tokens=0)
    with pytest.raises(ValueError, match=r"mm_tokens_per_item\[0\]"):
        RequestShape(prompt_tokens=1, output_tokens=1, mm_tokens_per_item=(0,))
    with pytest.raises(ValueError, match="batch_size"):
        capacity.encode_rps(Stub(), SHAPE, batch_size=0)
