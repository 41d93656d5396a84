"""Decode workers: continuous batching limited by KV capacity, one event per change.

A :class:`DecodeWorker` admits waiting requests (KV cache arrived) in FIFO
order while the batch holds fewer than ``max_num_decode_seqs`` sequences and
the KV reservation fits ``kv_capacity_tokens`` (None: unbounded). A request
reserves KV for its whole sequence, input plus output tokens, on admission,
so nothing is ever preempted; the head of the queue blocks those behind it.

The batch then runs to its next change in a single timeout: the earliest
leave, with the step latencies summed by :class:`~sim.stepsum.StepClock`.
A request that arrives mid-segment and can be admitted cuts the segment at
the end of the step in progress (joins happen at step boundaries). Leaves at
one boundary finish in join order. Each sequence's first decode step sees
its input tokens plus the first token (made by Prefill) as context, and
Decode makes ``output_tokens - 1`` tokens.

Instead of one counter per sequence, the worker counts its own steps; a
sequence leaves at the step number ``joined + output_tokens - 1``, kept in a
heap, so a change costs O(log n) however large the batch.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import simpy

from sim.pipeline import Job, Pipeline
from sim.recorder import Recorder
from sim.stepsum import StepClock
from sim.worker import Worker


class DecodeWorker(Worker):
    """One decode worker (see the module docstring)."""

    stage = "decode"

    def __init__(self, env: simpy.Environment, index: int, gpus: tuple[int, ...], recorder: Recorder,
                 *, pipe: Pipeline, clock: StepClock, kv_capacity_tokens: int | None,
                 max_num_seqs: int) -> None:
        self.pipe = pipe
        self.clock = clock
        self.capacity = math.inf if kv_capacity_tokens is None else kv_capacity_tokens
        self.max_num_seqs = max_num_seqs
        self.waiting: deque[Job] = deque()
        self.load_tokens = 0
        self.reserved_tokens = 0
        self.steps = 0  # decode steps run so far
        self.ctx = 0  # summed context of the running sequences
        self._leaves: list[tuple[int, int, Job]] = []  # (leave step, join order, job)
        self._joins = 0
        self._seg_start = 0.0
        self._seg_k = 0
        self._seg_end = math.inf
        super().__init__(env, index, gpus, recorder)

    @property
    def num_running(self) -> int:
        return len(self._leaves)

    def deliver(self, job: Job, now: float) -> None:
        self.waiting.append(job)
        self.rec.log(now, "decode_arrive", self.index, (job.req.request_id,))
        self.rec.queue(self.stage, self.index, now, len(self.waiting))
        if len(self.waiting) == 1 and self._fits(job):
            self._cut(now)

    # -- admission -----------------------------------------------------------------------
    def _fits(self, job: Job) -> bool:
        return (len(self._leaves) < self.max_num_seqs
                and self.reserved_tokens + job.kv_tokens <= self.capacity)

    def _cut(self, now: float) -> None:
        """Someone can join: end the running segment at the next step boundary."""
        if self._seg_end == math.inf:
            self.notify()
            return
        n, k = len(self._leaves), self._seg_k
        boundary = self.clock.steps_to_reach(n, self.ctx, k, now - self._seg_start)
        if boundary < k:
            self._seg_k = boundary
            self._seg_end = self._seg_start + self.clock.span_s(n, self.ctx, boundary)
            self.notify()

    def _join(self, job: Job, now: float) -> None:
        self.reserved_tokens += job.kv_tokens
        self.ctx += job.input_tokens + 1
        heapq.heappush(self._leaves, (self.steps + job.req.output_tokens - 1, self._joins, job))
        self._joins += 1
        self.rec.log(now, "decode_join", self.index, (job.req.request_id,))

    def _admit(self, now: float) -> None:
        waiting = self.waiting
        joined = False
        while waiting and self._fits(waiting[0]):
            self._join(waiting.popleft(), now)
            joined = True
        if joined:
            self.rec.queue(self.stage, self.index, now, len(waiting))

    # -- the loop ------------------------------------------------------------------------
    def step(self, now: float) -> None:
        if self._seg_end <= now:
            self._finish_segment(self._seg_end)
        if self._seg_end == math.inf and not self._busy_elsewhere(now):
            self._admit(now)
            if self._leaves:
                self._plan(now)
        self.rec.busy(self.gpus, now, 1.0 if self._seg_end != math.inf or self._phase_busy() else 0.0)

    def next_due(self) -> float:
        return self._seg_end

    def _plan(self, now: float) -> None:
        n = len(self._leaves)
        k = self._leaves[0][0] - self.steps
        self._seg_start = now
        self._seg_k = k
        self._seg_end = now + self.clock.span_s(n, self.ctx, k)

    def _finish_segment(self, now: float) -> None:
        n, k = len(self._leaves), self._seg_k
        self.rec.batch("decode", self.index, self._seg_start, now, n, n * k, 1.0)
        self.steps += k
        self.ctx += n * k
        self._seg_end = math.inf
        leaves = self._leaves
        while leaves and leaves[0][0] <= self.steps:
            _, _, job = heapq.heappop(leaves)
            self.ctx -= job.input_tokens + job.req.output_tokens
            self.reserved_tokens -= job.kv_tokens
            self.load_tokens -= job.kv_tokens
            self.rec.log(now, "decode_leave", self.index, (job.req.request_id,))
            self.pipe.finish(job, now)

    # -- hooks for the aggregated engine ---------------------------------------------------
    def _busy_elsewhere(self, now: float) -> bool:
        """Whether a non-decode phase holds the worker (aggregated engines)."""
        return False

    def _phase_busy(self) -> bool:
        return False
