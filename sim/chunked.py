"""vLLM-style step scheduling: chunked prefill, an encoder budget, and KV preemption by recompute.

A :class:`ChunkedEngine` is a :class:`~sim.decode.DecodeWorker` whose steps
are scheduled the way vLLM's V1 scheduler schedules them (docs/simulator.md,
"Engine mechanics", gives the sources). The module stays past 300 lines
because the step scheduler, its chunk and encoder budgets and the preemption
by recompute act on one step's state and are read together against vLLM's
scheduler:

* **One token budget per step** (``[sim.scheduler] step_token_budget``,
  vLLM's ``max_num_batched_tokens``). Running sequences are scheduled first:
  every decode takes one token of it, then the prefill in progress its next
  chunk, then waiting requests in arrival order (first come, first served:
  the first that cannot be scheduled stops the rest) while the budget,
  ``max_num_decode_seqs`` and free KV allow. A request's prefill that does
  not fit is cut into chunks over several steps; decodes and chunks share
  each step, so a long prefill no longer stalls the running decodes.
* **An encoder budget per step** (``encoder_budget_tokens``, vLLM's
  ``max_num_encoder_input_tokens``; default the step budget). A request's
  multimodal items come first in its prompt; a chunk that reaches an item
  not yet encoded encodes it in the same step (the encoder runs before the
  LM forward, so the step lasts both), if the item fits the step's encoder
  budget; otherwise the chunk stops just before the item. An item larger
  than the whole budget runs alone (vLLM raises the budget to the largest
  item).
* **Paged KV that grows, with preemption by recompute.** A sequence holds
  KV for the tokens it has, not its whole future: a waiting request is
  admitted when its chunk's tokens fit, and each decode step needs one more
  token per sequence. When the running decodes' next step does not fit, the
  newest admitted sequence is preempted: its KV (and its encoder outputs)
  are freed and it goes back to the head of the queue, to prefill its input
  and every token made so far again; its TTFT stands, its later tokens wait.
  Token granularity (vLLM allocates blocks of 16 tokens).

Without prefill work the engine is a Decode worker: its decode steps run in
closed-form segments (:mod:`sim.stepsum`), cut when a request arrives or
when the KV would run out. A step with prefill chunks is one event. Which
chunks a step runs, and what its forward pass costs, are the pure rules of
:mod:`sim.step_rules`; this module keeps the engine's state and events. It
stays one class past the ~300-line guide because admission, paged KV,
preemption and the step loop all move the same counters (the running
context, the KV the prefills in progress hold, the leave heap) and are only
correct together.

It serves two roles: the aggregated (vLLM-like) instance
(:meth:`ChunkedEngine.offer`: a new request to encode, prefill and decode)
and, with ``[sim.scheduler] decode_kv = "grow"``, a disaggregated Decode
worker whose KV arrives from Prefill (:meth:`~sim.decode.DecodeWorker.deliver`)
and which recomputes a preempted sequence itself. A chunk's attention over
the tokens before it is priced as a sequence of the chunk's length (the
profile protocol prices whole sequences).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from itertools import chain
from typing import Any

from sim.clock import SimEnvironment
from sim.job import Job
from sim.local_engine import LocalEngine
from sim.recorder import Recorder
from sim.step_rules import Chunk, mixed_step_s, plan_chunks


class ChunkedEngine(LocalEngine):
    """An engine scheduled step by step as vLLM's is (see the module docstring)."""

    def __init__(self, env: SimEnvironment, index: int, gpus: tuple[int, ...], recorder: Recorder,
                 *, step_token_budget: int, encoder_budget_tokens: int | None = None,
                 stage: str = "aggregated", **engine: Any) -> None:
        """``stage``: ``decode`` for a disaggregated Decode worker (``encode_profile`` None);
        ``engine``: :class:`~sim.local_engine.LocalEngine`'s keyword arguments."""
        self.stage = stage
        self.token_budget = step_token_budget
        self.encoder_budget = step_token_budget if encoder_budget_tokens is None else encoder_budget_tokens
        self.queue: deque[Job] = deque()  # waiting for a (re)prefill: new, or preempted at its head
        self.partial: list[Job] = []  # admitted, prefill in progress, in admission order
        self.kv_partial = 0  # KV tokens the prefills in progress hold
        self._order = 0  # admissions so far: the newest is preempted first
        self._step: list[Chunk] | None = None
        self._step_n = 0
        self._step_start = 0.0
        self._step_encode_s = self._step_forward_s = 0.0
        self._step_items = (0, 0)  # (items, their tokens) the step encodes
        self._encoding = False  # with a host model: the step's encode is still draining
        self._split_s = 0.0  # with a host model: when the running step's encode ended
        self._stamp_prefill: list[Job] = []  # whose prefill starts, and whose encode ends, in
        self._stamp_encode: list[Job] = []  # the running step: stamped when it ends
        super().__init__(env, index, gpus, recorder, **engine)

    # -- intake ------------------------------------------------------------------------
    @property
    def load(self) -> int:
        return len(self.queue) + len(self.partial) + len(self._leaves)

    def offer(self, job: Job, now: float) -> None:
        """A new request from the front dispatcher: to encode, prefill and decode here."""
        job.encode_worker = job.prefill_worker = job.decode_worker = self.index
        job.route = "local"
        self.load_tokens += job.kv_tokens
        job.sched = [0, job.input_tokens, 0, 0]
        self.enqueue(self.queue, job, now, "arrive", self._queue_slot)
        if self._step is None:
            self._cut(now)

    def deliver(self, job: Job, now: float) -> None:
        job.sched = [job.input_tokens, job.input_tokens, len(job.items), 1]
        super().deliver(job, now)

    def drained(self) -> bool:
        return super().drained() and not self.queue and not self.partial

    # -- KV --------------------------------------------------------------------------------
    def _free_kv(self) -> float:
        return self.capacity - self.ctx - self.kv_partial

    def _fits(self, job: Job) -> bool:
        """A delivered request (its KV made by Prefill) may join: a seat and its tokens' KV."""
        return (not self.queue and self._seats() < self.max_num_seqs
                and job.input_tokens + 1 + len(self._leaves) + 1 <= self._free_kv())

    def _seats(self) -> int:
        return len(self._leaves) + len(self.partial)

    def _join(self, job: Job, now: float) -> None:
        made = job.sched[3]
        job.admitted = self._order
        self._order += 1
        self.reserved_tokens += job.kv_tokens
        self.ctx += job.input_tokens + made
        heapq.heappush(self._leaves, (self.steps + job.req.output_tokens - made, self._joins, job))
        self._pending_s += self.join_s
        self._joins += 1
        self.rec.log(now, "decode_join", self.index, (job,))

    def _preempt_newest(self, now: float) -> bool:
        """Free the newest admitted sequence's KV and queue it for recompute; False: none to free."""
        newest, where = -1, None
        for i, (_, _, job) in enumerate(self._leaves):
            order = job.admitted
            if order > newest:
                newest, where = order, ("run", i)
        for i, job in enumerate(self.partial):
            order = job.admitted
            if order > newest:
                newest, where = order, ("partial", i)
        if where is None:
            return False
        kind, i = where
        if kind == "run":
            leave, _, job = self._leaves[i]
            self._leaves[i] = self._leaves[-1]
            self._leaves.pop()
            heapq.heapify(self._leaves)
            state = job.sched
            state[3] = job.req.output_tokens - (leave - self.steps)  # tokens made so far
            self.ctx -= job.input_tokens + state[3]
            self.reserved_tokens -= job.kv_tokens
        else:
            job = self.partial.pop(i)
            state = job.sched
            self.kv_partial -= state[0]
        # its KV and encoder outputs are gone: prefill everything again (a Decode worker
        # has no encoder and recomputes from the LM tokens alone)
        state[0], state[1] = 0, job.input_tokens + state[3]
        state[2] = 0 if self.encode_profile is not None else len(job.items)
        self.queue.appendleft(job)
        self.rec.log(now, "preempt", self.index, (job,))
        return True

    # -- the loop ----------------------------------------------------------------------------
    def step(self, now: float) -> None:
        if self._step is not None and self._phase_end <= now:
            if self._encoding:  # with a host model: the encode is done, the forward starts
                self._encoding = False
                self._split_s = self._phase_end
                assert self.host is not None
                self._progress.begin(self._phase_end, self._step_forward_s, self.host.factor)
                self._phase_end = self._progress.end_s
            else:
                self._finish_step(self._phase_end)
        super().step(now)

    def _busy_elsewhere(self, now: float) -> bool:
        if self._step is None and (self.queue or self.partial):
            self._start_step(now)
        return self._step is not None

    def _phase_busy(self) -> bool:
        return self._step is not None

    def _plan(self, now: float) -> None:
        """A decode-only segment, preempting first when not one step of it fits the KV."""
        while self._leaves and self._free_kv() < len(self._leaves):
            self._preempt_newest(now)
        if self._leaves:
            super()._plan(now)
        elif self.queue:
            self.notify()

    def _cap_steps(self, k: int) -> int:
        if self.capacity == math.inf:
            return k
        return max(1, min(k, int(self._free_kv()) // len(self._leaves)))

    def _cut(self, now: float) -> None:
        if self._seg_end == math.inf:
            self.notify()
            return
        super()._cut(now)

    # -- one scheduled step ----------------------------------------------------------------
    def _schedule(self, now: float) -> list[Chunk]:
        """This step's prefill chunks (sim.step_rules), once the decodes' next tokens fit."""
        n = len(self._leaves)
        while n and self._free_kv() < n:  # the decodes' next tokens come first
            self._preempt_newest(now)
            n = len(self._leaves)
        return plan_chunks(chain(self.partial, self.queue), token_budget=self.token_budget - n,
                           encoder_budget=self.encoder_budget, free_kv=self._free_kv() - n,
                           seats=self._seats(), max_seqs=self.max_num_seqs)

    def _start_step(self, now: float) -> None:
        chunks = self._schedule(now)
        if not chunks:
            return
        n = len(self._leaves)
        items = [size for c in chunks for size in c.items]
        encode_s = 0.0
        if items:
            assert self.encode_profile is not None, "a Decode worker has no encoder"
            encode_s = self.encode_profile.encode_s(items, 1.0)
            if self.encode_warmup is not None and self.encode_warmup.pending():
                encode_s += self.encode_warmup.next_batch_s()
        forward_s = mixed_step_s(self.profile, [c.tokens for c in chunks], n, self.ctx)
        if self.prefill_warmup is not None and self.prefill_warmup.pending():
            forward_s += self.prefill_warmup.next_batch_s()
        forward_s += self._pending_s
        self._pending_s = 0.0
        for c in chunks:
            job, state = c.job, c.job.sched
            if state[0] == 0:  # admitted now
                self.queue.remove(job)
                self.partial.append(job)
                job.admitted = self._order
                self._order += 1
            state[0] += c.tokens
            state[2] += len(c.items)
            self.kv_partial += c.tokens
            if c.items and math.isnan(job.encode_start_s):
                job.encode_start_s = now
                job.encode_batch_size = len(items)
            if math.isnan(job.prefill_start_s):
                self._stamp_prefill.append(job)
            if state[2] == len(job.items) and math.isnan(job.encode_end_s):
                self._stamp_encode.append(job)
        if items:
            self._step_items = (len(items), sum(items))
        else:
            self._step_items = (0, 0)
        self._step, self._step_n, self._step_start = chunks, n, now
        self._step_encode_s, self._step_forward_s = encode_s, forward_s
        self.rec.log(now, "step_start", self.index, [c.job for c in chunks])
        self.rec.queue(self._queue_slot, now, len(self.queue))
        if self.host is None:
            self._phase_end = now + encode_s + forward_s
            return
        # with a host model the encode and the forward drain one after the other, so the
        # encode's end is known exactly however the host's factor moves
        self.host.set_busy(self._host_slot, now, 1)
        self._encoding = encode_s > 0
        self._progress.begin(now, encode_s if self._encoding else forward_s, self.host.factor)
        self._phase_end = self._progress.end_s

    def _finish_step(self, now: float) -> None:
        chunks, n = self._step, self._step_n
        assert chunks is not None
        self._step, self._phase_end = None, math.inf
        if self.host is not None:
            self._progress.stop()
        split = self._encode_done_s()
        if self._step_items[0]:
            self.rec.batch("encode", self.index, self._step_start, split, *self._step_items, 1.0)
        for job in self._stamp_prefill:
            job.prefill_start_s = split
        for job in self._stamp_encode:
            job.encode_end_s = split
        self._stamp_prefill.clear()
        self._stamp_encode.clear()
        tokens = sum(c.tokens for c in chunks)
        self.rec.batch("prefill", self.index, split, now, len(chunks), tokens, 1.0)
        if n:  # the running decodes made one token each
            self._seg_start, self._seg_k, self._seg_end = self._step_start, 1, now
            self._finish_segment(now)
        done: list[Job] = []
        for c in chunks:
            state = c.job.sched
            if state[0] == state[1]:
                done.append(c.job)
        for job in done:
            state = job.sched
            self.partial.remove(job)
            self.kv_partial -= state[0]
            state[3] += 1
            if math.isnan(job.first_token_s):
                job.first_token_s = now
            if state[3] >= job.req.output_tokens:
                self.load_tokens -= job.kv_tokens
                self.pipe.finish(job, now)
            else:
                self._join(job, now)
        self.rec.log(now, "step_end", self.index, [c.job for c in chunks])

    def _encode_done_s(self) -> float:
        """When the running step finished encoding (with a host model: as it drained)."""
        if self.host is None or not self._step_encode_s:
            return self._step_start + self._step_encode_s
        return self._split_s
