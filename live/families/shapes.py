"""Named model sizes written as data: the LM and tower shapes each family builds from.

``tiny`` runs the CPU tests in milliseconds; ``small`` (a few million
parameters) gives CPU timings that scale cleanly with batch and length;
``full`` is the published shape for a GPU (see docs/live.md for sources).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class LMShape:
    """The decoder-only language model."""

    hidden: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate: int
    vocab: int
    max_positions: int
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        for name in ("hidden", "num_layers", "num_heads", "num_kv_heads", "intermediate", "vocab"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.hidden % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"hidden ({self.hidden}) must divide by num_heads ({self.num_heads}) "
                f"and num_heads by num_kv_heads ({self.num_kv_heads})"
            )

    @property
    def head_dim(self) -> int:
        return self.hidden // self.num_heads


@dataclass(frozen=True, slots=True, kw_only=True)
class TowerShape:
    """The vision or audio encoder (before the projector)."""

    hidden: int
    num_layers: int
    num_heads: int
    intermediate: int

    def __post_init__(self) -> None:
        for name in ("hidden", "num_layers", "num_heads", "intermediate"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.hidden % self.num_heads:
            raise ValueError(f"hidden ({self.hidden}) must divide by num_heads ({self.num_heads})")


def text_config(lm: LMShape, **rope: Any) -> dict[str, Any]:
    """``lm`` as `transformers` text-config keywords: default RoPE (plus ``rope``), pad/bos/eos ids 0/1/2."""
    return dict(
        vocab_size=lm.vocab, hidden_size=lm.hidden, intermediate_size=lm.intermediate,
        num_hidden_layers=lm.num_layers, num_attention_heads=lm.num_heads,
        num_key_value_heads=lm.num_kv_heads, max_position_embeddings=lm.max_positions,
        rope_parameters={"rope_type": "default", "rope_theta": lm.rope_theta, **rope},
        pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )


TINY_VOCAB = 512

TINY_LM = LMShape(hidden=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate=128,
                  vocab=TINY_VOCAB, max_positions=4096)
SMALL_LM = LMShape(hidden=256, num_layers=4, num_heads=8, num_kv_heads=4, intermediate=512,
                   vocab=TINY_VOCAB, max_positions=4096)
TINY_TOWER = TowerShape(hidden=32, num_layers=2, num_heads=4, intermediate=64)
SMALL_TOWER = TowerShape(hidden=128, num_layers=4, num_heads=4, intermediate=256)
