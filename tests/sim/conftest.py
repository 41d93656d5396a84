"""Small hand-written profiles for the simulator tests (no calibration needed).

:class:`AffineProfile` has latencies that are constant or affine in their
inputs, so expected times can be written down by hand. :class:`MemoryProfile`
adds the ParallelProfile side (TP and KV capacity) to test memory limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from easerve_core import Cluster, Deployment, StageGroup


@dataclass(frozen=True, slots=True, kw_only=True)
class AffineProfile:
    """Latencies: encode ``a + b * tokens``, prefill ``a + b * tokens``, decode ``a + b * ctx``.

    An SM share ``s`` divides encode and prefill time by ``min(1, s / fill)``
    where ``fill`` is what the stage can occupy.
    """

    encode_base_s: float = 0.010
    encode_per_token_s: float = 0.0
    encode_fill_frac: float = 1.0
    prefill_base_s: float = 0.020
    prefill_per_token_s: float = 0.0
    decode_base_s: float = 0.005
    decode_per_ctx_s: float = 0.0
    embed_bytes_per_token: int = 1000
    kv_bytes_per_token: int = 1000

    def encode_s(self, mm_tokens_per_item: Sequence[int], sm_share: float = 1.0) -> float:
        base = self.encode_base_s + self.encode_per_token_s * sum(mm_tokens_per_item)
        return base / min(1.0, sm_share / self.encode_fill_frac)

    def prefill_s(self, seq_lens: Sequence[int], sm_share: float = 1.0) -> float:
        return (self.prefill_base_s + self.prefill_per_token_s * sum(seq_lens)) / sm_share

    def decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        return self.decode_base_s + self.decode_per_ctx_s * context_tokens

    def embed_bytes(self, mm_tokens: int) -> int:
        return self.embed_bytes_per_token * mm_tokens

    def kv_bytes(self, num_tokens: int) -> int:
        return self.kv_bytes_per_token * num_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryProfile:
    """An :class:`AffineProfile` behind a ParallelProfile with a fixed KV capacity per GPU."""

    stage: AffineProfile
    kv_tokens_per_gpu: int = 10_000
    min_tp: int = 1

    def for_tp(self, tp: int) -> AffineProfile:
        return self.stage

    def lm_fits(self, tp: int) -> bool:
        return tp >= self.min_tp

    def kv_capacity_tokens(self, tp: int, *, with_encoder: bool = False) -> int:
        return self.kv_tokens_per_gpu * tp if self.lm_fits(tp) else 0


@pytest.fixture
def profile() -> AffineProfile:
    return AffineProfile()


@pytest.fixture
def cluster() -> Cluster:
    return Cluster(gpu="test-gpu", num_gpus=8, link_bytes_per_s=1e9, link_latency_s=1e-4,
                   num_links=2)


@pytest.fixture
def epd() -> Deployment:
    """E2x1 P1x2 D2x2, B 4, half the prefills remote, dynamic sharing."""
    return Deployment(encode=StageGroup(num_workers=2, tp=1), prefill=StageGroup(num_workers=1, tp=2),
                      decode=StageGroup(num_workers=2, tp=2), max_encode_batch=4,
                      remote_fraction=0.5)
