"""What the analytic and the measured profiles share: input checks, bounded memos, memory fits.

Both compute a stage's latency from its inputs (item sizes, sequence
lengths, a decode batch) and remember the answer: the simulator asks the
same questions again and again. A memo starts over once it holds
:data:`MEMO_MAX` entries, so memory stays bounded on long runs.
:class:`DecodeMemo` gives a stage profile its checked, remembered ``decode_step_s``.
:class:`SpecMemory` gives a profile with ``model``, ``gpu`` and ``budget``
fields its memory answers (:mod:`calibration.memory`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from calibration import memory
from calibration.specs import GPUSpec, ModelSpec

#: latencies remembered per TP profile and stage before that stage's memo starts over
MEMO_MAX = 1 << 17


def validate_items(name: str, values: Sequence[int]) -> list[int]:
    """``values`` as a list of integers >= 1, at least one; else a ValueError naming ``name[i]``."""
    out = list(values)
    if not out:
        raise ValueError(f"{name} must hold at least one entry")
    for i, v in enumerate(out):
        # plain ints pass the first test alone
        if (type(v) is not int or v < 1) and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{name}[{i}] must be an integer >= 1, got {v!r}")
    return out


def check_decode_args(batch_size: int, context_tokens: int) -> None:
    """Refuse a decode batch below 1 or a context below 0, naming the argument."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if isinstance(context_tokens, bool) or not isinstance(context_tokens, int) or context_tokens < 0:
        raise ValueError(f"context_tokens must be an integer >= 0, got {context_tokens!r}")


def check_tp(tp: int) -> int:
    """``tp`` if it is an integer >= 1, else a ValueError."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tp must be an integer >= 1, got {tp!r}")
    return tp


def make_room(memo: dict[Any, Any]) -> None:
    """Start a memo over once it holds :data:`MEMO_MAX` entries (bounded memory)."""
    if len(memo) >= MEMO_MAX:
        memo.clear()


def remembered(memo: dict[Any, float], key: Any, compute: Callable[..., float], *args: Any) -> float:
    """``memo[key]``, computed by ``compute(*args)`` the first time (see :func:`make_room`)."""
    seconds = memo.get(key)
    if seconds is None:
        make_room(memo)
        seconds = memo[key] = compute(*args)
    return seconds


class DecodeMemo:
    """``decode_step_s`` for a stage profile that computes one step in ``_decode_step_s``.

    A simulated decode worker asks millions of times, so plain ints pass the argument check
    in its first test alone, and the memo is two-level (batch size -> context -> seconds: no
    key tuple per step). It starts over once it holds :data:`MEMO_MAX` steps in all; the
    profile's ``__init__`` starts it with :meth:`_forget_decode_steps`.
    """

    __slots__ = ()
    _decode_memo: dict[int, dict[int, float]]
    _decode_memo_size: int

    def _forget_decode_steps(self) -> None:
        self._decode_memo = {}
        self._decode_memo_size = 0

    def _decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        """One decode step's seconds, computed (the memo's miss)."""
        raise NotImplementedError

    def decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        if type(batch_size) is not int or type(context_tokens) is not int or batch_size < 1 \
                or context_tokens < 0:
            check_decode_args(batch_size, context_tokens)
        by_context = self._decode_memo.get(batch_size)
        if by_context is None:
            by_context = self._decode_memo[batch_size] = {}
        seconds = by_context.get(context_tokens)
        if seconds is None:
            if self._decode_memo_size >= MEMO_MAX:
                self._forget_decode_steps()
                self._decode_memo[batch_size] = by_context = {}
            seconds = by_context[context_tokens] = self._decode_step_s(batch_size, context_tokens)
            self._decode_memo_size += 1
        return seconds


class SpecMemory:
    """``lm_fits`` and ``kv_capacity_tokens`` for a profile dataclass with these three fields."""

    __slots__ = ()
    model: ModelSpec
    gpu: GPUSpec
    budget: memory.MemoryBudget

    def lm_fits(self, tp: int) -> bool:
        return memory.lm_fits(self.model, self.gpu, self.budget, tp)

    def kv_capacity_tokens(self, tp: int, *, with_encoder: bool = False) -> int:
        return memory.kv_capacity_tokens(self.model, self.gpu, self.budget, tp, with_encoder=with_encoder)
