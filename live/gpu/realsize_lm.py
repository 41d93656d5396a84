"""A few LM decoder layers at published sizes, plus the embedding and the head.

Profiling a 30+ B LM on one GPU in minutes means building only ``num_layers``
of its layers (random BF16 weights) and scaling: the time of the full model is
the time outside the layers (embedding, final norm, head) plus, per layer
type, the measured per-layer time times the full model's count of that type
(:meth:`LMStage.scale_s`). Gemma-3 alternates five sliding-window layers with
one global layer, so its built layers hold one of each.

Dimensions (notes/systems.md §3, calibration/specs/models/*.json):
Yi-34B (LLaVA-v1.6-34B's LM), Qwen2.5-32B (Qwen2.5-VL-32B's LM) and
Gemma-3-27B (Ultravox v0.6's LM). ``max_position_embeddings`` is set to 32768
for all three: it changes no kernel, and lets the sweeps use long contexts.
Version-sensitive spot: the cache keyword of ``forward`` is ``cache`` in
transformers 5.24 and ``past_key_values`` before the rename; see
:func:`cache_kwarg`.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from transformers import (
    DynamicCache,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

SIZES = ("tiny", "full")
_MAX_POS = 32768


@dataclass(frozen=True, slots=True, kw_only=True)
class LMDims:
    """Published dimensions of one LM (``sliding_every``: every n-th layer is global, 0: none)."""

    hidden: int
    intermediate: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab: int
    sliding_window: int = 0
    sliding_every: int = 0

    def layer_types(self, num_layers: int) -> list[str]:
        if not self.sliding_every:
            return ["full_attention"] * num_layers
        return ["full_attention" if (i + 1) % self.sliding_every == 0 else "sliding_attention"
                for i in range(num_layers)]

    def built_types(self, num_layers: int) -> list[str]:
        """Types of a short build: the last layer global, so every type gets measured."""
        if not self.sliding_every or num_layers < 2:
            return self.layer_types(num_layers)
        return ["sliding_attention"] * (num_layers - 1) + ["full_attention"]


FULL_DIMS: Mapping[str, LMDims] = {
    "yi-34b": LMDims(hidden=7168, intermediate=20480, num_layers=60, num_heads=56, num_kv_heads=8,
                     head_dim=128, vocab=64064),
    "qwen2.5-32b": LMDims(hidden=5120, intermediate=27648, num_layers=64, num_heads=40, num_kv_heads=8,
                          head_dim=128, vocab=152064),
    "gemma-3-27b": LMDims(hidden=5376, intermediate=21504, num_layers=62, num_heads=32, num_kv_heads=16,
                          head_dim=128, vocab=262208, sliding_window=1024, sliding_every=6),
}

_TINY = dict(hidden=64, intermediate=128, num_layers=4, num_heads=4, num_kv_heads=2, head_dim=16, vocab=512)
TINY_DIMS: Mapping[str, LMDims] = {
    "yi-34b": LMDims(**_TINY),
    "qwen2.5-32b": LMDims(**_TINY),
    "gemma-3-27b": LMDims(**_TINY, sliding_window=8, sliding_every=2),
}


def lm_dims(name: str, size: str) -> LMDims:
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; known: {', '.join(SIZES)}")
    table = FULL_DIMS if size == "full" else TINY_DIMS
    if name not in table:
        raise ValueError(f"unknown lm {name!r}; known: {', '.join(sorted(table))}")
    return table[name]


def _common(d: LMDims, num_layers: int) -> dict[str, Any]:
    """The config fields every family shares."""
    return dict(vocab_size=d.vocab, hidden_size=d.hidden, intermediate_size=d.intermediate,
                num_hidden_layers=num_layers, num_attention_heads=d.num_heads,
                num_key_value_heads=d.num_kv_heads, max_position_embeddings=_MAX_POS,
                pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _yi_config(d: LMDims, num_layers: int) -> Any:
    return LlamaConfig(**_common(d, num_layers), head_dim=d.head_dim, rms_norm_eps=1e-5,
                       tie_word_embeddings=False)


def _qwen_config(d: LMDims, num_layers: int) -> Any:
    return Qwen2Config(**_common(d, num_layers), tie_word_embeddings=False)


def _gemma_config(d: LMDims, num_layers: int) -> Any:
    return Gemma3TextConfig(**_common(d, num_layers), head_dim=d.head_dim, query_pre_attn_scalar=168,
                            sliding_window=d.sliding_window, layer_types=d.built_types(num_layers))


#: each LM's config builder and model class
_FAMILIES: Mapping[str, tuple[Callable[[LMDims, int], Any], type]] = {
    "yi-34b": (_yi_config, LlamaForCausalLM),
    "qwen2.5-32b": (_qwen_config, Qwen2ForCausalLM),
    "gemma-3-27b": (_gemma_config, Gemma3ForCausalLM),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class LMStage:
    """``num_layers`` built layers of ``name`` and what scaling to the full depth needs."""

    name: str
    model: Any
    dims: LMDims
    built_types: tuple[str, ...]

    @property
    def layers(self) -> Any:
        return self.model.model.layers

    def full_type_counts(self) -> dict[str, int]:
        return dict(Counter(self.dims.layer_types(self.dims.num_layers)))

    def scale_s(self, outside_s: float, per_layer_s: Mapping[str, float]) -> float:
        """Full-depth time: ``outside_s`` plus each layer type's time times its full count."""
        missing = set(self.full_type_counts()) - set(per_layer_s)
        if missing:
            raise ValueError(f"per_layer_s lacks layer types {sorted(missing)}")
        return outside_s + sum(n * per_layer_s[t] for t, n in self.full_type_counts().items())

    def kv_bytes_per_token(self) -> int:
        """Full-depth KV bytes per token at the model dtype (sliding layers counted in full)."""
        itemsize = next(self.model.parameters()).element_size()
        return 2 * self.dims.num_layers * self.dims.num_kv_heads * self.dims.head_dim * itemsize


def build_lm(name: str, *, size: str = "tiny", num_layers: int = 2, device: str | torch.device = "cpu",
             dtype: torch.dtype = torch.float32, seed: int = 0) -> LMStage:
    """Build ``num_layers`` layers of ``name`` with random weights (embedding and head included)."""
    if not isinstance(num_layers, int) or num_layers < 1:
        raise ValueError(f"num_layers must be an integer >= 1, got {num_layers!r}")
    dims = lm_dims(name, size)
    make_config, model_class = _FAMILIES[name]
    config = make_config(dims, num_layers)
    torch.manual_seed(seed)
    with torch.device(device):
        model = model_class(config)
    model = model.to(dtype).eval()
    return LMStage(name=name, model=model, dims=dims, built_types=tuple(dims.built_types(num_layers)))


def cache_kwarg(model: Any) -> str:
    """The forward keyword that takes a KV cache: ``cache`` (5.24) or ``past_key_values`` (older)."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def random_cache(stage: LMStage, batch_size: int, context_tokens: int) -> Any:
    """A ``DynamicCache`` holding ``context_tokens`` random keys/values per row, per built layer.

    Sliding-window layers keep only their window, as they would after a real prefill.
    """
    model = stage.model
    p = next(model.parameters())
    cache = DynamicCache(config=model.config)
    shape = (batch_size, stage.dims.num_kv_heads, context_tokens, stage.dims.head_dim)
    for i in range(len(stage.layers)):
        k = torch.randn(shape, device=p.device, dtype=p.dtype)
        v = torch.randn(shape, device=p.device, dtype=p.dtype)
        cache.update(k, v, i)
    return cache
