"""What the two aggregated engines share: a Decode worker that also encodes and prefills itself.

:class:`~sim.aggregated.AggregatedWorker` (prefill-first phases) and
:class:`~sim.chunked.ChunkedEngine` (vLLM's chunked steps) both price the
encode and prefill of the requests they take on their own profiles, carry
those lanes' warm-ups (``warmup_encode_s``, ``warmup_prefill_s``), and run
their non-decode work as a phase whose end is due besides the decode
segment's. :class:`LocalEngine` holds that construction and that due time;
each engine keeps its own scheduling.
"""

from __future__ import annotations

from easerve_core import StageProfile
from sim.clock import SimEnvironment
from sim.decode import DecodeWorker
from sim.host import HostCPU
from sim.pipeline import Pipeline
from sim.recorder import Recorder
from sim.stalls import Stall
from sim.stepsum import StepClock
from sim.warmup import Warmup


class LocalEngine(DecodeWorker):
    """A Decode worker with its own encode and prefill (see the module docstring).

    ``profile`` prices its prefill (and decode steps, through ``clock``),
    ``encode_profile`` its encodes (None: it has no encoder); ``encode_warmup`` and
    ``prefill_warmup`` are those lanes' warm-ups; the rest is :class:`~sim.decode.DecodeWorker`'s.
    """

    stage = "aggregated"

    def __init__(self, env: SimEnvironment, index: int, gpus: tuple[int, ...], recorder: Recorder,
                 *, pipe: Pipeline, clock: StepClock, kv_capacity_tokens: int | None,
                 max_num_seqs: int, profile: StageProfile, encode_profile: StageProfile | None,
                 host: HostCPU | None = None, join_s: float = 0.0, leave_s: float = 0.0,
                 join_more_s: float = 0.0, stall: Stall | None = None, warmup: Warmup | None = None,
                 encode_warmup: Warmup | None = None, prefill_warmup: Warmup | None = None) -> None:
        self.profile = profile
        self.encode_profile = encode_profile
        self.encode_warmup = encode_warmup
        self.prefill_warmup = prefill_warmup
        super().__init__(env, index, gpus, recorder, pipe=pipe, clock=clock,
                         kv_capacity_tokens=kv_capacity_tokens, max_num_seqs=max_num_seqs,
                         host=host, join_s=join_s, leave_s=leave_s, join_more_s=join_more_s,
                         stall=stall, warmup=warmup)

    def next_due(self) -> float:
        return min(self._seg_end, self._phase_end)
