"""The rules that pick one step's prefill chunks in a step-scheduled engine (sim.chunked).

Pure functions of the engine's state, so the rules read in one place and the
engine keeps the events: :func:`plan_chunks` takes the requests in vLLM's
order (the prefill in progress, then the waiting queue) and the step's
budgets, and returns the chunks the step runs; :func:`encoder_cut` applies the
encoder budget to one chunk; :func:`mixed_step_s` prices the step's forward
pass. docs/simulator.md, "Engine mechanics", gives each rule's vLLM source.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from easerve_core import StageProfile
from sim.job import Job


def mixed_step_s(profile: StageProfile, chunks: Sequence[int], batch_size: int, context_tokens: int) -> float:
    """One forward pass of prefill ``chunks`` beside ``batch_size`` decodes of summed ``context_tokens``.

    The profile's own ``mixed_step_s`` when it has one (the analytic roofline: one weight
    read for the whole step), else a prefill of the chunks plus one decode step.
    """
    fn = getattr(profile, "mixed_step_s", None)
    if fn is not None:
        return float(fn(chunks, batch_size, context_tokens))
    seconds = profile.prefill_s(list(chunks), 1.0) if chunks else 0.0
    if batch_size:
        seconds += profile.decode_step_s(batch_size, context_tokens)
    return seconds


class Chunk:
    """One request's share of a step: its tokens, and the items it encodes."""

    __slots__ = ("items", "job", "tokens")

    def __init__(self, job: Job, tokens: int, items: list[int]) -> None:
        self.job, self.tokens, self.items = job, tokens, items


def plan_chunks(jobs: Iterable[Job], *, token_budget: int, encoder_budget: int, free_kv: float,
                seats: int, max_seqs: int) -> list[Chunk]:
    """The chunks of one step, in order, until the first request that cannot be scheduled.

    ``token_budget`` and ``free_kv`` are what the step's decodes left; ``seats`` the
    sequences already admitted. A request not yet admitted needs a seat; a chunk's KV is
    allocated whole or the request waits (``job.sched``: [computed, to compute, items
    encoded, tokens made]).
    """
    chunks: list[Chunk] = []
    enc_budget = encoder_budget
    for job in jobs:
        if token_budget <= 0 or free_kv <= 0:
            break
        state = job.sched
        new = state[0] == 0
        if new and seats >= max_seqs:
            break
        tokens = min(state[1] - state[0], token_budget)
        tokens, items, enc_budget = encoder_cut(job, tokens, enc_budget, full_budget=encoder_budget)
        if tokens <= 0 or tokens > free_kv:
            break
        chunks.append(Chunk(job, tokens, items))
        token_budget -= tokens
        free_kv -= tokens
        if new:
            seats += 1
    return chunks


def encoder_cut(job: Job, tokens: int, enc_budget: int, *, full_budget: int) -> tuple[int, list[int], int]:
    """``job``'s next chunk of ``tokens`` after the encoder budget: its length, the items it
    encodes, the budget left.

    The items come first in the prompt; a chunk that reaches an item not yet encoded
    encodes it if it fits ``enc_budget``, else stops before it. An item larger than the
    whole ``full_budget`` runs in a step that encodes nothing else.
    """
    computed, encoded = job.sched[0], job.sched[2]
    items: list[int] = []
    start = sum(job.items[:encoded])
    for size in job.items[encoded:]:
        if start >= computed + tokens:
            break
        if size > enc_budget and not (size > full_budget and enc_budget == full_budget):
            return max(0, start - computed), items, enc_budget
        enc_budget = max(0, enc_budget - size)
        items.append(size)
        start += size
    return tokens, items, enc_budget
