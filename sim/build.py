"""Building the model: workers, GPUs, batchers and routers for one deployment.

GPUs are numbered by the deployment's :class:`~easerve_core.placement.Layout`:
on one node in stage order, encode workers first (worker i holds GPUs
``i*tp .. i*tp+tp-1``), then remote Prefill, then Decode; an aggregated
deployment numbers its instances the same way; on several nodes, node ``n``
holds GPUs ``n*gpus_per_node ..``. Batchers and routers come
from :mod:`easerve_core.policies` (its seeding rule is the live executor's
too). With ``[sim.host] num_host_cores`` one :class:`~sim.host.HostCPU` is
shared by every worker (each aggregated instance too). With ``[sim.host]
stall_s`` each worker gets its one-off pause from one
:class:`~sim.stalls.StallPlan` of the run's seed, drawn in build order (encode
workers, Prefill, Decode). With ``[sim.host] warmup_<lane>_s`` each worker
gets its own :class:`~sim.warmup.Warmup` per lane. When the profile knows host
preprocessing (:mod:`sim.preprocess`), every encode worker and every
aggregated instance gets its own stage of ``SimOptions.num_preprocess_threads``
threads in front of it; an aggregated instance is then dispatched to through a
:class:`~sim.preprocess.PreprocessedFront`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from easerve_core import Cluster, Deployment, ParallelProfile, SMShareTable, StageProfile
from easerve_core.batcher import Batcher
from easerve_core.placement import Layout
from easerve_core.policies import make_batcher, make_routers
from easerve_core.profile import profile_for_tp
from easerve_core.router import Router
from sim.aggregated import AggregatedWorker
from sim.chunked import ChunkedEngine
from sim.clock import SimEnvironment
from sim.decode import DecodeWorker
from sim.encode import EncodeWorker
from sim.feasibility import Capacities
from sim.host import HostCPU
from sim.host_effects import HostEffects
from sim.job import Job
from sim.options import SimOptions
from sim.pipeline import Pipeline
from sim.prefill import PrefillWorker
from sim.preprocess import PreprocessedFront, make_preprocess
from sim.recorder import Recorder
from sim.sharing import SharedGPU
from sim.stalls import Stall, make_stall_plan
from sim.stepsum import StepClock
from sim.warmup import make_warmup


class WorkerKit:
    """What building one worker of a disaggregated run takes besides its place and policies.

    :func:`build_disaggregated` builds every starting worker with it, the
    roster (:mod:`sim.roster`) every worker that joins a stage mid-run. A
    worker built with ``fresh`` carries the fresh process's warm-ups
    (``[sim.host] warmup_<lane>_s``); a re-roled one does not (its
    reconfiguration cost holds the engine's warm-up). Decode step clocks are
    shared per TP.
    """

    def __init__(self, env: SimEnvironment, recorder: Recorder, pipe: Pipeline, *,
                 profile: StageProfile | ParallelProfile, table: SMShareTable, options: SimOptions,
                 cluster: Cluster) -> None:
        self.env, self.recorder, self.pipe, self.cluster = env, recorder, pipe, cluster
        self.profile, self.table, self.options = profile, table, options
        self.host = make_host(options.host)
        self._clocks: dict[int, StepClock] = {}

    def encode(self, d: Deployment, index: int, gpus: tuple[int, ...], *, batcher: Batcher[Job],
               router: Router, stall: Stall | None = None, fresh: bool = True) -> EncodeWorker:
        effects, options = self.options.host, self.options
        enc_profile = profile_for_tp(self.profile, d.encode.tp)
        colocated = None if self.host is None else effects.colocated_speed_frac
        gpu = SharedGPU(d.sm_sharing, table=self.table, static_encode_share=d.static_encode_share,
                        time_slice_overhead_frac=options.time_slice_overhead_frac,
                        host_colocated_speed_frac=colocated)
        return EncodeWorker(
            self.env, index, gpus, self.recorder, pipe=self.pipe, batcher=batcher,
            router=router, gpu=gpu, encode_profile=enc_profile, lm_profile=enc_profile,
            prefill_max_batch_tokens=options.prefill_max_batch_tokens,
            encode_only=options.encode_only, coalesce=options.coalesce_waiting_batches,
            host=self.host, block_intake=options.encode_intake_blocking, stall=stall,
            warmup=make_warmup(effects, "encode") if fresh else None,
            prefill_warmup=make_warmup(effects, "local_prefill") if fresh else None,
            preprocess=make_preprocess(self.env, enc_profile, options.num_preprocess_threads,
                                       recorder=self.recorder, worker=index, stage="encode"))

    def prefill(self, d: Deployment, index: int, gpus: tuple[int, ...], *, stall: Stall | None = None,
                fresh: bool = True) -> PrefillWorker:
        return PrefillWorker(self.env, index, gpus, self.recorder, pipe=self.pipe,
                             profile=profile_for_tp(self.profile, d.prefill.tp),
                             prefill_max_batch_tokens=self.options.prefill_max_batch_tokens,
                             chunk_tokens=(self.options.scheduler.step_token_budget
                                           if self.options.scheduler.prefill_chunked else None),
                             host=self.host, stall=stall,
                             warmup=make_warmup(self.options.host, "prefill") if fresh else None)

    def decode(self, d: Deployment, index: int, gpus: tuple[int, ...], *, kv_capacity_tokens: int | None,
               stall: Stall | None = None, fresh: bool = True) -> DecodeWorker:
        tp = d.decode.tp
        clock = self._clocks.get(tp)
        if clock is None:
            clock = self._clocks[tp] = StepClock(profile_for_tp(self.profile, tp))
        effects = self.options.host
        common: dict[str, Any] = dict(
            pipe=self.pipe, clock=clock, kv_capacity_tokens=kv_capacity_tokens,
            max_num_seqs=d.max_num_decode_seqs, host=self.host, join_s=effects.decode_join_s,
            leave_s=effects.decode_leave_s, join_more_s=effects.decode_join_more_s, stall=stall,
            warmup=make_warmup(effects, "decode") if fresh else None)
        sched = self.options.scheduler
        if sched.decode_kv == "grow":
            return ChunkedEngine(self.env, index, gpus, self.recorder, stage="decode",
                                 profile=profile_for_tp(self.profile, tp), encode_profile=None,
                                 step_token_budget=sched.step_token_budget, **common)
        return DecodeWorker(self.env, index, gpus, self.recorder, **common)


def build_disaggregated(kit: WorkerKit, *, deployment: Deployment, caps: Capacities, seed: int,
                        layout: Layout) -> list[EncodeWorker]:
    """Encode, remote Prefill and Decode workers on ``layout``'s GPUs, wired into ``kit.pipe``."""
    d = deployment
    routers = make_routers(d, seed)
    stalls = make_stall_plan(kit.options.host, seed)
    encoders = [kit.encode(d, i, gpus, batcher=make_batcher(d), router=routers[i],
                           stall=None if stalls is None else stalls.draw("encode"))
                for i, gpus in enumerate(layout.encode)]
    kit.pipe.prefill_workers = [
        kit.prefill(d, i, gpus, stall=None if stalls is None else stalls.draw("prefill"))
        for i, gpus in enumerate(layout.prefill)]
    kit.pipe.decode_workers = [
        kit.decode(d, i, gpus, kv_capacity_tokens=caps.decode,
                   stall=None if stalls is None else stalls.draw("decode"))
        for i, gpus in enumerate(layout.decode)]
    return encoders


def make_host(effects: HostEffects) -> HostCPU | None:
    """The shared host CPU model, or None when ``num_host_cores`` is 0 (off)."""
    if not effects.shares_cores:
        return None
    return HostCPU(effects.num_host_cores, background_cores=effects.background_cores)


def build_aggregated(env: SimEnvironment, recorder: Recorder, pipe: Pipeline, *,
                     deployment: Deployment, profile: StageProfile | ParallelProfile,
                     caps: Capacities, options: SimOptions, seed: int,
                     layout: Layout) -> Sequence[AggregatedWorker | ChunkedEngine | PreprocessedFront]:
    """One aggregated instance per ``decode`` worker, sharing the host model when there is one,
    each behind its preprocessing stage when the profile knows host preprocessing."""
    d = deployment
    lm = profile_for_tp(profile, d.decode.tp)
    clock = StepClock(lm)
    effects = options.host
    host = make_host(effects)
    stalls = make_stall_plan(effects, seed)
    sched = options.scheduler

    def instance(i: int) -> AggregatedWorker | ChunkedEngine:
        common: dict[str, Any] = dict(
            pipe=pipe, clock=clock, kv_capacity_tokens=caps.decode, max_num_seqs=d.max_num_decode_seqs,
            profile=lm, encode_profile=lm, host=host, join_s=effects.decode_join_s,
            leave_s=effects.decode_leave_s, join_more_s=effects.decode_join_more_s,
            stall=None if stalls is None else stalls.draw("decode"), warmup=make_warmup(effects, "decode"),
            encode_warmup=make_warmup(effects, "encode"), prefill_warmup=make_warmup(effects, "prefill"))
        if sched.chunked_prefill:
            return ChunkedEngine(env, i, layout.decode[i], recorder,
                                 step_token_budget=sched.step_token_budget,
                                 encoder_budget_tokens=sched.encoder_budget, **common)
        return AggregatedWorker(env, i, layout.decode[i], recorder,
                                prefill_max_batch_tokens=options.prefill_max_batch_tokens, **common)

    fronts: list[AggregatedWorker | ChunkedEngine | PreprocessedFront] = []
    for worker in map(instance, range(d.decode.num_workers)):
        stage = make_preprocess(env, lm, options.num_preprocess_threads, recorder=recorder,
                                worker=worker.index, stage="aggregated")
        fronts.append(worker if stage is None else PreprocessedFront(worker, stage))
    return fronts
