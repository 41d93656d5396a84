"""The encode worker: micro-batcher, encoder, router, and local Prefill beside it.

The main thread runs :class:`~live.workers.intake.IntakeLoop`: it receives
jobs, validates each (a malformed input is ``rejected`` in its record and the
trial goes on), offers it to the worker's own batcher, and polls the batcher
at its deadline. A closed micro-batch runs
through the tower + projector under the partitioner's encode slot; then the
router sends each request to local Prefill (a second thread in this process,
under the partitioner's prefill slot) or to its remote prefill worker.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import numpy as np
import torch

from easerve_core.batcher import Batch, Batcher
from easerve_core.deployment import SMSharing
from easerve_core.policies import make_batcher, make_router, retune
from easerve_core.router import Route, Router
from live.device import model_device, sync, use_device
from live.events import Noted, Retuned, Stamps
from live.partition import make_partitioner
from live.stages import encode_batch
from live.transport import Encoded, Job, Retune, WorkerDown, clock
from live.workers.common import WorkerContext, run_prefill, validate_job
from live.workers.intake import IntakeLoop


class EncodeWorker:
    """One encode worker (see the module docstring)."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        dep = ctx.spec.deployment
        opts = ctx.spec.options
        self.batcher: Batcher[Job] = make_batcher(dep)
        self.router: Router = make_router(dep, ctx.spec.seed, ctx.index)
        self.partitioner = make_partitioner(
            str(dep.sm_sharing), backend=opts.partition_backend, total_threads=opts.encode_threads,
            static_share=dep.static_encode_share, table=ctx.spec.sm_table,
        )
        self.local: queue.Queue[Any] = queue.Queue()
        #: workers the front end said died (live.transport.WorkerDown)
        self.down: set[tuple[str, int]] = set()
        #: whether this worker can prefill locally when no remote Prefill is left
        self.local_possible = dep.sm_sharing is not SMSharing.NONE
        self.device = model_device(ctx.model)

    def warm_up(self) -> None:
        ctx = self.ctx
        modality = next(iter(sorted(ctx.family.modalities)))
        mm = ctx.family.make_input(ctx.model.config, modality, [4], np.random.default_rng(0))

        def once() -> None:
            feats = encode_batch(ctx.model, ctx.family, [mm])[0]
            pin = ctx.family.prefill_inputs(ctx.model, [1, 5, 6], modality, mm.meta, feats)
            ctx.model(inputs_embeds=pin.inputs_embeds, logits_to_keep=1,
                      **({} if pin.position_ids is None else {"position_ids": pin.position_ids}))

        with torch.no_grad():
            once()
            lanes = getattr(self.partitioner.backend, "lanes", None)  # green contexts: warm every lane
            for lane in lanes.every_lane() if lanes is not None else ():
                with lane.activate():
                    once()
                    sync(self.device)

    def run(self) -> None:
        thread = threading.Thread(target=self._local_prefill_loop, name="local-prefill", daemon=True)
        thread.start()
        try:
            self._loop()
        finally:
            self.local.put(None)
            thread.join(timeout=self.ctx.spec.options.shutdown_timeout_s)

    def _loop(self) -> None:
        ctx = self.ctx
        self.loop = IntakeLoop(self.batcher, clock=clock, poll_s=ctx.poll_s,
                               is_request=lambda msg: isinstance(msg, Job))
        self.loop.run(ctx.get, self._admit, self._run_batch, reap=ctx.outbox.reap, control=self._control)

    def _control(self, msg: Any) -> None:
        if isinstance(msg, WorkerDown):
            self.down.add(msg.worker)
        elif isinstance(msg, Retune):
            self._retune(msg)

    def _retune(self, msg: Retune) -> None:
        """The controller's fast knobs: new batcher and router; the open batch goes to the encoder now."""
        spec = self.ctx.spec
        tuned = retune(self.batcher, msg.deployment, now=clock(), seed=spec.seed, index=self.ctx.index,
                       generation=msg.generation)
        self.batcher = self.loop.batcher = tuned.batcher
        self.router = tuned.router
        self.ctx.emit(Retuned(worker=self.ctx.me, generation=msg.generation,
                              max_encode_batch=msg.deployment.max_encode_batch,
                              remote_fraction=msg.deployment.remote_fraction))
        if tuned.flushed is not None:
            self._run_batch(tuned.flushed)

    def _remote_for(self, job: Job) -> int | None:
        """The live remote prefill worker for ``job``: its own, else the next one alive, else None."""
        if job.prefill_worker < 0:  # the front end found none alive when it issued the request
            return None
        n = self.ctx.spec.deployment.prefill.num_workers
        for k in range(n):
            index = (job.prefill_worker + k) % n
            if ("prefill", index) not in self.down:
                return index
        return None

    def _admit(self, job: Job, now: float) -> Batch[Job] | None:
        ctx = self.ctx
        rid = job.request.request_id
        ctx.channels.ack(job.sender, rid, receiver=ctx.me)
        ctx.at(rid)
        try:
            validate_job(self.ctx, job)
        except ValueError as exc:
            ctx.reject(rid, f"malformed input: {exc}")
            return None
        if job.mm is None:  # text only: nothing to encode
            self._route(job, [], Stamps(encode_start_s=now, encode_end_s=now, encode_worker=ctx.index))
            return None
        return self.batcher.offer(job, now)

    def _run_batch(self, batch: Batch[Job]) -> None:
        ctx = self.ctx
        jobs = list(batch.items)
        start = clock()
        try:
            with self.partitioner.encode_slot(len(jobs)) as share:
                feats = encode_batch(ctx.model, ctx.family, [j.mm for j in jobs])
                sync(self.device)  # the end stamp covers the device's work
        except Exception as exc:  # fail the batch, keep serving
            for job in jobs:
                ctx.fail(job.request.request_id, f"encode failed: {exc!r}")
            return
        end = clock()
        tokens = sum(f.shape[0] for items in feats for f in items)
        ctx.log(stage="encode", start_s=start, end_s=end, batch_size=len(jobs), tokens=tokens,
                share=share)
        for job, items in zip(jobs, feats, strict=True):
            self._route(job, items, Stamps(encode_start_s=start, encode_end_s=end,
                                           encode_batch_size=len(jobs), encode_worker=ctx.index))

    def _route(self, job: Job, items: list[torch.Tensor], stamps: Stamps) -> None:
        ctx = self.ctx
        rid = job.request.request_id
        route = self.router.route()
        remote = self._remote_for(job) if route is Route.REMOTE else None
        if route is Route.REMOTE and remote is None:  # no remote Prefill left: use what remains
            if not self.local_possible:
                ctx.fail(rid, "no live prefill worker: every remote one died and this "
                              "deployment runs no local prefill (sm_sharing = 'none')")
                return
            route = Route.LOCAL
            ctx.emit(Noted(worker=ctx.me, request_id=rid, why="routed local: no live remote prefill worker"))
        local = route is Route.LOCAL
        stamps = stamps.with_(mm_tokens=sum(f.shape[0] for f in items), route=route.value,
                              prefill_worker=ctx.index if local else remote)
        ctx.stamp(rid, stamps)
        hidden = ctx.model.config.text_config.hidden_size
        enc = Encoded(
            request=job.request, text_ids=job.text_ids, modality=job.request.modality,
            meta=job.mm.meta if job.mm is not None else (),
            feats=torch.cat(items) if items else torch.zeros(0, hidden),
            sizes=tuple(f.shape[0] for f in items), decode_worker=job.decode_worker, sender=ctx.me,
            stamps=stamps,
        )
        if local:
            # the local prefill reads feats on its own stream: the cat above must be done first
            # (a remote hand-off waits through the CUDA IPC event instead)
            sync(self.device)
            self.local.put(enc)
        else:
            dest = ("prefill", int(remote))  # type: ignore[arg-type]
            ctx.sent(rid, dest)
            ctx.outbox.send(dest, rid, enc)

    def _local_prefill_loop(self) -> None:
        torch.set_num_threads(self.ctx.spec.options.encode_threads)
        use_device(self.ctx.spec.options.device)  # the default device is per thread
        while True:
            enc = self.local.get()
            if enc is None:
                return
            run_prefill(self.ctx, enc, self.partitioner.prefill_slot())
