"""The language-model workers: remote Prefill and continuous-batching Decode.

A prefill worker takes encoded requests one at a time (exclusive use of its
device) and hands each KV cache to the request's decode worker. A decode
worker keeps one running :class:`~live.stages.DecodeBatch`: between steps it
admits new requests up to ``max_num_decode_seqs`` and lets finished ones
leave, so requests join and leave a batch that never drains to start over.
"""

from __future__ import annotations

import contextlib

import numpy as np

from live.events import Stamps
from live.stages import DecodeBatch, KVState, encode_batch, prefill
from live.transport import Encoded, Prefilled, clock
from live.workers.common import WorkerContext, run_prefill


def _warm_state(ctx: WorkerContext) -> KVState:
    """A real prefill of a small dummy request (lazy initialisation happens here, untimed)."""
    modality = next(iter(sorted(ctx.family.modalities)))
    mm = ctx.family.make_input(ctx.model.config, modality, [4], np.random.default_rng(0))
    feats = encode_batch(ctx.model, ctx.family, [mm])[0]
    return prefill(ctx.model, ctx.family.prefill_inputs(ctx.model, [1, 5, 6], modality, mm.meta, feats))


class PrefillWorker:
    """A remote prefill worker (see the module docstring)."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx

    def warm_up(self) -> None:
        _warm_state(self.ctx)

    def run(self) -> None:
        ctx = self.ctx
        while True:
            ctx.outbox.reap()
            msg = ctx.get(ctx.poll_s)
            if msg is None:
                return
            if not isinstance(msg, Encoded):
                continue
            rid = msg.request.request_id
            ctx.channels.ack(msg.sender, rid, receiver=ctx.me)
            ctx.at(rid)
            run_prefill(ctx, msg, contextlib.nullcontext(1.0))


class DecodeWorker:
    """A decode worker running one continuous batch (see the module docstring)."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.batch = DecodeBatch(ctx.model, mrope=ctx.family.mrope)
        self.max_seqs = ctx.spec.deployment.max_num_decode_seqs
        #: per request in the batch, the record fields it carried in (returned whole in Done)
        self.carried: dict[int, Stamps] = {}

    def warm_up(self) -> None:
        self.batch.join(-1, _warm_state(self.ctx), 1)
        self.batch.step()
        self.batch.leave([-1])

    def run(self) -> None:
        while True:
            if not self._admit():
                return
            if len(self.batch):
                self._step()

    def _admit(self) -> bool:
        """Take new requests while there is room; False when told to stop."""
        ctx = self.ctx
        while len(self.batch) < self.max_seqs:
            msg = ctx.get(ctx.poll_s if not len(self.batch) else 0.0)
            if msg is None:
                return False
            if msg is ...:
                return True
            if not isinstance(msg, Prefilled):
                continue
            ctx.channels.ack(msg.sender, msg.request_id, receiver=ctx.me)
            ctx.at(msg.request_id)
            try:
                self.batch.join(msg.request_id, msg.state, msg.steps)
            except Exception as exc:  # one bad request must not stop the worker
                ctx.fail(msg.request_id, f"decode join failed: {exc!r}")
                continue
            self.carried[msg.request_id] = msg.stamps.with_(decode_worker=ctx.index)
            ctx.stamp(msg.request_id, Stamps(decode_worker=ctx.index))
        return True

    def _step(self) -> None:
        ctx = self.ctx
        size, context = len(self.batch), self.batch.context_tokens()
        start = clock()
        try:
            self.batch.step()
        except Exception as exc:  # fail the batch, keep serving
            keys = self.batch.keys
            for key in keys:
                self.carried.pop(key, None)
                ctx.fail(int(key), f"decode step failed: {exc!r}")
            self.batch.leave(keys)
            return
        end = clock()
        ctx.log(stage="decode", start_s=start, end_s=end, batch_size=size, tokens=context, share=1.0)
        done = self.batch.finished()
        for key in done:
            ctx.done(int(key), finish_s=end, tokens=self.batch.tokens(key),
                     stamps=self.carried.pop(key, Stamps()))
        self.batch.leave(done)
