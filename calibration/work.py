"""FLOPs and bytes of each stage, counted kernel by kernel from a model spec.

The analytic profile turns these counts into seconds. A stage is a list of
:class:`Kernel` (FLOPs, whether it is attention, how many layers repeat it)
plus the bytes it must stream from memory. Counting per kernel matters because
a small kernel cannot fill the GPU (see ``fill`` in :mod:`calibration.analytic`),
so one big sum of FLOPs would hide exactly the effect SM sharing exploits.

A mixture-of-experts LM computes through its active experts (the layer-averaged
MLP width :attr:`LMSpec.active_intermediate_size`) and a decode step reads the
experts its tokens route to (:meth:`LMSpec.experts_touched`, uniform routing);
expert parallelism is not modelled: TP splits experts like a dense MLP.

Tensor parallelism splits every LM matrix over ``tp`` GPUs (column-parallel
QKV and up/gate, row-parallel output and down projections); the counts here are
per GPU. Encoders are not split: an encode worker of ``tp`` GPUs runs one
encoder replica per GPU and deals the items of a batch out round-robin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from calibration.specs import EncoderSpec, LMSpec, ModelSpec


class Kernel(NamedTuple):
    """``flops`` of one launch, repeated ``count`` times (once per layer).

    A named tuple, not a frozen dataclass: the analytic profile builds several
    per stage latency it computes, and a tuple is made in a third of the time.
    """

    flops: float
    count: int = 1
    attention: bool = False


@dataclass(frozen=True, slots=True)
class StageWork:
    kernels: tuple[Kernel, ...]
    bytes_read: float
    num_layers: int
    allreduce_bytes: float = 0.0  # bytes of each of the 2 per-layer all-reduces (TP > 1)

    @property
    def flops(self) -> float:
        return sum(k.flops * k.count for k in self.kernels)


def _layer_gemms(m: float, *, hidden: int, q: int, kv: int, ffn: float, mats: int, tp: int) -> list[float]:
    """FLOPs of the four GEMMs of one transformer layer over ``m`` tokens (per GPU)."""
    return [
        2.0 * m * hidden * (q + 2 * kv) / tp,  # QKV (column-parallel)
        2.0 * m * q * hidden / tp,  # attention output (row-parallel)
        2.0 * m * hidden * ffn * (mats - 1) / tp,  # up (+ gate)
        2.0 * m * ffn * hidden / tp,  # down (row-parallel)
    ]


def length_factor(length: float, half_len: float) -> float:
    """1 / (the share of attention's top efficiency reached at sequence ``length``).

    Attention of a sequence of L tokens runs at ``eff_max * L / (L + half_len)``
    (:attr:`Efficiency.attention_half_len_tokens`): the same time as ``(L + half_len) / L``
    times its FLOPs at ``eff_max``. 1 when ``half_len`` is 0.
    """
    return (length + half_len) / length if half_len and length > 0 else 1.0


def encoder_work(spec: ModelSpec, mm_tokens_per_item: Sequence[int], *,
                 attention_half_len: float = 0.0) -> StageWork:
    """Work of one encoder forward over a batch of items (one GPU).

    With ``attention_half_len`` the attention kernels count the FLOPs that price their
    length-dependent efficiency (:func:`length_factor`) instead of their own.
    """
    enc: EncoderSpec = spec.encoder
    segments = [s for tokens in mm_tokens_per_item for s in spec.mapping.segments(int(tokens))]
    positions = float(sum(segments))
    lm_tokens = float(sum(mm_tokens_per_item))
    gemms = _layer_gemms(positions, hidden=enc.hidden_size, q=enc.hidden_size, kv=enc.hidden_size,
                         ffn=enc.intermediate_size, mats=enc.mlp_num_matrices, tp=1)
    kernels = [Kernel(f, enc.num_layers) for f in gemms]
    for layers, window in spec.mapping.attention_spans(enc.num_layers):
        if layers:
            if attention_half_len:
                attn = sum(4.0 * s * (span := min(s, window) if window else s) * enc.hidden_size
                           * length_factor(span, attention_half_len) for s in segments)
            else:
                attn = sum(4.0 * s * (min(s, window) if window else s) * enc.hidden_size for s in segments)
            kernels.append(Kernel(attn, layers, attention=True))
    kernels.append(Kernel(2.0 * lm_tokens * enc.projector_params))
    weight_bytes = enc.params * spec.lm.dtype_bytes
    return StageWork(tuple(kernels), bytes_read=weight_bytes, num_layers=enc.num_layers)


def _attended(lm: LMSpec, n: float, *, causal_prefix: bool) -> float:
    """Query-key pairs per head summed over layers for a sequence of ``n`` new tokens."""
    if causal_prefix:
        full = n * (n + 1) / 2
        w = lm.sliding_window_tokens
        sliding = full if n <= w else w * (w + 1) / 2 + (n - w) * w
    else:  # one decode token attending to a context of n
        full, sliding = n, min(n, lm.sliding_window_tokens)
    return lm.num_full_layers * full + lm.num_sliding_layers * sliding


def prefill_work(lm: LMSpec, seq_lens: Sequence[int], *, tp: int,
                 attention_half_len: float = 0.0) -> StageWork:
    """Work of one prefill forward over sequences of ``seq_lens`` tokens (per GPU).

    With ``attention_half_len`` the attention kernel counts the FLOPs that price its
    length-dependent efficiency (:func:`length_factor`, L each sequence's length).
    """
    tokens = float(sum(seq_lens))
    gemms = _layer_gemms(tokens, hidden=lm.hidden_size, q=lm.q_width,
                         kv=lm.num_kv_heads * lm.head_dim, ffn=lm.active_intermediate_size,
                         mats=lm.mlp_num_matrices, tp=tp)
    kernels = [Kernel(f, lm.num_layers) for f in gemms]
    if attention_half_len:
        pairs = sum(_attended(lm, float(n), causal_prefix=True) * length_factor(n, attention_half_len)
                    for n in seq_lens)
    else:
        pairs = sum(_attended(lm, float(n), causal_prefix=True) for n in seq_lens)
    kernels.append(Kernel(4.0 * pairs * lm.q_width / tp, 1, attention=True))
    kernels.append(Kernel(2.0 * len(seq_lens) * lm.hidden_size * lm.vocab_size / tp))  # LM head
    return StageWork(tuple(kernels), bytes_read=lm.weight_bytes / tp, num_layers=lm.num_layers,
                     allreduce_bytes=tokens * lm.hidden_size * lm.dtype_bytes)


@dataclass(frozen=True, slots=True)
class DecodeShape:
    """What a decode step of ``batch_size`` sequences costs whatever their context.

    The kernels before and after the attention kernel (the layer GEMMs, the LM
    head), the weight bytes read once per step (before the split over ``tp``)
    and the all-reduce size; :func:`decode_attention` adds the rest.
    """

    before: tuple[Kernel, ...]
    after: tuple[Kernel, ...]
    weight_bytes: float
    num_layers: int
    allreduce_bytes: float


def decode_shape(lm: LMSpec, batch_size: int, *, tp: int) -> DecodeShape:
    """The context-free part of :func:`decode_work` (see :class:`DecodeShape`)."""
    b = float(batch_size)
    gemms = _layer_gemms(b, hidden=lm.hidden_size, q=lm.q_width, kv=lm.num_kv_heads * lm.head_dim,
                         ffn=lm.active_intermediate_size, mats=lm.mlp_num_matrices, tp=tp)
    # Weights once per step (the input embedding is a lookup, so a tied table is read once); an
    # MoE layer reads only the experts the batch's tokens route to.
    read_params = lm.layers_params(lm.experts_touched(b)) + lm.vocab_size * lm.hidden_size
    return DecodeShape(before=tuple(Kernel(f, lm.num_layers) for f in gemms),
                       after=(Kernel(2.0 * b * lm.hidden_size * lm.vocab_size / tp),),
                       weight_bytes=read_params * lm.dtype_bytes, num_layers=lm.num_layers,
                       allreduce_bytes=b * lm.hidden_size * lm.dtype_bytes)


def decode_attention(lm: LMSpec, batch_size: int, context_tokens: int, *, tp: int) -> tuple[float, float]:
    """(FLOPs of the attention kernel, KV bytes read before the split over ``tp``) of one decode
    step: the part of :func:`decode_work` that depends on the context."""
    b = float(batch_size)
    pairs = b * _attended(lm, context_tokens / b, causal_prefix=False)
    return 4.0 * pairs * lm.q_width / tp, pairs * lm.kv_bytes_per_token_layer


def decode_work(lm: LMSpec, batch_size: int, context_tokens: int, *, tp: int) -> StageWork:
    """Work of one decode step: ``batch_size`` sequences holding ``context_tokens`` in all.

    The weights are read once per step, plus every cached K and V row the batch attends to.
    """
    shape = decode_shape(lm, batch_size, tp=tp)
    attention_flops, kv_read = decode_attention(lm, batch_size, context_tokens, tp=tp)
    kernels = (*shape.before, Kernel(attention_flops, 1, attention=True), *shape.after)
    return StageWork(kernels, bytes_read=(shape.weight_bytes + kv_read) / tp,
                     num_layers=shape.num_layers, allreduce_bytes=shape.allreduce_bytes)
