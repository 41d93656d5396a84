"""The parts a spec describes: the language model (:class:`LMSpec`) and the encoder tower
(:class:`EncoderSpec`), with their derived sizes (parameters, KV bytes, MoE active and total), and
the typical request its profiles and screens are shown at (:class:`TypicalRequest`).

:mod:`calibration.specs` builds them from the marked spec files and re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from calibration._fields import validate
from easerve_core import limits
from easerve_core.request import PooledItems


@dataclass(frozen=True, slots=True, kw_only=True)
class LMSpec:
    """The language model: decoder layers, attention shape, vocabulary."""

    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    mlp_num_matrices: int
    sliding_window_tokens: int
    num_sliding_layers: int
    dtype_bytes: int
    # Mixture of experts (all 0 for a dense model): ``num_moe_layers`` layers replace the dense
    # MLP by ``num_experts`` experts of ``moe_intermediate_size``, ``num_experts_per_token`` of
    # them active per token, beside an always-on shared MLP of ``shared_expert_intermediate_size``.
    num_experts: int = 0
    num_experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    num_moe_layers: int = 0

    def __post_init__(self) -> None:
        validate(self, positive=frozenset({
            "num_layers", "hidden_size", "intermediate_size", "num_heads", "num_kv_heads",
            "head_dim", "vocab_size", "mlp_num_matrices", "dtype_bytes"}))
        if self.num_sliding_layers > self.num_layers:
            raise ValueError(f"LMSpec.num_sliding_layers must be <= num_layers, got "
                             f"{self.num_sliding_layers!r}")
        if self.num_sliding_layers and not self.sliding_window_tokens:
            raise ValueError("LMSpec.sliding_window_tokens must be > 0 when there are sliding layers")
        if self.num_moe_layers or self.num_experts:
            if not 1 <= self.num_moe_layers <= self.num_layers:
                raise ValueError(f"LMSpec.num_moe_layers must be in [1, num_layers] for an MoE model, "
                                 f"got {self.num_moe_layers!r}")
            if not 1 <= self.num_experts_per_token <= self.num_experts:
                raise ValueError(f"LMSpec.num_experts_per_token must be in [1, num_experts], got "
                                 f"{self.num_experts_per_token!r}")
            if not self.moe_intermediate_size:
                raise ValueError("LMSpec.moe_intermediate_size must be > 0 for an MoE model")

    @property
    def is_moe(self) -> bool:
        return self.num_moe_layers > 0

    @property
    def q_width(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def attention_params(self) -> int:
        return 2 * self.hidden_size * self.q_width + 2 * self.hidden_size * self.num_kv_heads * self.head_dim

    @property
    def layer_params(self) -> int:
        """Weights of one dense decoder layer (norms and biases ignored)."""
        return self.attention_params + self.mlp_num_matrices * self.hidden_size * self.intermediate_size

    @property
    def expert_params(self) -> int:
        return self.mlp_num_matrices * self.hidden_size * self.moe_intermediate_size

    def moe_layer_params(self, experts: float) -> float:
        """Weights of one MoE layer holding ``experts`` experts (plus router and shared MLP)."""
        shared = self.mlp_num_matrices * self.hidden_size * self.shared_expert_intermediate_size
        router = self.hidden_size * self.num_experts
        return self.attention_params + shared + router + experts * self.expert_params

    def layers_params(self, experts: float) -> float:
        """Weights of all decoder layers, MoE layers holding ``experts`` experts each."""
        if not self.is_moe:
            return self.num_layers * self.layer_params
        dense = (self.num_layers - self.num_moe_layers) * self.layer_params
        return dense + self.num_moe_layers * self.moe_layer_params(experts)

    @property
    def active_intermediate_size(self) -> float:
        """The MLP width one token computes through, averaged over layers (compute, not memory)."""
        if not self.is_moe:
            return self.intermediate_size
        moe = self.num_experts_per_token * self.moe_intermediate_size + self.shared_expert_intermediate_size
        dense = self.num_layers - self.num_moe_layers
        return (dense * self.intermediate_size + self.num_moe_layers * moe) / self.num_layers

    def experts_touched(self, num_tokens: float) -> float:
        """Expected distinct experts per MoE layer that ``num_tokens`` tokens route to (uniform routing)."""
        if not self.is_moe:
            return 0.0
        miss = (1.0 - self.num_experts_per_token / self.num_experts) ** max(0.0, num_tokens)
        return self.num_experts * (1.0 - miss)

    @property
    def embedding_params(self) -> int:
        copies = 1 if self.tie_word_embeddings else 2
        return copies * self.vocab_size * self.hidden_size

    @property
    def params(self) -> int:
        """All weights (every expert: what memory holds)."""
        return int(self.layers_params(self.num_experts)) + self.embedding_params

    @property
    def active_params(self) -> int:
        """Weights one token computes through (``num_experts_per_token`` experts per MoE layer)."""
        return int(self.layers_params(self.num_experts_per_token)) + self.embedding_params

    @property
    def weight_bytes(self) -> int:
        return self.params * self.dtype_bytes

    @property
    def kv_bytes_per_token_layer(self) -> int:
        return 2 * self.num_kv_heads * self.head_dim * self.dtype_bytes

    @property
    def num_full_layers(self) -> int:
        return self.num_layers - self.num_sliding_layers

    def kv_bytes(self, seq_len: int) -> int:
        """KV bytes of one sequence of ``seq_len`` tokens (sliding layers keep a window)."""
        window = min(seq_len, self.sliding_window_tokens) if self.num_sliding_layers else 0
        held = self.num_full_layers * seq_len + self.num_sliding_layers * window
        return held * self.kv_bytes_per_token_layer


@dataclass(frozen=True, slots=True, kw_only=True)
class EncoderSpec:
    """The vision/audio tower (transformer layers) and its projector."""

    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    mlp_num_matrices: int
    projector_params: int
    stem_params: int

    def __post_init__(self) -> None:
        validate(self, positive=frozenset({
            "num_layers", "hidden_size", "intermediate_size", "num_heads", "mlp_num_matrices"}))

    @property
    def layer_params(self) -> int:
        return 4 * self.hidden_size**2 + self.mlp_num_matrices * self.hidden_size * self.intermediate_size

    @property
    def params(self) -> int:
        return self.num_layers * self.layer_params + self.projector_params + self.stem_params


#: the LM fields that describe a mixture of experts (left out of a dense model's ``to_dict``)
MOE_FIELDS = ("num_experts", "num_experts_per_token", "moe_intermediate_size",
               "shared_expert_intermediate_size", "num_moe_layers")


@dataclass(frozen=True, slots=True, kw_only=True)
class TypicalRequest(PooledItems):
    """Request sizes used by ``easerve profile show`` and capacity screens."""

    prompt_tokens: int
    output_tokens: int
    mm_tokens_per_item: tuple[int, ...]
    #: the items' tokens before unpadding and pooling, where the model does either (the encoder's
    #: work: ``Request.encode_tokens_per_item``); empty: ``mm_tokens_per_item``
    encode_tokens_per_item: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        validate(self, positive=frozenset({"output_tokens"}))
        items = self.mm_tokens_per_item
        if not isinstance(items, list | tuple):
            raise ValueError(f"TypicalRequest.mm_tokens_per_item must be a list of token counts, "
                             f"got {items!r}")
        for i, tokens in enumerate(items):  # whole counts >= 1, within what a request may hold
            if isinstance(tokens, bool) or not isinstance(tokens, int | float) or tokens < 1 or tokens % 1:
                raise ValueError(f"TypicalRequest.mm_tokens_per_item[{i}] must be a whole number >= 1, "
                                 f"got {tokens!r}")
        for name, value in (("prompt_tokens", self.prompt_tokens), ("output_tokens", self.output_tokens),
                            *((f"mm_tokens_per_item[{i}]", t) for i, t in enumerate(items))):
            limits.at_most(f"TypicalRequest.{name}", int(value), limits.MAX_TOKENS, limits.TOKENS_WHY)
        object.__setattr__(self, "mm_tokens_per_item", tuple(int(t) for t in items))
        self._check_encode_tokens("TypicalRequest.encode_tokens_per_item")
