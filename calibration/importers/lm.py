"""The language model of an imported spec: dense or MoE, GQA/MQA, sliding and chunked layers.

:data:`TEXT_TYPES` is the one table of the text ``model_type`` values the
importer reads, each with its MLP kind and where its experts live. What the
cost model has no rule for is returned as notes (the spec's ``unmodelled``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from calibration.importers._read import Keys, derived, leaf, value


@dataclass(frozen=True, slots=True)
class TextType:
    """``moe``: how the config names its experts (None for a dense model)."""

    gated_mlp: bool = True
    moe: str | None = None


#: text model_type -> how to read it
TEXT_TYPES: dict[str, TextType] = {
    "llama": TextType(),
    "mistral": TextType(),
    "qwen2": TextType(),
    "qwen3": TextType(),
    "qwen2_vl_text": TextType(),
    "qwen2_5_vl_text": TextType(),
    "qwen3_vl_text": TextType(),
    "gemma": TextType(),
    "gemma2": TextType(),
    "gemma3_text": TextType(),
    "phi3": TextType(),
    "qwen2_moe": TextType(moe="qwen"),
    "qwen3_moe": TextType(moe="qwen"),
    "qwen3_vl_moe_text": TextType(moe="qwen"),
    "mixtral": TextType(moe="mixtral"),
    "llama4_text": TextType(moe="llama4"),
    "gemma4_text": TextType(moe="gemma4"),
}

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def text_type(keys: Keys) -> tuple[str, TextType]:
    model_type = str(keys.raw_value("model_type", ""))
    if model_type not in TEXT_TYPES:
        raise ValueError(
            f"{keys.file}: unknown {keys.key('model_type')} {model_type!r}; known text "
            f"types: {', '.join(sorted(TEXT_TYPES))}"
        )
    return model_type, TEXT_TYPES[model_type]


def lm_block(text: Keys, top: Keys) -> tuple[dict[str, Any], list[str]]:
    """(the spec's ``lm`` table, notes on what is not modelled) of the text config ``text``."""
    model_type, kind = text_type(text)
    notes: list[str] = []
    hidden, heads = text.get("hidden_size", least=1), text.get("num_attention_heads", least=1)
    lm: dict[str, Any] = {
        "num_layers": text.get("num_hidden_layers"),
        "hidden_size": hidden,
        "intermediate_size": text.get("intermediate_size"),
        "num_heads": heads,
    }
    if text.has("num_key_value_heads"):
        lm["num_kv_heads"] = text.get("num_key_value_heads")
    else:
        lm["num_kv_heads"] = derived(value(heads), "num_key_value_heads absent: one KV head per query head")
    if text.has("head_dim"):
        lm["head_dim"] = text.get("head_dim")
    else:
        lm["head_dim"] = derived(
            value(hidden) // value(heads),
            f"hidden_size / num_attention_heads = {value(hidden)} / {value(heads)}",
        )
    lm["vocab_size"] = text.get("vocab_size")
    lm["tie_word_embeddings"] = _tied(text, top)
    lm["mlp_num_matrices"] = derived(
        3 if kind.gated_mlp else 2,
        f"{model_type}: " + ("gated MLP (gate, up, down)" if kind.gated_mlp else "MLP (up, down)"),
    )
    lm.update(_sliding(text, value(lm["num_layers"]), notes))
    lm["dtype_bytes"] = _dtype(text, top, notes)
    if kind.moe:
        lm.update(_moe(text, kind.moe, lm, notes))
    if model_type == "gemma4_text":
        notes.append(
            "gemma4_text: full-attention layers use global_head_dim and num_global_key_value_heads "
            "(K = V shared); every layer is priced with head_dim and num_key_value_heads"
        )
    return lm, notes


def _tied(text: Keys, top: Keys) -> dict[str, Any]:
    for keys in (top, text):
        if keys.raw.get("tie_word_embeddings") is not None:
            return keys.get("tie_word_embeddings", kind=bool)
    return (
        top.get("tie_word_embeddings", kind=bool)
        if top.has("tie_word_embeddings")
        else text.get("tie_word_embeddings", kind=bool)
    )


def _dtype(text: Keys, top: Keys, notes: list[str]) -> dict[str, Any]:
    if top.raw.get("quantization_config") is not None:
        notes.append(
            "quantization_config: quantized weights and kernels are not modelled; weights priced "
            "at the dtype below"
        )
    for keys in (text, top):
        for name in ("dtype", "torch_dtype"):
            if isinstance(keys.raw.get(name), str) and keys.raw[name] in _DTYPE_BYTES:
                return derived(
                    _DTYPE_BYTES[keys.raw[name]],
                    f"config.json {keys.key(name)} {keys.raw[name]!r}: {_DTYPE_BYTES[keys.raw[name]]} bytes",
                )
    return leaf(2, "G", "no dtype in config.json; BF16 weights assumed")


def _sliding(text: Keys, num_layers: int, notes: list[str]) -> dict[str, Any]:
    types = text.raw_value("layer_types")
    window_key = "attention_chunk_size" if types and "chunked_attention" in types else "sliding_window"
    if types:
        unknown = sorted(set(types) - {"full_attention", "sliding_attention", "chunked_attention"})
        if unknown:
            notes.append(f"layer_types {unknown}: no cost rule; priced as full attention")
        local = sum(t in ("sliding_attention", "chunked_attention") for t in types)
        if not local:
            return _no_window("layer_types: every layer full_attention")
        if "chunked_attention" in types:
            notes.append(
                "chunked attention priced as a sliding window of attention_chunk_size (at most "
                "2x the attention FLOPs of those layers)"
            )
        return {
            "sliding_window_tokens": text.get(window_key),
            "num_sliding_layers": derived(
                local, f"layer_types: {local} of {num_layers} layers sliding or chunked"
            ),
        }
    if text.raw_value("sliding_window") and text.raw_value("use_sliding_window", True):
        return {
            "sliding_window_tokens": text.get("sliding_window"),
            "num_sliding_layers": derived(num_layers, "sliding_window set, no layer_types: every layer"),
        }
    return _no_window("no sliding_window or layer_types")


def _no_window(why: str) -> dict[str, Any]:
    return {"sliding_window_tokens": derived(0, why), "num_sliding_layers": derived(0, why)}


#: how an MoE config names (its expert count, the experts each token is routed to)
_EXPERT_KEYS = {
    "gemma4": ("num_experts", "top_k_experts"),
    "mixtral": ("num_local_experts", "num_experts_per_tok"),
    "llama4": ("num_local_experts", "num_experts_per_tok"),
    "qwen": ("num_experts", "num_experts_per_tok"),
}


def _moe(text: Keys, how: str, lm: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    num_layers = value(lm["num_layers"])
    if how == "gemma4" and not text.raw_value("enable_moe_block", False):
        return {}
    notes.append("MoE: expert parallelism is not modelled; TP splits every expert like a dense MLP")
    if how == "llama4":  # intermediate_size is the experts' width; the dense MLP's has its own key
        lm["intermediate_size"] = text.get("intermediate_size_mlp")
    count_key, per_token_key = _EXPERT_KEYS[how]
    out = {"num_experts": text.get(count_key), "num_experts_per_token": text.get(per_token_key)}
    if how == "gemma4":
        out["moe_intermediate_size"] = text.get("moe_intermediate_size")
        out["shared_expert_intermediate_size"] = derived(
            value(lm["intermediate_size"]), "the dense MLP runs beside the experts"
        )
        out["num_moe_layers"] = derived(num_layers, "enable_moe_block: every layer")
    elif how == "mixtral":
        out["moe_intermediate_size"] = derived(
            value(lm["intermediate_size"]), "intermediate_size is the expert width"
        )
        out["num_moe_layers"] = derived(num_layers, "every layer")
    elif how == "llama4":
        moe_layers = list(text.raw_value("moe_layers") or [])
        out["moe_intermediate_size"] = text.get("intermediate_size")
        out["shared_expert_intermediate_size"] = text.get("intermediate_size")
        out["num_moe_layers"] = derived(
            len(moe_layers),
            f"every interleave_moe_layer_step={text.raw_value('interleave_moe_layer_step', 1)} layer",
        )
    else:
        step = int(text.raw_value("decoder_sparse_step", 1))
        dense_only = set(text.raw_value("mlp_only_layers") or [])
        count = sum(1 for i in range(num_layers) if i not in dense_only and (i + 1) % step == 0)
        out["moe_intermediate_size"] = text.get("moe_intermediate_size")
        out["num_moe_layers"] = derived(
            count,
            f"layers with (i + 1) % decoder_sparse_step ({step}) == 0, "
            f"less mlp_only_layers {sorted(dense_only)}",
        )
        if text.raw_value("shared_expert_intermediate_size"):
            out["shared_expert_intermediate_size"] = text.get("shared_expert_intermediate_size")
    return out
