"""The aggregated (vLLM-like) live worker: Encode, Prefill and Decode in one process.

One worker per LM instance of an aggregated deployment (the ``vllm``
preset). It takes raw requests from the front end into a waiting queue and
keeps one continuous decode batch, with the simulator's aggregated rule
(:mod:`sim.aggregated`): at each step boundary, when a request waits and the
batch has room (``max_num_decode_seqs``), the engine runs a *prefill phase*
first: it encodes the request's items, prefills it on the whole device, and
the new sequence joins the batch with its first token; otherwise it runs one
decode step. A phase holds one request, as the simulator's under the live
executor's mechanisms (``[sim] prefill_max_batch_tokens = 1``, one prefill
at a time; calibration.loop.host.LIVE_MECHANISMS). A malformed request is
rejected and the worker goes on.
"""

from __future__ import annotations

from collections import deque

import torch

from live.events import Stamps
from live.stages import encode_batch, prefill
from live.transport import Job, clock
from live.workers.common import WorkerContext, validate_job
from live.workers.llm import DecodeWorker


class AggregatedWorker(DecodeWorker):
    """An aggregated LM instance (see the module docstring)."""

    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        self.waiting: deque[Job] = deque()

    def run(self) -> None:
        while True:
            if not self._take():
                return
            if self.waiting and len(self.batch) < self.max_seqs:
                self._phase(self.waiting.popleft())
            elif len(self.batch):
                self._step()

    def _take(self) -> bool:
        """Move every request that arrived into the waiting queue (block only when idle); False to stop."""
        ctx = self.ctx
        idle = not self.waiting and not len(self.batch)
        while True:
            msg = ctx.get(ctx.poll_s if idle else 0.0)
            if msg is None:
                return False
            if msg is ...:
                return True
            idle = False
            if isinstance(msg, Job):
                self._admit_job(msg)

    def _admit_job(self, job: Job) -> None:
        ctx = self.ctx
        rid = job.request.request_id
        ctx.channels.ack(job.sender, rid, receiver=ctx.me)
        ctx.at(rid)
        try:
            validate_job(ctx, job)
        except ValueError as exc:
            ctx.reject(rid, f"malformed input: {exc}")
            return
        self.waiting.append(job)

    def _phase(self, job: Job) -> None:
        """Encode, prefill and join one request (the decode batch waits, as in the simulator)."""
        ctx = self.ctx
        rid = job.request.request_id
        try:
            with torch.no_grad():
                start = clock()
                feats = encode_batch(ctx.model, ctx.family, [job.mm])[0] if job.mm is not None else []
                enc_end = clock()
                meta = job.mm.meta if job.mm is not None else ()
                pin = ctx.family.prefill_inputs(ctx.model, list(job.text_ids), job.request.modality, meta,
                                                feats)
                state = prefill(ctx.model, pin)
                end = clock()
        except Exception as exc:  # one bad request must not stop the worker
            ctx.fail(rid, f"aggregated phase failed: {exc!r}")
            return
        tokens = sum(int(f.shape[0]) for f in feats)
        if job.mm is not None:
            ctx.log(stage="encode", start_s=start, end_s=enc_end, batch_size=1, tokens=tokens, share=1.0)
        ctx.log(stage="prefill", start_s=enc_end, end_s=end, batch_size=1, tokens=state.length, share=1.0)
        stamps = Stamps(
            encode_start_s=start, encode_end_s=enc_end, encode_batch_size=1 if job.mm else None,
            encode_worker=ctx.index, mm_tokens=tokens, route="local", prefill_worker=ctx.index,
            prefill_start_s=enc_end, first_token_s=end, decode_worker=ctx.index)
        ctx.stamp(rid, stamps)
        if job.request.output_tokens <= 1:
            ctx.done(rid, finish_s=end, tokens=[state.first_token], stamps=stamps)
            return
        try:
            self.batch.join(rid, state, job.request.output_tokens - 1)
        except Exception as exc:
            ctx.fail(rid, f"decode join failed: {exc!r}")
            return
        self.carried[rid] = stamps
