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

With a :class:`~sim.host.HostCPU` (opt-in) a running segment is one busy
thread on the host: its steps are exclusive seconds of work that drain at the
host's factor, so its end moves whenever the factor does. With
``join_s`` (``[sim.host] decode_join_s``, 0 by default) every request that joins
adds that much work at the head of the next segment (a real engine grows its
batch's cache between steps, on the loop every running request waits for),
``join_more_s`` (``[sim.host] decode_join_more_s``) more for every join beyond the
first at one boundary,
and with ``leave_s`` (``[sim.host] decode_leave_s``) every request that leaves
adds that much to the next segment of those that stay (a batch that runs
empty drops it: the worker is idle).
With a :class:`~sim.stalls.Stall` (opt-in) the worker's one-off pause is work
at the head of the segment that starts at its step ``at``: a segment that
would run past that step ends there (one extra segment per worker and run).
With a :class:`~sim.warmup.Warmup` (opt-in) the worker's first steps carry the
fresh process's warm-up: while it lasts a segment is one step long and its
step's warm-up is work at its head (a few extra segments per worker and run).

A leaving worker can be told to :meth:`~DecodeWorker.evict` what it holds
(the roster's ``drain_deadline_s``, docs/controller.md): at the end of the
step in progress it hands every running sequence (with the tokens it made so
far, :attr:`Job.decoded`) and every waiting one to a callback, and so on
for anything that reaches it later. A job with ``resume_s`` joins another
worker with that much recompute at the head of the next segment (vLLM's
preemption by recompute: the prompt and the tokens made so far prefilled
again) and decodes only the tokens it still owes.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable

from sim.clock import SimEnvironment
from sim.host import HostCPU, Progress
from sim.job import Job
from sim.pipeline import Pipeline
from sim.recorder import Recorder
from sim.stalls import Stall
from sim.stepsum import StepClock
from sim.warmup import Warmup
from sim.worker import Worker


class DecodeWorker(Worker):
    """One decode worker (see the module docstring)."""

    stage = "decode"

    def __init__(self, env: SimEnvironment, index: int, gpus: tuple[int, ...], recorder: Recorder,
                 *, pipe: Pipeline, clock: StepClock, kv_capacity_tokens: int | None,
                 max_num_seqs: int, host: HostCPU | None = None, join_s: float = 0.0,
                 leave_s: float = 0.0, join_more_s: float = 0.0, stall: Stall | None = None,
                 warmup: Warmup | None = None) -> None:
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
        self._phase_end = math.inf  # end of an aggregated engine's non-decode phase; inf: none
        self.host = host
        self.join_s = join_s
        self.leave_s = leave_s
        self.join_more_s = join_more_s
        self._pending_s = 0.0  # join and leave work waiting for the next segment
        self._seg_extra = 0.0  # join work at the head of the running segment
        self._stall_at = -1 if stall is None else stall.at  # step the pause precedes; -1: none pending
        self._stall_s = 0.0 if stall is None else stall.stall_s
        self.warmup = warmup
        self._progress = Progress()
        self._host_slot = -1 if host is None else host.join(self._on_host)
        self._queue_slot = recorder.queue_slot(self.stage, index)
        self._evict_to: Callable[[DecodeWorker, list[Job], float], None] | None = None
        super().__init__(env, index, gpus, recorder)

    def _on_host(self, now: float, factor: float) -> None:
        """The host's speed changed: rescale the running phase, or else the decode segment."""
        if self._phase_busy():
            self._progress.rate(now, factor)
            self._phase_end = self._progress.end_s
            self.notify()
        elif self._seg_end != math.inf:
            self._progress.rate(now, factor)
            self._seg_end = self._progress.end_s
            self.notify()

    def deliver(self, job: Job, now: float) -> None:
        self.enqueue(self.waiting, job, now, "decode_arrive", self._queue_slot)
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
        extra = self._seg_extra
        if self.host is not None:
            progress = self._progress
            elapsed = max(0.0, progress.done_s(now) - extra)
            boundary = self.clock.steps_to_reach(n, self.ctx, k, elapsed)
            if boundary < k:
                self._seg_k = boundary
                progress.resize(now, self.clock.span_s(n, self.ctx, boundary) + extra)
                self._seg_end = progress.end_s
                self.notify()
            return
        boundary = self.clock.steps_to_reach(n, self.ctx, k, max(0.0, now - self._seg_start - extra))
        if boundary < k:
            self._seg_k = boundary
            self._seg_end = self._seg_start + self.clock.span_s(n, self.ctx, boundary)
            if extra:
                self._seg_end += extra
            self.notify()

    def _join(self, job: Job, now: float) -> None:
        self.reserved_tokens += job.kv_tokens
        decoded = job.decoded  # 0 unless the job was evicted from another worker (evict)
        self.ctx += job.input_tokens + 1 + decoded
        heapq.heappush(self._leaves, (self.steps + job.req.output_tokens - 1 - decoded, self._joins, job))
        self._pending_s += self.join_s + job.resume_s
        self._joins += 1
        self.rec.log(now, "decode_join", self.index, (job,))

    def mark(self) -> int:
        """A mark of what the worker holds now (running or waiting): see :meth:`holds_before`."""
        return self._joins + len(self.waiting)

    def holds_before(self, mark: int) -> bool:
        """Whether a sequence it held at ``mark`` (:meth:`mark`) is still here: sequences join in
        FIFO order, numbered, so one still waits or runs with a number below the mark."""
        return self._joins < mark or any(order < mark for _, order, _ in self._leaves)

    def _admit(self, now: float) -> None:
        waiting = self.waiting
        joined = 0
        while waiting and self._fits(waiting[0]):
            self._join(waiting.popleft(), now)
            joined += 1
        if joined:
            self._pending_s += (joined - 1) * self.join_more_s
            self.rec.queue(self._queue_slot, now, len(waiting))

    # -- the loop ------------------------------------------------------------------------
    def step(self, now: float) -> None:
        if self._seg_end <= now:
            self._finish_segment(self._seg_end)
        if self._evict_to is not None and self._seg_end == math.inf:
            self._hand_off(now)
        if self._seg_end == math.inf and not self._busy_elsewhere(now):
            self._admit(now)
            if self._leaves:
                self._plan(now)
        if self.host is not None and self._seg_end == math.inf and not self._phase_busy():
            self.host.set_busy(self._host_slot, now, 0)
        self.show_busy(now, 1.0 if self._seg_end != math.inf or self._phase_busy() else 0.0)

    def next_due(self) -> float:
        return self._seg_end  # a disaggregated decoder has no other phase (the hot path: no min())

    def drained(self) -> bool:
        return not self.waiting and not self._leaves and self.load_tokens == 0

    # -- eviction (a leaving worker hands on what it holds) ---------------------------------
    def evict(self, now: float, to: Callable[[DecodeWorker, list[Job], float], None]) -> None:
        """From the end of the step in progress on, hand every sequence this worker holds or is
        given to ``to(worker, jobs, now)``: the running ones in join order, each with
        :attr:`Job.decoded` its tokens made so far, then the waiting ones."""
        self._evict_to = to
        self._cut(now)

    def _hand_off(self, now: float) -> None:
        running = sorted(self._leaves, key=lambda leave: leave[1])
        jobs = []
        for leave_step, _, job in running:
            job.decoded = job.req.output_tokens - 1 - (leave_step - self.steps)
            jobs.append(job)
        jobs += self.waiting
        if not jobs:
            return
        self._leaves, self.ctx, self.reserved_tokens = [], 0, 0
        self.waiting.clear()
        self._pending_s = 0.0
        for job in jobs:
            self.load_tokens -= job.kv_tokens
        self.rec.log(now, "decode_evict", self.index, tuple(jobs))
        self.rec.queue(self._queue_slot, now, 0)
        assert self._evict_to is not None
        self._evict_to(self, jobs, now)

    def _plan(self, now: float) -> None:
        n = len(self._leaves)
        k = self._cap_steps(self._leaves[0][0] - self.steps)
        self._seg_start = now
        extra, self._pending_s = self._pending_s, 0.0
        if self._stall_at >= 0:
            k, extra = self._with_stall(k, extra)
        if self.warmup is not None and self.warmup.pending():
            k, extra = 1, extra + self.warmup.next_batch_s()
        self._seg_k = k
        self._seg_extra = extra
        if self.host is None:
            self._seg_end = now + self.clock.span_s(n, self.ctx, k)
            if extra:
                self._seg_end += extra
            return
        self.host.set_busy(self._host_slot, now, 1)
        self._progress.begin(now, self.clock.span_s(n, self.ctx, k) + extra, self.host.factor)
        self._seg_end = self._progress.end_s

    def _with_stall(self, k: int, extra: float) -> tuple[int, float]:
        """(steps, head work) of the segment about to start, given the pending pause."""
        ahead = self._stall_at - self.steps
        if ahead <= 0:
            self._stall_at = -1
            return k, extra + self._stall_s
        return min(k, ahead), extra

    def _finish_segment(self, now: float) -> None:
        n, k = len(self._leaves), self._seg_k
        self.rec.batch("decode", self.index, self._seg_start, now, n, n * k, 1.0)
        self.steps += k
        self.ctx += n * k
        self._seg_end = math.inf
        self._progress.stop()
        leaves, gone = self._leaves, 0
        while leaves and leaves[0][0] <= self.steps:
            _, _, job = heapq.heappop(leaves)
            self.ctx -= job.input_tokens + job.req.output_tokens
            self.reserved_tokens -= job.kv_tokens
            self.load_tokens -= job.kv_tokens
            self.rec.log(now, "decode_leave", self.index, (job,))
            self.pipe.finish(job, now)
            gone += 1
        if leaves:
            self._pending_s += gone * self.leave_s

    # -- hooks for the aggregated engines --------------------------------------------------
    def _cap_steps(self, k: int) -> int:
        """The steps the next segment may run, given the ``k`` to the next leave (paged KV)."""
        return k

    def _busy_elsewhere(self, now: float) -> bool:
        """Whether a non-decode phase holds the worker (aggregated engines)."""
        return False

    def _phase_busy(self) -> bool:
        return False
