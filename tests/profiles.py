"""A test double of the profile contract: constant prefill and decode, no bytes; subclasses say encode."""

from __future__ import annotations

from collections.abc import Sequence


class ConstantStages:
    """Prefill 20 ms, a decode step 5 ms, nothing moved; ``encode_s`` is the subclass's."""

    def encode_s(self, items: Sequence[int], sm_share: float = 1.0) -> float:
        raise NotImplementedError

    def prefill_s(self, seq_lens: Sequence[int], sm_share: float = 1.0) -> float:
        return 0.02

    def decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        return 0.005

    def embed_bytes(self, mm_tokens: int) -> int:
        return 0

    def kv_bytes(self, num_tokens: int) -> int:
        return 0
