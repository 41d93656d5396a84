"""``simulate``: run one deployment on one request stream and collect the result.

The model (docs/simulator.md): a front dispatcher hands each request, at its
arrival time, to an encode worker (round-robin or least-loaded; for the
aggregated baseline, to an LM instance). Requests that can never fit the KV
memory of the path they would take are ``rejected`` up front with an error
and never enter the model. Everything else is the workers' processes.

Tie-break order of simultaneous events: SimPy runs events due at one instant
in the order they were scheduled (all of ours share one priority), so the
order is fixed by the code and the inputs, never by chance. Requests arriving
at one instant are dispatched in ``(arrival_s, request_id)`` order, all
before any worker reacts to them; each worker's own order within a step is
in its module docstring. The exact-trace tests in tests/sim pin it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from typing import Any

import simpy

from easerve_core import (
    Architecture,
    Cluster,
    Deployment,
    ParallelProfile,
    Request,
    SMShareTable,
    StageProfile,
    Status,
)
from easerve_core.profile import profile_for_tp
from easerve_core.sm_share import derive_table
from sim.build import build_aggregated, build_disaggregated
from sim.feasibility import Capacities, check_memory, kv_capacities
from sim.link import Link
from sim.options import SimOptions
from sim.pipeline import Job, Pipeline, handoff_rng
from sim.recorder import Recorder
from sim.result import SimResult, collect


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes."""

    def __init__(self) -> None:
        super().__init__()
        self.num_events = 0

    def step(self) -> None:
        self.num_events += 1
        super().step()


def _sorted_requests(requests: Sequence[Request]) -> list[Request]:
    ids = [r.request_id for r in requests]
    if len(set(ids)) != len(ids):
        raise ValueError("requests: request_id values must be unique")
    return sorted(requests, key=lambda r: (r.arrival_s, r.request_id))


def _rejection(job: Job, caps: Capacities, deployment: Deployment) -> str:
    """Why ``job`` can never be served on this deployment ('' if it can)."""
    if caps.decode is not None and job.kv_tokens > caps.decode:
        return (f"needs {job.kv_tokens} KV tokens (input + output) but a decode worker holds "
                f"{caps.decode}")
    if deployment.architecture is Architecture.AGGREGATED:
        return ""
    paths = []
    if deployment.remote_fraction > 0:
        paths.append(("remote prefill", caps.remote_prefill))
    if deployment.has_local_prefill:
        paths.append(("local prefill", caps.local_prefill))
    for name, cap in paths:
        if cap is not None and job.input_tokens > cap:
            return f"needs {job.input_tokens} KV tokens for prefill but a {name} worker holds {cap}"
    return ""


def _sm_table(deployment: Deployment, profile: StageProfile | ParallelProfile,
              requests: Sequence[Request], given: SMShareTable | None) -> tuple[SMShareTable, str]:
    if given is not None:
        return given, "given"
    own = getattr(profile, "sm_share_table", None)
    if isinstance(own, SMShareTable):
        return own, "profile"
    items = sorted(r.mm_tokens_per_item for r in requests if r.mm_tokens_per_item)
    typical = items[len(items) // 2] if items else ()
    size = max(1, deployment.max_encode_batch)
    if not typical:
        return SMShareTable({1: 1.0}), "derived"
    encode = profile_for_tp(profile, deployment.encode.tp)
    return derive_table(encode, typical, range(1, size + 1)), "derived"


def _dispatcher(env: simpy.Environment, jobs: list[Job], workers: Sequence[Any],
                policy: str, delay_s: float = 0.0) -> Generator[simpy.Event, object, None]:
    n = len(workers)
    for i, job in enumerate(jobs):
        at = job.req.arrival_s + delay_s if delay_s else job.req.arrival_s
        if at > env.now:
            yield env.timeout(at - env.now)
        worker = workers[i % n] if policy == "round-robin" else min(workers, key=_load)
        worker.offer(job, at)


def _load(worker: Any) -> tuple[int, int]:
    return (worker.load, worker.index)


def simulate(deployment: Deployment, requests: Sequence[Request],
             profile: StageProfile | ParallelProfile, *, cluster: Cluster, seed: int = 0,
             options: SimOptions | None = None, sm_share_table: SMShareTable | None = None,
             trace: list[tuple[Any, ...]] | None = None,
             progress: Callable[[int], None] | None = None) -> SimResult:
    """Simulate ``deployment`` serving ``requests`` (see the module docstring).

    Args:
        deployment: the deployment (apply a preset first for a baseline).
        requests: the request stream; any order, unique ids.
        profile: any :class:`StageProfile`, or a :class:`ParallelProfile` for TP and memory.
        cluster: the cluster; the deployment must fit it.
        seed: seeds the random policies (``router = "random"``).
        options: simulator knobs (:class:`SimOptions`).
        sm_share_table: the SM-share table for ``dynamic`` sharing and for encode
            occupancy; default: the profile's own, else derived from the profile.
        trace: if a list, receives ``(time_s, what, worker, request_ids)`` tuples.
        progress: called with 1 each time a request finishes.
    """
    options = options or SimOptions()
    deployment.check_fits(cluster)
    check_memory(deployment, profile)
    ordered = _sorted_requests(requests)
    caps = kv_capacities(deployment, profile)
    table, table_source = _sm_table(deployment, profile, ordered, sm_share_table)
    env = CountingEnvironment()
    recorder = Recorder(num_gpus=cluster.num_gpus, utilization=options.record.utilization,
                        queues=options.record.queues, trace=trace, progress=progress)
    host = options.host
    quantiles = (host.handoff_prefill_quantiles_s, host.handoff_decode_quantiles_s)
    pipe = Pipeline(link=Link(env, cluster), recorder=recorder,
                    encode_profile=profile_for_tp(profile, max(1, deployment.encode.tp)),
                    handoff_prefill_s=host.handoff_prefill_s, handoff_decode_s=host.handoff_decode_s,
                    handoff_busy_s=host.handoff_busy_s,
                    handoff_quantiles=quantiles, rng=handoff_rng(quantiles, seed))
    front: Sequence[Any]
    if deployment.architecture is Architecture.AGGREGATED:
        front = build_aggregated(env, recorder, pipe, deployment=deployment, profile=profile,
                                 caps=caps, options=options)
    else:
        front = build_disaggregated(env, recorder, pipe, deployment=deployment, profile=profile,
                                    table=table, caps=caps, options=options, seed=seed)
    jobs, admitted = [Job(r) for r in ordered], []
    for job in jobs:
        why = _rejection(job, caps, deployment)
        if why:
            job.rec.fail(why, status=Status.REJECTED)
            recorder.finished()
        else:
            admitted.append(job)
    env.process(_dispatcher(env, admitted, front, options.dispatch, host.dispatch_latency_s))
    env.run()
    unfinished = len(admitted) - pipe.num_finished
    if unfinished:
        raise RuntimeError(f"simulation ended with {unfinished} request(s) unfinished (a bug)")
    end_s = max((j.rec.finish_s for j in admitted if not math.isnan(j.rec.finish_s)), default=0.0)
    meta = {
        "num_events": env.num_events,
        "events_per_request": env.num_events / max(1, len(jobs)),
        "deployment": deployment.label(),
        "sm_share_table": table.to_dict(),
        "sm_share_table_source": table_source,
        "link_transfers": pipe.link.num_transfers,
        "link_bytes": pipe.link.bytes_moved,
        "queues": recorder.queue_summary(end_s),
        "seed": seed,
    }
    config = {"deployment": deployment.to_dict(), "cluster": _cluster_dict(cluster),
              "sim": options.to_dict(), "seed": seed}
    return collect(jobs, recorder, config=config, meta=meta)


def _cluster_dict(cluster: Cluster) -> dict[str, Any]:
    return {k: getattr(cluster, k) for k in ("gpu", "num_gpus", "link_bytes_per_s",
                                             "link_latency_s", "num_links")}


__all__ = ["CountingEnvironment", "simulate"]
