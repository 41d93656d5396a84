"""The aggregated (vLLM-like) baseline: Encode, Prefill and Decode in one engine.

Each LM instance of ``tp`` GPUs is one :class:`AggregatedWorker`, a
:class:`~sim.decode.DecodeWorker` whose step boundaries may also run a
*prefill phase*: when requests wait and the next can be admitted (sequence
limit and KV reservation as in Decode, summed input tokens within
``SimOptions.prefill_max_batch_tokens``), the engine pauses decoding, encodes
the batch's multimodal items as one encoder batch, prefills the batch on the
whole GPU, and the new sequences join the decode batch at the phase's end
(their first token). This is vLLM's prefill-first scheduling without chunked
prefill; encoder and LM share the instance's memory, so its KV capacity is
the profile's ``kv_capacity_tokens(tp, with_encoder=True)``.

With a :class:`~sim.host.HostCPU` (``[sim.host] num_host_cores``, the live
executor's worker processes on one host) an instance is one busy thread
while it decodes *or* runs a phase: the phase's encode and then its prefill
are exclusive seconds of work draining at the host's factor, and decoding has
Decode's join and leave work. Off, a phase is one due time. Either way a
phase's encode and prefill carry their lanes' warm-ups (``warmup_encode_s``,
``warmup_prefill_s``), and decode segments Decode's.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from easerve_core import StageProfile
from sim.clock import SimEnvironment
from sim.job import Job
from sim.local_engine import LocalEngine
from sim.recorder import Recorder


class AggregatedWorker(LocalEngine):
    """One aggregated LM instance (see the module docstring)."""

    encode_profile: StageProfile  # the instance's own encoder: always one

    def __init__(self, env: SimEnvironment, index: int, gpus: tuple[int, ...], recorder: Recorder,
                 *, prefill_max_batch_tokens: int, **engine: Any) -> None:
        """``engine``: :class:`~sim.local_engine.LocalEngine`'s keyword arguments."""
        self.budget_tokens = prefill_max_batch_tokens
        self.arrivals: deque[Job] = deque()
        self._phase: list[Job] | None = None
        self._phase_start = 0.0
        self._phase_prefill_s = -1.0  # with a host: the prefill work still to start; -1: none
        self._encode_start = 0.0
        super().__init__(env, index, gpus, recorder, **engine)

    @property
    def load(self) -> int:
        return len(self.arrivals) + len(self._leaves)

    def offer(self, job: Job, now: float) -> None:
        """A new request from the front dispatcher."""
        job.encode_worker = job.prefill_worker = job.decode_worker = self.index
        job.route = "local"
        self.load_tokens += job.kv_tokens
        self.enqueue(self.arrivals, job, now, "arrive", self._queue_slot)
        if self._phase is None and len(self.arrivals) == 1 and self._fits(job):
            self._cut(now)

    def step(self, now: float) -> None:
        if self._phase is not None and self._phase_end <= now:
            if self._phase_prefill_s >= 0:
                self._start_prefill(self._phase_end)
            else:
                self._finish_phase(self._phase_end)
        super().step(now)

    def _busy_elsewhere(self, now: float) -> bool:
        if self._phase is None and self.arrivals and self._fits(self.arrivals[0]):
            self._start_phase(now)
        return self._phase is not None

    def _phase_busy(self) -> bool:
        return self._phase is not None

    def _start_phase(self, now: float) -> None:
        batch: list[Job] = []
        arrivals, tokens, reserved = self.arrivals, 0, self.reserved_tokens
        while arrivals:
            job = arrivals[0]
            if batch and (tokens + job.input_tokens > self.budget_tokens
                          or len(self._leaves) + len(batch) >= self.max_num_seqs
                          or reserved + job.kv_tokens > self.capacity):
                break
            batch.append(arrivals.popleft())
            tokens += job.input_tokens
            reserved += job.kv_tokens
        self.reserved_tokens = reserved
        items = [t for job in batch for t in job.items]
        encode_s = self.encode_profile.encode_s(items, 1.0) if items else 0.0
        prefill_s = self.profile.prefill_s([job.input_tokens for job in batch], 1.0)
        if items and self.encode_warmup is not None and self.encode_warmup.pending():
            encode_s += self.encode_warmup.next_batch_s()
        if self.prefill_warmup is not None and self.prefill_warmup.pending():
            prefill_s += self.prefill_warmup.next_batch_s()
        self._encode_start = now
        for job in batch:
            job.encode_start_s = now
            job.encode_batch_size = len(batch) if items else None
        self.rec.log(now, "phase_start", self.index, batch)
        self.rec.queue(self._queue_slot, now, len(arrivals))
        if self.host is None:
            enc_end = now + encode_s
            self._phase = batch
            self._end_encode(enc_end)
            self._phase_end = enc_end + prefill_s
            return
        self.host.set_busy(self._host_slot, now, 1)
        self._phase, self._phase_prefill_s = batch, prefill_s
        if not items:
            self._start_prefill(now)
            return
        self._progress.begin(now, encode_s, self.host.factor)
        self._phase_end = self._progress.end_s

    def _end_encode(self, enc_end: float) -> None:
        batch = self._phase
        assert batch is not None
        for job in batch:
            job.encode_end_s = job.prefill_start_s = enc_end
        if batch[0].encode_batch_size is not None:
            mm = sum(job.mm_tokens for job in batch)
            self.rec.batch("encode", self.index, self._encode_start, enc_end, len(batch), mm, 1.0)
        self._phase_start = enc_end

    def _start_prefill(self, now: float) -> None:
        """With a host: the phase's encode work is done at ``now``; its prefill starts."""
        assert self.host is not None
        self._end_encode(now)
        prefill_s, self._phase_prefill_s = self._phase_prefill_s, -1.0
        self._progress.begin(now, prefill_s, self.host.factor)
        self._phase_end = self._progress.end_s

    def _finish_phase(self, now: float) -> None:
        batch = self._phase
        assert batch is not None
        self._phase, self._phase_end = None, math.inf
        if self.host is not None:
            self._progress.stop()
        tokens = sum(job.input_tokens for job in batch)
        self.rec.batch("prefill", self.index, self._phase_start, now, len(batch), tokens, 1.0)
        self.rec.log(now, "phase_end", self.index, batch)
        for job in batch:
            job.first_token_s = now
            self.reserved_tokens -= job.kv_tokens  # _join reserves it again
            if job.req.output_tokens == 1:
                self.load_tokens -= job.kv_tokens
                self.pipe.finish(job, now)
            else:
                self._join(job, now)
