"""Encode workers: micro-batcher, FIFO encoder, router, local Prefill on shared SMs.

One :class:`EncodeWorker` per encode worker of the deployment. The front
dispatcher offers each arriving request to a worker's batcher
(:class:`~easerve_core.AdaptiveBatcher` or :class:`~easerve_core.FixedBatcher`);
closed batches run on the encoder in FIFO order. Closed batches that had to
wait for a busy encoder are coalesced, in order, up to B when it frees
(``SimOptions.coalesce_waiting_batches``; a batch is never split), as a
server forms its batch from what is queued when an instance frees. When a batch finishes, its
requests are routed one by one, in batch order, by the worker's router
(:class:`~easerve_core.DeficitRouter` or :class:`~easerve_core.RandomRouter`):
``local`` requests queue for Prefill on this worker's GPUs, ``remote`` ones
go to the least-loaded Prefill worker. Encode and local Prefill share the
SMs as :mod:`sim.sharing` describes.

Opt-in mechanisms of a CPU host (docs/calibration.md): with ``host`` the
worker reports its busy lanes to :class:`~sim.host.HostCPU` and re-rates them
when the host's factor moves; with ``block_intake`` requests that reach a
busy encoder are held and offered when its batch ends, one by one until a
batch closes, and the batcher is not polled while it encodes (the live
worker's single receive loop); with ``stall`` (:class:`~sim.stalls.Stall`) one
of its batches, encode and local Prefill counted together (one process),
carries the worker's one-off pause; with ``warmup`` / ``prefill_warmup``
(:class:`~sim.warmup.Warmup`) its first encode / local Prefill batches carry
the fresh process's warm-up.

With ``preprocess`` (:class:`~sim.preprocess.HostPreprocess`, the profile's
host preprocessing) a request reaching the worker first waits for one of the
worker's host threads and is offered to the batcher once preprocessed; it
counts in ``num_waiting`` (and so in ``load``) from its arrival.

Order within one step at one instant: finish the encode batch that is due
(and route its requests), finish the local Prefill batch that is due (and
hand its requests to Decode), poll the batcher, start the next encode batch,
start the next local Prefill batch.
"""

from __future__ import annotations

from collections import deque

from easerve_core import Batch, StageProfile
from easerve_core.batcher import Batcher
from easerve_core.router import Route, Router
from sim.clock import SimEnvironment
from sim.host import HostCPU
from sim.job import Job
from sim.pipeline import Pipeline, take_batch
from sim.preprocess import HostPreprocess
from sim.recorder import Recorder
from sim.sharing import SharedGPU
from sim.stalls import Stall
from sim.warmup import Warmup
from sim.worker import Worker

#: the trace's name for each route decision
_ROUTE_LOG = {route: f"route_{route.value}" for route in Route}


class EncodeWorker(Worker):
    """An encode worker and its local Prefill (see the module docstring)."""

    stage = "encode"

    def __init__(self, env: SimEnvironment, index: int, gpus: tuple[int, ...], recorder: Recorder,
                 *, pipe: Pipeline, batcher: Batcher[Job], router: Router, gpu: SharedGPU,
                 encode_profile: StageProfile, lm_profile: StageProfile,
                 prefill_max_batch_tokens: int, encode_only: bool, coalesce: bool,
                 host: HostCPU | None = None, block_intake: bool = False,
                 stall: Stall | None = None, warmup: Warmup | None = None,
                 prefill_warmup: Warmup | None = None,
                 preprocess: HostPreprocess | None = None) -> None:
        self.pipe = pipe
        #: route a remote request here while no remote Prefill worker serves (set by the roster
        #: of a run with a controller, on workers that hold the LM)
        self.local_when_no_remote = False
        #: embeddings on their way here from another encode worker, to prefill on this worker's LM
        #: (sim.roster.SteeredPipeline: a remote hand-off while no remote Prefill worker serves)
        self.inbound = 0
        self.preprocess = preprocess
        self.batcher = batcher
        self.router = router
        self.gpu = gpu
        self.encode_profile = encode_profile
        self.lm_profile = lm_profile
        self.budget_tokens = prefill_max_batch_tokens
        self.encode_only = encode_only
        self.coalesce = coalesce
        self.fifo: deque[Batch[Job]] = deque()
        self.local_queue: deque[Job] = deque()
        self.num_waiting = 0  # requests in the batcher or in closed batches not yet started
        self._encoding: Batch[Job] | None = None
        self._prefilling: list[Job] | None = None
        self.block_intake = block_intake
        self._held: deque[Job] = deque()  # reached the worker while it encoded (block_intake)
        self.host = host
        self.stall = stall
        self.warmup = warmup
        self.prefill_warmup = prefill_warmup
        self._host_slot = -1 if host is None else host.join(self._on_host)
        self._encode_slot = recorder.queue_slot("encode", index)
        self._local_slot = recorder.queue_slot("local-prefill", index)
        super().__init__(env, index, gpus, recorder)

    def _on_host(self, now: float, factor: float) -> None:
        self.gpu.set_host_factor(now, factor)
        self.notify()

    def _report_busy(self, now: float) -> None:
        if self.host is not None:
            self.host.set_busy(self._host_slot, now, self.gpu.busy_threads())

    @property
    def load(self) -> int:
        """Requests waiting for or in Encode here (least-loaded dispatch)."""
        running = len(self._encoding) if self._encoding is not None else 0
        return self.num_waiting + running

    # -- inputs from the dispatcher ----------------------------------------------------
    def offer(self, job: Job, now: float) -> None:
        job.encode_worker = self.index
        if not job.items:  # text: nothing to encode
            self._route(job, now)
            return
        self.rec.log(now, "arrive", self.index, (job,))
        self.num_waiting += 1
        if self.preprocess is not None and self.preprocess.submit(job, now, self._admit):
            self.rec.queue(self._encode_slot, now, self.num_waiting)
            return
        self._admit(job, now)

    def _admit(self, job: Job, now: float) -> None:
        """``job`` (counted in ``num_waiting``) is ready for the encoder: to the batcher."""
        if self.block_intake and self._encoding is not None:
            self._held.append(job)
            return
        batch = self.batcher.offer(job, now)
        if batch is not None:
            self.fifo.append(batch)
            if self._encoding is None:
                self.notify()
        else:
            deadline = self.batcher.next_deadline()
            if deadline is not None and not self.wakes_before(deadline):
                self.notify()
        self.rec.queue(self._encode_slot, now, self.num_waiting)

    # -- the loop ----------------------------------------------------------------------
    def step(self, now: float) -> None:
        gpu = self.gpu
        if self._encoding is not None and gpu.encode.end_s <= now:
            self._finish_encode(gpu.encode.end_s)
        if self._prefilling is not None and gpu.prefill.end_s <= now:
            self._finish_prefill(gpu.prefill.end_s)
        if self._held and self._encoding is None:
            self._release_held(now)
        batch = None if self.block_intake and self._encoding is not None else self.batcher.poll(now)
        if batch is not None:
            self.fifo.append(batch)
        if self._encoding is None and self.fifo:
            self._start_encode(now)
        if self._prefilling is None and self.local_queue:
            self._start_prefill(now)
        self.show_busy(now, gpu.busy_frac())

    def next_due(self) -> float:
        due = min(self.gpu.encode.end_s, self.gpu.prefill.end_s)
        if self.block_intake and self._encoding is not None:
            return due
        deadline = self.batcher.next_deadline()
        return due if deadline is None else min(due, deadline)

    def drained(self) -> bool:
        return (self.num_waiting == 0 and self._encoding is None and self._prefilling is None
                and not self.local_queue and not self._held and not self.fifo and not len(self.batcher)
                and not self.inbound)

    def _release_held(self, now: float) -> None:
        """Offer held requests in order, polling after each, until a batch closes."""
        while self._held:
            batch = self.batcher.offer(self._held.popleft(), now) or self.batcher.poll(now)
            if batch is not None:
                self.fifo.append(batch)
                return

    # -- Encode --------------------------------------------------------------------------
    def _start_encode(self, now: float) -> None:
        self.last_start_s = now
        batch = self.fifo.popleft()
        if self.coalesce and self.fifo:
            batch = self._coalesce(batch)
        self._encoding = batch
        self.num_waiting -= len(batch)
        items = [t for job in batch.items for t in job.items]
        size = len(batch)
        for job in batch.items:
            job.encode_start_s = now
            job.encode_batch_size = size
        profile = self.encode_profile
        pause = 0.0 if self.stall is None else self.stall.next_batch_s()
        if self.warmup is not None:
            pause += self.warmup.next_batch_s()
        self.gpu.start_encode(now, size, lambda share: profile.encode_s(items, share) + pause)
        self._report_busy(now)
        self.rec.log(now, "encode_start", self.index, batch.items)
        self.rec.queue(self._encode_slot, now, self.num_waiting)

    def _coalesce(self, batch: Batch[Job]) -> Batch[Job]:
        """Merge closed batches waiting behind ``batch``, in order, while the sum stays <= B."""
        jobs = list(batch.items)
        limit = self.batcher.max_batch
        while self.fifo and len(jobs) + len(self.fifo[0]) <= limit:
            jobs.extend(self.fifo.popleft().items)
        if len(jobs) == len(batch):
            return batch
        return Batch(tuple(jobs), batch.reason, batch.dispatched_s)

    def _finish_encode(self, now: float) -> None:
        batch = self._encoding
        assert batch is not None
        self._encoding = None
        start = self.gpu.encode.start_s
        share = self.gpu.finish_encode(now)
        self._report_busy(now)
        tokens = sum(job.mm_tokens for job in batch.items)
        self.rec.batch("encode", self.index, start, now, len(batch), tokens, share)
        self.rec.log(now, "encode_end", self.index, batch.items)
        for job in batch.items:
            job.encode_end_s = now
            if self.encode_only:
                self.pipe.finish(job, now)
            else:
                self._route(job, now)

    def _route(self, job: Job, now: float) -> None:
        route = self.router.route()
        if route is Route.REMOTE and self.local_when_no_remote and not self.pipe.prefill_workers:
            route = Route.LOCAL  # a re-role rebuilds remote Prefill: prefill where the embeddings are
        job.route = route.value
        self.rec.log(now, _ROUTE_LOG[route], self.index, (job,))
        if route is Route.LOCAL:
            job.prefill_worker = self.index
            self.local_queue.append(job)
            if self._prefilling is None:
                self.notify()
            self.rec.queue(self._local_slot, now, len(self.local_queue))
        else:
            self.pipe.to_remote_prefill(job, now, sender=self)

    # -- local Prefill -------------------------------------------------------------------
    def deliver(self, job: Job, now: float) -> None:
        """Another encode worker's embeddings arrived, sent here (an LM holder) because no remote
        Prefill worker serves: prefill them locally; the record says route ``local`` with this
        worker as ``prefill_worker`` (its ``encode_worker`` is the one that encoded it)."""
        self.inbound -= 1
        job.route = Route.LOCAL.value
        job.prefill_worker = self.index
        self.local_queue.append(job)
        if self._prefilling is None:
            self.notify()
        self.rec.queue(self._local_slot, now, len(self.local_queue))

    def _start_prefill(self, now: float) -> None:
        self.last_start_s = now
        batch = take_batch(self.local_queue, self.budget_tokens)
        self._prefilling = batch
        seqs = [job.input_tokens for job in batch]
        for job in batch:
            job.prefill_start_s = now
        profile = self.lm_profile
        pause = 0.0 if self.stall is None else self.stall.next_batch_s()
        if self.prefill_warmup is not None:
            pause += self.prefill_warmup.next_batch_s()
        self.gpu.start_prefill(now, lambda share: profile.prefill_s(seqs, share) + pause)
        self._report_busy(now)
        self.rec.log(now, "local_prefill_start", self.index, batch)
        self.rec.queue(self._local_slot, now, len(self.local_queue))

    def _finish_prefill(self, now: float) -> None:
        batch = self._prefilling
        assert batch is not None
        self._prefilling = None
        start = self.gpu.prefill.start_s
        share = self.gpu.finish_prefill(now)
        self._report_busy(now)
        tokens = sum(job.input_tokens for job in batch)
        self.rec.batch("local-prefill", self.index, start, now, len(batch), tokens, share)
        self.rec.log(now, "local_prefill_end", self.index, batch)
        for job in batch:
            self.pipe.after_prefill(job, now, self.lm_profile, sender=self)
