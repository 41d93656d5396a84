"""The hand-offs between stages: transfers, least-loaded choices, finishing.

The :class:`Pipeline` moves jobs (:class:`~sim.job.Job`, requests in flight)
between workers: embeddings from an encode worker to the least-loaded remote
Prefill worker, KV caches from Prefill to
the least-loaded Decode worker, both over the shared :class:`~sim.link.Link`.
"Least loaded" counts the tokens assigned to a worker and not yet done
(queued, in flight or running); a tie goes to the lowest index. That is the
simulator's named worker choice, ``least-loaded-at-handoff``
(:mod:`easerve_core.worker_choice`; live chooses round-robin at issue).

``handoff_prefill_s`` and ``handoff_decode_s`` (``[sim]``, 0 by default) delay
every hand-off to a remote Prefill or to a Decode worker beyond the link: the
work a live engine does around a message at both ends (building and
unpickling it, acks), which does not hold a link path. ``handoff_busy_s``
delays it further when the sender went on with its next batch before the
message arrived (in a live worker the message leaves from a thread that
competes with that batch). With ``handoff_prefill_quantiles_s`` /
``handoff_decode_quantiles_s`` every hand-off instead draws its delay from
those equally likely values, with a generator of the run's seed: the draws
happen in event order, which the same seed repeats.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from easerve_core import StageProfile
from easerve_core.worker_choice import least_loaded
from sim.job import Job, RecordTable
from sim.link import Transport
from sim.recorder import Recorder

#: the run seed's stream for drawn hand-off delays (:func:`handoff_rng`)
HANDOFF_STREAM = 0x4A4D0


def handoff_rng(quantiles: Sequence[Sequence[float]], seed: int) -> np.random.Generator | None:
    """The generator of drawn hand-off delays for a run of ``seed``, or None when none are drawn."""
    return np.random.default_rng([int(seed), HANDOFF_STREAM]) if any(len(q) for q in quantiles) else None


class Sender(Protocol):
    last_start_s: float  # when the worker last started a batch


class Receiver(Protocol):
    index: int
    load_tokens: int

    def deliver(self, job: Job, now: float) -> None: ...


def take_batch(queue: deque[Job], budget_tokens: int) -> list[Job]:
    """Jobs from the head of ``queue`` while their input tokens fit ``budget_tokens`` (>= 1 job)."""
    batch = [queue.popleft()]
    total = batch[0].input_tokens
    while queue and total + queue[0].input_tokens <= budget_tokens:
        job = queue.popleft()
        total += job.input_tokens
        batch.append(job)
    return batch


class Pipeline:
    """Stage-to-stage hand-offs (see the module docstring)."""

    def __init__(self, *, link: Transport, recorder: Recorder, records: RecordTable,
                 encode_profile: StageProfile,
                 handoff_prefill_s: float = 0.0, handoff_decode_s: float = 0.0,
                 handoff_busy_s: float = 0.0,
                 handoff_quantiles: tuple[Sequence[float], Sequence[float]] = ((), ()),
                 rng: np.random.Generator | None = None) -> None:
        self.link = link
        self.handoff_busy_s = handoff_busy_s
        # per direction: the delay, or the equally likely delays to draw from
        self._handoff = {"prefill": (handoff_prefill_s, np.asarray(handoff_quantiles[0], float)),
                         "decode": (handoff_decode_s, np.asarray(handoff_quantiles[1], float))}
        if rng is None and any(len(q) for _, q in self._handoff.values()):
            raise ValueError("drawn hand-off delays need a generator (rng)")
        self._rng = rng
        self.rec = recorder
        self.records = records
        self.encode_profile = encode_profile
        self.prefill_workers: list[Receiver] = []
        self.decode_workers: list[Receiver] = []
        self.num_finished = 0
        # a run with a controller (sim.roster.SteeredPipeline): a hand-off to a stage that has
        # no serving worker (its workers drain, the new ones are not up) waits here, in order,
        # and every finish is told ``on_finish``. Here, not in an override: a test each costs
        # less than a call per request, and a run without a controller never parks
        self.parked_prefill: deque[Job] = deque()
        self.parked_decode: deque[tuple[Job, StageProfile]] = deque()
        self.on_finish: Callable[[Job, float], None] | None = None

    def to_remote_prefill(self, job: Job, now: float, sender: Sender | None = None) -> None:
        if not self.prefill_workers:
            self.park_prefill(job, now, sender)
            return
        near = self.link.near
        worker = least_loaded(self.prefill_workers if near is None else near(sender, self.prefill_workers))
        worker.load_tokens += job.input_tokens
        job.prefill_worker = worker.index
        extra_s = self._handoff_s("prefill")
        if not job.items and not extra_s:
            worker.deliver(job, now)
            return
        nbytes = self.encode_profile.embed_bytes(job.mm_tokens) if job.items else 0
        self._send(worker, job, now, nbytes, extra_s, sender)

    def park_prefill(self, job: Job, now: float, sender: Sender | None) -> None:
        """No remote Prefill worker serves (only in a run with a controller): wait, in order."""
        self.parked_prefill.append(job)

    def park_decode(self, job: Job, now: float, kv_profile: StageProfile, sender: Sender | None) -> None:
        """No Decode worker serves (only in a run with a controller): wait, in order."""
        self.parked_decode.append((job, kv_profile))

    def after_prefill(self, job: Job, now: float, kv_profile: StageProfile,
                      sender: Sender | None = None) -> None:
        """First token is out at ``now``; move the KV cache on to Decode (or finish)."""
        job.first_token_s = now
        if job.req.output_tokens == 1:
            self.finish(job, now)
            return
        if not self.decode_workers:
            self.park_decode(job, now, kv_profile, sender)
            return
        near = self.link.near
        worker = least_loaded(self.decode_workers if near is None else near(sender, self.decode_workers))
        worker.load_tokens += job.kv_tokens
        job.decode_worker = worker.index
        nbytes = kv_profile.kv_bytes(job.input_tokens)
        self._send(worker, job, now, nbytes, self._handoff_s("decode"), sender)

    def _handoff_s(self, direction: str) -> float:
        """One hand-off's delay beyond the link: the fixed one, or a draw."""
        fixed, quantiles = self._handoff[direction]
        if not quantiles.size:
            return fixed
        assert self._rng is not None
        return float(quantiles[self._rng.integers(len(quantiles))])

    def _send(self, receiver: Receiver, job: Job, now: float, nbytes: int, extra_s: float,
              sender: Sender | None) -> None:
        """Hand ``job`` over the link, later if ``sender`` started a batch before it arrived."""
        if not self.handoff_busy_s or sender is None:
            self.link.send(now, nbytes, lambda end: receiver.deliver(job, end), extra_s=extra_s,
                           ends=(sender, receiver))
            return
        busy_s, env = self.handoff_busy_s, self.link.env

        def arrive(end: float) -> None:
            if sender.last_start_s < now:
                receiver.deliver(job, end)
                return
            late = end + busy_s
            env.call_later(max(0.0, late - env.now), lambda _call: receiver.deliver(job, late))

        self.link.send(now, nbytes, arrive, extra_s=extra_s, ends=(sender, receiver))

    def finish(self, job: Job, now: float) -> None:
        job.finish_s = now
        self.records.write(job)
        self.num_finished += 1
        self.rec.finished()
        if self.on_finish is not None:
            self.on_finish(job, now)
