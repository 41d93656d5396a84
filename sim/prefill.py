"""Remote Prefill workers: batch waiting prefills under a token budget, FIFO.

A :class:`PrefillWorker` holds a queue of requests whose embeddings have
arrived. When idle it takes a batch from the head of the queue while the
summed input tokens stay within ``SimOptions.prefill_max_batch_tokens`` (a
longer request runs alone), runs it on the whole worker, stamps the first
token of every request in the batch at its end and hands each, in batch
order, to Decode. With a :class:`~sim.host.HostCPU` (opt-in) the batch is
one busy thread on the host and its end moves with the host's factor.
With ``chunk_tokens`` (``[sim.scheduler] prefill_chunked``: vLLM's chunked
prefill, docs/simulator.md) a batch holds exactly that many tokens when the
queue has them: the request at the budget's edge contributes the chunk that
fits and stays at the head of the queue for the rest; a request goes on to
Decode when its last chunk's batch ends. With a
:class:`~sim.stalls.Stall` (opt-in) one batch carries the worker's one-off pause,
and with a :class:`~sim.warmup.Warmup` (opt-in) its first batches the warm-up.
"""

from __future__ import annotations

import math
from collections import deque

from easerve_core import StageProfile
from sim.clock import SimEnvironment
from sim.host import HostCPU, Progress
from sim.job import _UNSCHEDULED as _FRESH
from sim.job import Job
from sim.pipeline import Pipeline, take_batch
from sim.recorder import Recorder
from sim.stalls import Stall
from sim.warmup import Warmup
from sim.worker import Worker


class PrefillWorker(Worker):
    """One remote Prefill worker (see the module docstring)."""

    stage = "prefill"

    def __init__(self, env: SimEnvironment, index: int, gpus: tuple[int, ...], recorder: Recorder,
                 *, pipe: Pipeline, profile: StageProfile, prefill_max_batch_tokens: int,
                 host: HostCPU | None = None, stall: Stall | None = None,
                 warmup: Warmup | None = None, chunk_tokens: int | None = None) -> None:
        self.pipe = pipe
        self.chunk_tokens = chunk_tokens
        self._chunks: list[int] = []  # tokens of each batch member in the batch running
        self.profile = profile
        self.budget_tokens = prefill_max_batch_tokens
        self.queue: deque[Job] = deque()
        self.load_tokens = 0
        self._batch: list[Job] | None = None
        self._start_s = 0.0
        self._end_s = math.inf
        self.host = host
        self.stall = stall
        self.warmup = warmup
        self._progress = Progress()
        self._host_slot = -1 if host is None else host.join(self._on_host)
        self._queue_slot = recorder.queue_slot("prefill", index)
        super().__init__(env, index, gpus, recorder)

    def _on_host(self, now: float, factor: float) -> None:
        if self._batch is not None:
            self._progress.rate(now, factor)
            self._end_s = self._progress.end_s
            self.notify()

    def deliver(self, job: Job, now: float) -> None:
        self.enqueue(self.queue, job, now, "prefill_arrive", self._queue_slot)
        if self._batch is None:
            self.notify()

    def step(self, now: float) -> None:
        if self._batch is not None and self._end_s <= now:
            self._finish(self._end_s)
        if self._batch is None and self.queue:
            self._start(now)
        self.show_busy(now, 0.0 if self._batch is None else 1.0)

    def next_due(self) -> float:
        return self._end_s

    def drained(self) -> bool:
        return self._batch is None and not self.queue and self.load_tokens == 0

    def _start(self, now: float) -> None:
        if self.chunk_tokens is None:
            batch = take_batch(self.queue, self.budget_tokens)
            self._chunks = [job.input_tokens for job in batch]
        else:
            batch, self._chunks = self._take_chunks(self.chunk_tokens)
        self._batch = batch
        for job in batch:
            if math.isnan(job.prefill_start_s):
                job.prefill_start_s = now
        self._start_s = now
        self.last_start_s = now
        latency = self.profile.prefill_s(self._chunks, 1.0)
        if self.stall is not None:
            latency += self.stall.next_batch_s()
        if self.warmup is not None:
            latency += self.warmup.next_batch_s()
        if self.host is None:
            self._end_s = now + latency
        else:
            self.host.set_busy(self._host_slot, now, 1)
            self._progress.begin(now, latency, self.host.factor)
            self._end_s = self._progress.end_s
        self.rec.log(now, "prefill_start", self.index, batch)
        self.rec.queue(self._queue_slot, now, len(self.queue))

    def _take_chunks(self, budget: int) -> tuple[list[Job], list[int]]:
        """Jobs from the head of the queue and their chunks, filling ``budget`` tokens; the job
        cut at the edge stays at the head (its tokens done so far in ``job.sched[0]``)."""
        batch: list[Job] = []
        chunks: list[int] = []
        queue = self.queue
        for job in queue:
            if budget <= 0:
                break
            if job.sched is _FRESH:
                job.sched = [0]
            chunk = min(job.input_tokens - job.sched[0], budget)
            batch.append(job)
            chunks.append(chunk)
            budget -= chunk
        for job, chunk in zip(batch, chunks, strict=True):
            job.sched[0] += chunk
            if job.sched[0] == job.input_tokens:
                queue.popleft()  # done after this batch: the batch is a prefix of the queue
        return batch, chunks

    def _finish(self, now: float) -> None:
        batch = self._batch
        assert batch is not None
        self._batch = None
        self._end_s = math.inf
        if self.host is not None:
            self._progress.stop()
            self.host.set_busy(self._host_slot, now, 0)
        tokens = sum(self._chunks)
        self.load_tokens -= tokens
        self.rec.batch("prefill", self.index, self._start_s, now, len(batch), tokens, 1.0)
        self.rec.log(now, "prefill_end", self.index, batch)
        for job in batch:
            if self.chunk_tokens is None or job.sched[0] == job.input_tokens:
                self.pipe.after_prefill(job, now, self.profile, sender=self)
