"""What every worker process shares: its spec, its context, stop checks and prefill."""

from __future__ import annotations

import os
import queue
from dataclasses import dataclass
from typing import Any

from easerve_core.deployment import Deployment
from easerve_core.request import Modality
from easerve_core.sm_share import SMShareTable
from live.events import At, Done, Event, Failed, Rejected, Sent, StageRow, Stamped, Stamps, WorkerId
from live.families.base import Family
from live.options import LiveOptions
from live.stages import prefill
from live.transport import Channels, Encoded, Job, Outbox, Prefilled, clock
from live.zoo import ModelSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSpec:
    """Everything a worker process needs besides its queues."""

    me: WorkerId
    model: ModelSpec
    weights_dir: str
    options: LiveOptions
    deployment: Deployment
    #: the plan's SM-share table (the dynamic partitioner's shares)
    sm_table: SMShareTable
    frontend_pid: int
    #: the run's seed: the encode worker's router is built from it (easerve_core.policies)
    seed: int = 0


class WorkerContext:
    """A running worker's model, queues and helpers."""

    def __init__(self, spec: WorkerSpec, channels: Channels, model: Any) -> None:
        self.spec = spec
        self.me = spec.me
        self.channels = channels
        self.model = model
        self.family: Family = spec.model.family
        self.outbox = Outbox(spec.me, channels)
        self.inbox = channels.inboxes[spec.me]
        self.poll_s = spec.options.poll_interval_s

    @property
    def index(self) -> int:
        return self.me[1]

    def emit(self, event: Event) -> None:
        self.channels.emit(event)

    def at(self, rid: int) -> None:
        self.emit(At(worker=self.me, request_id=rid))

    def sent(self, rid: int, to: WorkerId) -> None:
        self.emit(Sent(worker=self.me, request_id=rid, to=to))

    def stamp(self, rid: int, stamps: Stamps) -> None:
        self.emit(Stamped(worker=self.me, request_id=rid, stamps=stamps))

    def done(self, rid: int, *, finish_s: float, tokens: list[int], stamps: Stamps) -> None:
        self.emit(Done(worker=self.me, request_id=rid, finish_s=finish_s, tokens=tuple(tokens),
                       stamps=stamps))

    def fail(self, rid: int, error: str) -> None:
        self.emit(Failed(worker=self.me, request_id=rid, error=error))

    def reject(self, rid: int, error: str) -> None:
        self.emit(Rejected(worker=self.me, request_id=rid, error=error))

    def log(self, *, stage: str, start_s: float, end_s: float, batch_size: int, tokens: int,
            share: float) -> None:
        self.emit(StageRow(worker=self.me, stage=stage, index=self.index, group=self.me[0], start_s=start_s,
                           end_s=end_s, batch_size=batch_size, tokens=tokens, sm_share=share))

    def frontend_alive(self) -> bool:
        try:
            os.kill(self.spec.frontend_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def get(self, timeout_s: float) -> Any:
        """The next inbox message, ``...`` if none came, or ``None`` to stop.

        A message that cannot be unpickled (its sender died before we mapped
        its tensors) is dropped: the front end fails that request.
        """
        try:
            return self.inbox.get(timeout=timeout_s) if timeout_s > 0 else self.inbox.get_nowait()
        except queue.Empty:
            return ... if self.frontend_alive() else None
        except Exception:  # a dead sender's message
            return ...


def run_prefill(ctx: WorkerContext, enc: Encoded, slot: Any) -> None:
    """Prefill one encoded request under ``slot`` and hand it to its decode worker."""
    request = enc.request
    rid = request.request_id
    try:
        with slot as share:
            start = clock()
            pin = ctx.family.prefill_inputs(ctx.model, enc.text_ids, enc.modality, enc.meta, enc.items())
            state = prefill(ctx.model, pin)
            end = clock()
    except Exception as exc:  # one bad request must not stop the worker
        ctx.fail(rid, f"prefill failed on {ctx.me[0]} {ctx.index}: {exc!r}")
        return
    worker = enc.stamps.prefill_worker
    stamps = enc.stamps.with_(prefill_start_s=start, first_token_s=end,
                              prefill_worker=ctx.index if worker is None else worker)
    ctx.stamp(rid, stamps)
    ctx.log(stage="prefill", start_s=start, end_s=end, batch_size=1, tokens=state.length, share=share)
    if request.output_tokens <= 1:
        ctx.done(rid, finish_s=end, tokens=[state.first_token], stamps=stamps)
        return
    dest: WorkerId = ("decode", enc.decode_worker)
    ctx.sent(rid, dest)
    ctx.outbox.send(dest, rid, Prefilled(request_id=rid, steps=request.output_tokens - 1,
                                          state=state, sender=ctx.me, stamps=stamps))


#: LM tokens a family adds around each item (Qwen2.5-VL: vision start + end)
_WRAPPER_TOKENS = {"qwen2.5-vl": 2}


def validate_job(ctx: WorkerContext, job: Job) -> tuple[int, ...]:
    """The LM tokens per item of ``job``'s input; a ``ValueError`` when it is malformed or too long."""
    request, family = job.request, ctx.family
    if job.mm is None:
        if request.modality is not Modality.TEXT:
            raise ValueError(f"{request.modality.value} request has zero items")
        counts: tuple[int, ...] = ()
    else:
        if job.mm.modality is not request.modality:
            raise ValueError(f"input is {job.mm.modality.value}, request is {request.modality.value}")
        counts = family.validate(ctx.model.config, job.mm)
    wrap = _WRAPPER_TOKENS.get(family.name, 0) * len(counts)
    needed = len(job.text_ids) + sum(counts) + wrap + request.output_tokens
    limit = ctx.model.config.text_config.max_position_embeddings
    if needed > limit:
        raise ValueError(
            f"request needs {needed} tokens (prompt {len(job.text_ids)}, multimodal "
            f"{sum(counts) + wrap}, output {request.output_tokens}) but the model's "
            f"context is {limit}"
        )
    return counts
