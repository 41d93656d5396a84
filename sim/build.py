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
gets its own :class:`~sim.warmup.Warmup` per lane.
"""

from __future__ import annotations

from collections.abc import Sequence

from easerve_core import Deployment, ParallelProfile, SMShareTable, StageProfile
from easerve_core.placement import Layout
from easerve_core.policies import make_batcher, make_routers
from easerve_core.profile import profile_for_tp
from sim.aggregated import AggregatedWorker
from sim.clock import SimEnvironment
from sim.decode import DecodeWorker
from sim.encode import EncodeWorker
from sim.feasibility import Capacities
from sim.host import HostCPU
from sim.host_effects import HostEffects
from sim.options import SimOptions
from sim.pipeline import Pipeline
from sim.prefill import PrefillWorker
from sim.recorder import Recorder
from sim.sharing import SharedGPU
from sim.stalls import make_stall_plan
from sim.stepsum import StepClock
from sim.warmup import make_warmup


def build_disaggregated(env: SimEnvironment, recorder: Recorder, pipe: Pipeline, *,
                        deployment: Deployment, profile: StageProfile | ParallelProfile,
                        table: SMShareTable, caps: Capacities, options: SimOptions,
                        seed: int, layout: Layout) -> list[EncodeWorker]:
    """Encode, remote Prefill and Decode workers, wired into ``pipe``."""
    d = deployment
    enc_profile = profile_for_tp(profile, d.encode.tp)
    routers = make_routers(d, seed)
    effects = options.host
    host = make_host(effects)
    colocated = None if host is None else effects.colocated_speed_frac
    stalls = make_stall_plan(effects, seed)
    encoders = []
    for i in range(d.encode.num_workers):
        gpu = SharedGPU(d.sm_sharing, table=table, static_encode_share=d.static_encode_share,
                        time_slice_overhead_frac=options.time_slice_overhead_frac,
                        host_colocated_speed_frac=colocated)
        encoders.append(EncodeWorker(
            env, i, layout.encode[i], recorder, pipe=pipe, batcher=make_batcher(d),
            router=routers[i], gpu=gpu, encode_profile=enc_profile, lm_profile=enc_profile,
            prefill_max_batch_tokens=options.prefill_max_batch_tokens,
            encode_only=options.encode_only, coalesce=options.coalesce_waiting_batches,
            host=host, block_intake=options.encode_intake_blocking,
            stall=None if stalls is None else stalls.draw("encode"),
            warmup=make_warmup(effects, "encode"), prefill_warmup=make_warmup(effects, "local_prefill")))
    pf_profile = profile_for_tp(profile, d.prefill.tp)
    pipe.prefill_workers = [
        PrefillWorker(env, i, layout.prefill[i], recorder, pipe=pipe,
                      profile=pf_profile, prefill_max_batch_tokens=options.prefill_max_batch_tokens,
                      host=host, stall=None if stalls is None else stalls.draw("prefill"),
                      warmup=make_warmup(effects, "prefill"))
        for i in range(d.prefill.num_workers)]
    clock = StepClock(profile_for_tp(profile, d.decode.tp))
    pipe.decode_workers = [
        DecodeWorker(env, i, layout.decode[i], recorder, pipe=pipe, clock=clock,
                     kv_capacity_tokens=caps.decode, max_num_seqs=d.max_num_decode_seqs, host=host,
                     join_s=effects.decode_join_s, leave_s=effects.decode_leave_s,
                     join_more_s=effects.decode_join_more_s,
                     stall=None if stalls is None else stalls.draw("decode"),
                     warmup=make_warmup(effects, "decode"))
        for i in range(d.decode.num_workers)]
    return encoders


def make_host(effects: HostEffects) -> HostCPU | None:
    """The shared host CPU model, or None when ``num_host_cores`` is 0 (off)."""
    if not effects.shares_cores:
        return None
    return HostCPU(effects.num_host_cores, background_cores=effects.background_cores)


def build_aggregated(env: SimEnvironment, recorder: Recorder, pipe: Pipeline, *,
                     deployment: Deployment, profile: StageProfile | ParallelProfile,
                     caps: Capacities, options: SimOptions, seed: int,
                     layout: Layout) -> Sequence[AggregatedWorker]:
    """One aggregated instance per ``decode`` worker, sharing the host model when there is one."""
    d = deployment
    lm = profile_for_tp(profile, d.decode.tp)
    clock = StepClock(lm)
    effects = options.host
    host = make_host(effects)
    stalls = make_stall_plan(effects, seed)
    return [AggregatedWorker(env, i, layout.decode[i], recorder, pipe=pipe, clock=clock,
                             kv_capacity_tokens=caps.decode, max_num_seqs=d.max_num_decode_seqs,
                             profile=lm, encode_profile=lm,
                             prefill_max_batch_tokens=options.prefill_max_batch_tokens,
                             host=host, join_s=effects.decode_join_s, leave_s=effects.decode_leave_s,
                             join_more_s=effects.decode_join_more_s,
                             stall=None if stalls is None else stalls.draw("decode"),
                             warmup=make_warmup(effects, "decode"),
                             encode_warmup=make_warmup(effects, "encode"),
                             prefill_warmup=make_warmup(effects, "prefill"))
            for i in range(d.decode.num_workers)]
