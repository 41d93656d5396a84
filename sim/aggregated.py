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
"""

from __future__ import annotations

import math
from collections import deque

from easerve_core import StageProfile
from sim.clock import SimEnvironment
from sim.decode import DecodeWorker
from sim.job import Job
from sim.pipeline import Pipeline
from sim.recorder import Recorder
from sim.stepsum import StepClock


class AggregatedWorker(DecodeWorker):
    """One aggregated LM instance (see the module docstring)."""

    stage = "aggregated"

    def __init__(self, env: SimEnvironment, index: int, gpus: tuple[int, ...], recorder: Recorder,
                 *, pipe: Pipeline, clock: StepClock, kv_capacity_tokens: int | None,
                 max_num_seqs: int, profile: StageProfile, encode_profile: StageProfile,
                 prefill_max_batch_tokens: int) -> None:
        self.profile = profile
        self.encode_profile = encode_profile
        self.budget_tokens = prefill_max_batch_tokens
        self.arrivals: deque[Job] = deque()
        self._phase: list[Job] | None = None
        self._phase_start = 0.0
        self._phase_end = math.inf
        super().__init__(env, index, gpus, recorder, pipe=pipe, clock=clock,
                         kv_capacity_tokens=kv_capacity_tokens, max_num_seqs=max_num_seqs)

    @property
    def load(self) -> int:
        return len(self.arrivals) + len(self._leaves)

    def offer(self, job: Job, now: float) -> None:
        """A new request from the front dispatcher."""
        job.encode_worker = job.prefill_worker = job.decode_worker = self.index
        job.route = "local"
        self.load_tokens += job.kv_tokens
        self.arrivals.append(job)
        self.rec.log(now, "arrive", self.index, (job,))
        self.rec.queue(self._queue_slot, now, len(self.arrivals))
        if self._phase is None and len(self.arrivals) == 1 and self._fits(job):
            self._cut(now)

    def step(self, now: float) -> None:
        if self._phase is not None and self._phase_end <= now:
            self._finish_phase(self._phase_end)
        super().step(now)

    def next_due(self) -> float:
        return min(self._seg_end, self._phase_end)

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
        enc_end = now + encode_s
        for job in batch:
            job.encode_start_s, job.encode_end_s, job.prefill_start_s = now, enc_end, enc_end
            job.encode_batch_size = len(batch) if items else None
        if items:
            mm = sum(job.mm_tokens for job in batch)
            self.rec.batch("encode", self.index, now, enc_end, len(batch), mm, 1.0)
        self._phase, self._phase_start = batch, enc_end
        self._phase_end = enc_end + prefill_s
        self.rec.log(now, "phase_start", self.index, batch)
        self.rec.queue(self._queue_slot, now, len(arrivals))

    def _finish_phase(self, now: float) -> None:
        batch = self._phase
        assert batch is not None
        self._phase, self._phase_end = None, math.inf
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
