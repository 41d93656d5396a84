"""Per-stage capacity (requests/s) of one worker, from any latency profile.

HAS screens allocations with these numbers (DESIGN.md §4.5) and ``easerve
profile show`` prints them. Everything is generic over the
:class:`~easerve_core.profile.StageProfile` protocol:

- Encode at batch B: ``B / encode_s(B copies of the request's items)``, and
  no more than the worker's host preprocessing carries: ``threads /
  host_preprocess_s(items)`` (one thread by default, the simulator's
  ``[sim] num_preprocess_threads``; no limit for a profile without host work).
- Prefill: ``n / prefill_s(n sequences of prompt + multimodal tokens)``.
- Decode at batch b in steady state: each step advances b sequences by one
  token, a request needs ``output_tokens - 1`` steps after the first token
  (Prefill makes the first), and sequences sit on average half-way through
  their output, so ``b / ((output_tokens - 1) * decode_step_s(b, b * mean_ctx))``.
  The batch is bound by the KV cache: ``kv_capacity // tokens_per_seq``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from easerve_core import checks
from easerve_core.profile import StageProfile, host_preprocess_s
from easerve_core.request import PooledItems
from easerve_core.settings import Settings, rule


def _items(name: str, value: Any) -> tuple[int, ...]:
    items = tuple(value)
    for i, tokens in enumerate(items):
        checks.integer(f"{name}[{i}]", tokens, minimum=1)
    return items


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestShape(Settings, PooledItems):
    """Typical request sizes: text prompt, multimodal items (LM tokens each), output, and the
    items' tokens before any pooling (the encoder's work: ``Request.encode_tokens_per_item``)."""

    prompt_tokens: int = field(metadata=rule(checks.integer, minimum=0))
    output_tokens: int = field(metadata=rule(checks.integer, minimum=1))
    mm_tokens_per_item: tuple[int, ...] = field(default=(), metadata=rule(_items, store=True))
    encode_tokens_per_item: tuple[int, ...] = field(default=(), metadata=rule(_items, store=True))

    def __post_init__(self) -> None:
        self.validate()
        if self.seq_len < 1:
            raise ValueError("a request needs prompt_tokens or mm_tokens_per_item")
        self._check_encode_tokens("encode_tokens_per_item")

    @property
    def seq_len(self) -> int:
        """Tokens Prefill processes: prompt plus multimodal."""
        return self.prompt_tokens + sum(self.mm_tokens_per_item)

    @property
    def tokens_per_seq(self) -> int:
        """KV tokens a sequence holds when it finishes."""
        return self.seq_len + self.output_tokens

    @property
    def mean_decode_context(self) -> int:
        return self.seq_len + self.output_tokens // 2


def encode_rps(profile: StageProfile, shape: RequestShape, *, batch_size: int,
               sm_share: float = 1.0, preprocess_threads: int = 1) -> float:
    """Requests/s an encode worker sustains dispatching full batches of ``batch_size``,
    within what its ``preprocess_threads`` host threads preprocess."""
    batch_size = checks.integer("batch_size", batch_size, minimum=1)
    if not shape.mm_tokens_per_item:
        return math.inf
    items = list(shape.encode_items) * batch_size
    rps = batch_size / profile.encode_s(items, sm_share)
    host_s = host_preprocess_s(profile, shape.encode_items)
    if host_s > 0:
        rps = min(rps, checks.integer("preprocess_threads", preprocess_threads, minimum=1) / host_s)
    return rps


def prefill_rps(profile: StageProfile, shape: RequestShape, *, batch_size: int = 1,
                sm_share: float = 1.0) -> float:
    """Requests/s a prefill worker sustains, ``batch_size`` sequences per forward."""
    batch_size = checks.integer("batch_size", batch_size, minimum=1)
    return batch_size / profile.prefill_s([shape.seq_len] * batch_size, sm_share)


def max_decode_batch(shape: RequestShape, kv_capacity_tokens: int | None, *,
                     max_num_seqs: int) -> int:
    """Sequences that fit at once: bound by the KV cache (if known) and ``max_num_seqs``."""
    max_num_seqs = checks.integer("max_num_seqs", max_num_seqs, minimum=1)
    if kv_capacity_tokens is None:
        return max_num_seqs
    kv = checks.integer("kv_capacity_tokens", kv_capacity_tokens, minimum=0)
    return min(max_num_seqs, kv // shape.tokens_per_seq)


def decode_rps(profile: StageProfile, shape: RequestShape, *, batch_size: int) -> float:
    """Requests/s a decode worker sustains with ``batch_size`` sequences in flight (0 if none fit)."""
    batch_size = checks.integer("batch_size", batch_size, minimum=0)
    if batch_size == 0:
        return 0.0
    steps = shape.output_tokens - 1
    if steps == 0:
        return math.inf
    step_s = profile.decode_step_s(batch_size, batch_size * shape.mean_decode_context)
    return batch_size / (steps * step_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class StageCapacity:
    """Requests/s per stage for one worker of each stage."""

    encode_rps: float
    prefill_rps: float
    decode_rps: float
    encode_batch: int
    decode_batch: int

    @property
    def bottleneck(self) -> str:
        rates = {"encode": self.encode_rps, "prefill": self.prefill_rps, "decode": self.decode_rps}
        return min(rates, key=lambda k: rates[k])

    @property
    def min_rps(self) -> float:
        return min(self.encode_rps, self.prefill_rps, self.decode_rps)


def stage_capacity(
    *,
    encode: StageProfile,
    prefill: StageProfile,
    decode: StageProfile,
    shape: RequestShape,
    encode_batch: int,
    decode_kv_capacity_tokens: int | None,
    max_num_seqs: int = 256,
) -> StageCapacity:
    """Capacities of one encode, one prefill and one decode worker (each its own profile/TP)."""
    decode_batch = max_decode_batch(shape, decode_kv_capacity_tokens, max_num_seqs=max_num_seqs)
    return StageCapacity(
        encode_rps=encode_rps(encode, shape, batch_size=encode_batch),
        prefill_rps=prefill_rps(prefill, shape),
        decode_rps=decode_rps(decode, shape, batch_size=decode_batch),
        encode_batch=encode_batch,
        decode_batch=decode_batch,
    )


def pool_rps(per_worker_rps: float, num_workers: int) -> float:
    """Capacity of ``num_workers`` identical workers behind one queue."""
    return checks.integer("num_workers", num_workers, minimum=0) * per_worker_rps

