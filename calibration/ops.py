"""A stage as a list of operators with their shapes (what a measured database is keyed by).

:mod:`calibration.work` counts a stage's FLOPs kernel by kernel for the
roofline; a measured database prices an operator by its shape instead: a GEMM
by (m, n, k), attention by batch, length and heads, an all-reduce by bytes and
TP, an element-wise pass by bytes. :func:`prefill_ops`, :func:`decode_ops` and
:func:`encoder_ops` list those operators for the same stages, per GPU (TP splits
the LM as in :mod:`calibration.work`), each with a ``label`` that names it in a
profile's source table (``lm.qkv``, ``vit.attention`` ...) and the number of
layers that repeat it.

Shapes are rounded to whole numbers; attention over sequences of different
lengths is priced as a batch of equal sequences of the length that gives the
same query-key pairs (docs/profiles.md, "Measured profiles").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from calibration.specs import LMSpec, ModelSpec

#: operator kinds and the meaning of their shape tuple
KINDS = {
    "gemm": "(m, n, k)",
    "context_attention": "(batch, tokens per sequence, heads, KV heads, head dim)",
    "generation_attention": "(batch, context tokens per sequence, heads, KV heads, head dim)",
    "encoder_attention": "(batch, positions per sequence, heads, heads, head dim)",
    "allreduce": "(bytes, tp)",
    "elementwise": "(bytes read and written,)",
    "conv": "(FLOPs, bytes)",
}


class Op(NamedTuple):
    """One operator launch of ``shape`` (see :data:`KINDS`), repeated ``count`` times."""

    kind: str
    label: str
    shape: tuple[int, ...]
    count: int = 1


def _gemms(prefix: str, m: int, *, hidden: int, q: int, kv: int, ffn: int, mats: int, tp: int,
           layers: int) -> list[Op]:
    """The four GEMMs of a transformer layer over ``m`` tokens on one GPU (:mod:`calibration.work`)."""
    return [Op("gemm", f"{prefix}.qkv", (m, (q + 2 * kv) // tp, hidden), layers),
            Op("gemm", f"{prefix}.o", (m, hidden, q // tp), layers),
            Op("gemm", f"{prefix}.gate_up", (m, (mats - 1) * ffn // tp, hidden), layers),
            Op("gemm", f"{prefix}.down", (m, hidden, ffn // tp), layers)]


def _heads(lm: LMSpec, tp: int) -> tuple[int, int, int]:
    return max(1, lm.num_heads // tp), max(1, lm.num_kv_heads // tp), lm.head_dim


def _elementwise(prefix: str, tokens: int, *, hidden: int, q: int, kv: int, ffn: int, mats: int,
                 tp: int, layers: int, dtype_bytes: int, rope: bool) -> list[Op]:
    """Norms and residual adds (2 per layer: read 2h, write 2h), the MLP activation (gated: read
    2 ffn, write ffn) and rotary embedding (read and write q and k), per GPU."""
    ops = [Op("elementwise", f"{prefix}.norm", (tokens * 4 * hidden * dtype_bytes,), 2 * layers),
           Op("elementwise", f"{prefix}.act", (tokens * (3 if mats > 2 else 2) * ffn // tp
                                               * dtype_bytes,), layers)]
    if rope:
        ops.append(Op("elementwise", f"{prefix}.rope", (tokens * 2 * (q + kv) // tp * dtype_bytes,), layers))
    return ops


def _equal_length(pairs: float, causal: bool) -> int:
    """The sequence length whose (causal) query-key pairs are ``pairs``."""
    if causal:
        return max(1, round((math.sqrt(8 * pairs + 1) - 1) / 2))
    return max(1, round(math.sqrt(pairs)))


def _causal_pairs(n: int, window: int) -> float:
    if not window or n <= window:
        return n * (n + 1) / 2
    return window * (window + 1) / 2 + (n - window) * window


def _lm_tail(lm: LMSpec, tokens: int, seqs: int, tp: int) -> list[Op]:
    """The LM head over the last token of each sequence and the two all-reduces per layer."""
    ops = [Op("gemm", "lm.head", (seqs, lm.vocab_size // tp, lm.hidden_size))]
    if tp > 1:
        ops.append(Op("allreduce", "lm.allreduce", (tokens * lm.hidden_size * lm.dtype_bytes, tp),
                      2 * lm.num_layers))
    return ops


def _lm_body(lm: LMSpec, m: int, tp: int) -> tuple[list[Op], list[Op]]:
    kv = lm.num_kv_heads * lm.head_dim
    ffn = round(lm.active_intermediate_size)
    shape = {"hidden": lm.hidden_size, "q": lm.q_width, "kv": kv, "ffn": ffn, "mats": lm.mlp_num_matrices,
             "tp": tp, "layers": lm.num_layers}
    return (_gemms("lm", m, **shape),
            _elementwise("lm", m, **shape, dtype_bytes=lm.dtype_bytes, rope=True))


def prefill_ops(lm: LMSpec, seq_lens: Sequence[int], *, tp: int) -> list[Op]:
    """Operators of one prefill forward over sequences of ``seq_lens`` tokens (per GPU)."""
    tokens, seqs = int(sum(seq_lens)), len(seq_lens)
    gemms, elementwise = _lm_body(lm, tokens, tp)
    heads = _heads(lm, tp)
    ops = list(gemms)
    for layers, window in ((lm.num_full_layers, 0), (lm.num_sliding_layers, lm.sliding_window_tokens)):
        if layers:
            pairs = sum(_causal_pairs(int(n), window) for n in seq_lens) / seqs
            ops.append(Op("context_attention", "lm.attention", (seqs, _equal_length(pairs, True), *heads),
                          layers))
    return ops + elementwise + _lm_tail(lm, tokens, seqs, tp)


def decode_ops(lm: LMSpec, batch_size: int, context_tokens: int, *, tp: int) -> list[Op]:
    """Operators of one decode step of ``batch_size`` sequences holding ``context_tokens`` in all."""
    gemms, elementwise = _lm_body(lm, batch_size, tp)
    return (gemms + decode_attention_ops(lm, batch_size, context_tokens, tp=tp) + elementwise
            + _lm_tail(lm, batch_size, batch_size, tp))


def decode_attention_ops(lm: LMSpec, batch_size: int, context_tokens: int, *, tp: int) -> list[Op]:
    """The part of :func:`decode_ops` that depends on the context: each sequence attends to the
    mean context (a sliding layer to at most its window)."""
    heads = _heads(lm, tp)
    per_seq = max(1, round(context_tokens / batch_size))
    ops = []
    for layers, window in ((lm.num_full_layers, 0), (lm.num_sliding_layers, lm.sliding_window_tokens)):
        if layers:
            ctx = min(per_seq, window) if window else per_seq
            ops.append(Op("generation_attention", "lm.attention", (batch_size, ctx, *heads), layers))
    return ops


def encoder_ops(spec: ModelSpec, mm_tokens_per_item: Sequence[int]) -> list[Op]:
    """Operators of one encoder forward over a batch of items on one GPU (:func:`work.encoder_work`)."""
    enc, lm = spec.encoder, spec.lm
    segments = [s for tokens in mm_tokens_per_item for s in spec.mapping.segments(int(tokens))]
    positions, lm_tokens = sum(segments), int(sum(mm_tokens_per_item))
    h, heads = enc.hidden_size, enc.num_heads
    shape = {"hidden": h, "q": h, "kv": h, "ffn": enc.intermediate_size, "mats": enc.mlp_num_matrices,
             "tp": 1, "layers": enc.num_layers}
    ops = [Op("conv", "vit.patch_embed", (2 * positions * enc.stem_params,
                                          (enc.stem_params + positions * h) * lm.dtype_bytes))]
    ops += _gemms("vit", positions, **shape)
    attention_shape = (heads, heads, h // heads)
    for layers, window in spec.mapping.attention_spans(enc.num_layers):
        if not layers:
            continue
        if window:  # windows are separate sequences of the same kernel (varlen attention)
            spans = [min(window, s - i) for s in segments for i in range(0, s, window)]
            label = "vit.window_attention"
        else:
            spans, label = segments, "vit.attention"
        length = _equal_length(sum(s * s for s in spans) / len(spans), False)
        ops.append(Op("encoder_attention", label, (len(spans), length, *attention_shape), layers))
    ops += _elementwise("vit", positions, **shape, dtype_bytes=lm.dtype_bytes, rope=False)
    projector_k = max(1, enc.projector_params // lm.hidden_size)
    ops.append(Op("gemm", "vit.projector", (lm_tokens, lm.hidden_size, projector_k)))
    return ops
