"""Messages between worker processes, and the queues and acks that carry them.

Data (inputs, embeddings, KV caches) travels as torch tensors through
``torch.multiprocessing`` queues: on CPU a tensor is moved into shared memory
when it is pickled and the receiver maps the same pages (CUDA IPC plays that
part on one GPU node). The sender must stay alive and keep the tensor
referenced until the receiver has it (pitfall P8), so every data message is
held in the sender's :class:`Outbox` until the receiver acks its key.

Events (stamps, stage-log rows, failures) go to the front end as small typed
values without tensors (:mod:`live.events`). Every channel has one queue per writer
(:class:`~live.fanin.FanIn`), so a killed worker cannot block the others. Events from different
processes may arrive in any order, so the record fields stamped so far also
travel with the data and come back in the ``done`` event. Times in events are absolute
``time.monotonic()`` readings, comparable across processes on one host
(CLOCK_MONOTONIC is system-wide on Linux); the front end subtracts the trial
start.
"""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from easerve_core.deployment import Deployment
from easerve_core.request import Modality, Request
from live.events import Event, Stamps, WorkerId
from live.families.base import MMInput
from live.fanin import FanIn
from live.stages import KVState

FRONTEND: WorkerId = ("frontend", 0)
#: stage rank of where a request is; a request's location only moves forward
RANK = {"frontend": 0, "encode": 1, "prefill": 2, "decode": 3}


def clock() -> float:
    return time.monotonic()


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A request as the front end issues it to an encode worker."""

    request: Request
    text_ids: tuple[int, ...]
    mm: MMInput | None
    prefill_worker: int  # remote prefill worker to use if the router says remote
    decode_worker: int
    sender: WorkerId = FRONTEND


@dataclass(frozen=True, slots=True, kw_only=True)
class Encoded:
    """A request after Encode: its embeddings, one tensor split by ``sizes``."""

    request: Request
    text_ids: tuple[int, ...]
    modality: Modality
    meta: tuple[tuple[int, ...], ...]
    feats: torch.Tensor  # (sum of item tokens, hidden)
    sizes: tuple[int, ...]
    decode_worker: int
    sender: WorkerId
    stamps: Stamps = field(default_factory=Stamps)  # record fields so far

    def items(self) -> list[torch.Tensor]:
        return list(torch.split(self.feats, list(self.sizes))) if self.sizes else []


@dataclass(frozen=True, slots=True, kw_only=True)
class Prefilled:
    """A request after Prefill: its KV cache and first token, for Decode."""

    request_id: int
    steps: int  # decode steps still to run (output_tokens - 1)
    state: KVState
    sender: WorkerId
    stamps: Stamps = field(default_factory=Stamps)  # record fields so far


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerDown:
    """The front end's word to the encode workers that ``worker`` died: route around it."""

    worker: WorkerId


@dataclass(frozen=True, slots=True, kw_only=True)
class Retune:
    """The online controller's fast knobs for the encode workers (easerve_core.policies.retune)."""

    deployment: Deployment
    generation: int


@dataclass(slots=True)
class Channels:
    """Every queue of a trial; each worker is handed its own part (:meth:`for_worker`) at start.

    ``inboxes[w]`` and ``acks[w]`` are what worker ``w`` reads, ``events`` what
    the front end reads; each is a :class:`~live.fanin.FanIn` with one queue per
    writer.
    """

    inboxes: dict[WorkerId, FanIn]
    acks: dict[WorkerId, FanIn]
    events: FanIn

    @classmethod
    def build(cls, ctx: Any, workers: list[WorkerId]) -> Channels:
        everyone = [*workers, FRONTEND]
        return cls(inboxes={w: FanIn(ctx, everyone) for w in workers},
                   acks={w: FanIn(ctx, everyone) for w in everyone},
                   events=FanIn(ctx, everyone))

    def for_worker(self, me: WorkerId) -> Channels:
        """What worker ``me`` reads and writes, and nothing more: its own inbox and acks whole, and
        of every other reader only the queue it writes as ``me``. A worker is handed this view, so
        it holds about 4 x workers queues, not every queue of the trial (workers squared)."""
        return Channels(
            inboxes={w: fan if w == me else fan.only([me]) for w, fan in self.inboxes.items()},
            acks={w: fan if w == me else fan.only([me]) for w, fan in self.acks.items()},
            events=self.events.only([me]))

    def emit(self, event: Event) -> None:
        self.events.put(event.worker, event)

    def ack(self, sender: WorkerId, key: int, *, receiver: WorkerId) -> None:
        self.acks[sender].put(receiver, key)

    def close(self) -> None:
        for fan in [*self.inboxes.values(), *self.acks.values(), self.events]:
            fan.close()


class Outbox:
    """A sender's data messages in flight, held until their receivers ack them."""

    def __init__(self, me: WorkerId, channels: Channels) -> None:
        self.me = me
        self.channels = channels
        self.held: dict[int, Any] = {}

    def send(self, dest: WorkerId, key: int, message: Any) -> None:
        self.held[key] = message
        self.channels.inboxes[dest].put(self.me, message)

    def reap(self, timeout_s: float = 0.0) -> None:
        """Drop held messages whose receivers acked; wait up to ``timeout_s`` for the first."""
        box = self.channels.acks[self.me]
        block = timeout_s > 0
        while True:
            try:
                key = box.get(timeout=timeout_s) if block else box.get_nowait()
            except queue.Empty:
                return
            self.held.pop(key, None)
            block = False

    def drain(self, timeout_s: float) -> None:
        """Wait until every held message is acked, or ``timeout_s`` passes."""
        deadline = clock() + timeout_s
        while self.held and clock() < deadline:
            self.reap(min(0.05, max(0.0, deadline - clock())))
