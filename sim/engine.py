"""``simulate``: run one plan (a deployment on a request stream) and collect the result.

The model (docs/simulator.md): a front dispatcher hands each request, at its
arrival time, to an encode worker (round-robin or least-loaded; for the
aggregated baseline, to an LM instance). Requests that can never fit the KV
memory of the path they would take are ``rejected`` up front with an error
and never enter the model. Everything else is the workers' loops (:mod:`sim.worker`).

Tie-break order of simultaneous events: SimPy runs events due at one instant
in the order they were scheduled (all of ours share one priority), so the
order is fixed by the code and the inputs, never by chance. Requests arriving
at one instant are dispatched in ``(arrival_s, request_id)`` order, all
before any worker reacts to them; each worker's own order within a step is
in its module docstring. The exact-trace tests in tests/sim pin it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from easerve_core import Architecture, Deployment, ParallelProfile, Request, SMShareTable, StageProfile
from easerve_core.plan import RunPlan
from easerve_core.profile import profile_for_tp
from sim.build import WorkerKit, build_aggregated, build_disaggregated
from sim.clock import SimEnvironment
from sim.control import ControllerLike, SimSteering
from sim.feasibility import Capacities, check_memory, kv_capacities
from sim.job import Job, RecordTable
from sim.network import make_link
from sim.options import SimOptions, options_for
from sim.pipeline import Pipeline, handoff_rng
from sim.recorder import Recorder
from sim.result import SimResult, collect
from sim.roster import ReconfigCost, Roster, SteeredPipeline
from sim.sm_tables import follow


def _rejection(req: Request, caps: Capacities, deployment: Deployment) -> str:
    """Why ``req`` can never be served on this deployment ('' if it can)."""
    kv_tokens = req.input_tokens + req.output_tokens  # what a decode worker reserves
    if caps.decode is not None and kv_tokens > caps.decode:
        return (f"needs {kv_tokens} KV tokens (input + output) but a decode worker holds "
                f"{caps.decode}")
    if deployment.architecture is Architecture.AGGREGATED:
        return ""
    paths = []
    if deployment.remote_fraction > 0:
        paths.append(("remote prefill", caps.remote_prefill))
    if deployment.has_local_prefill:
        paths.append(("local prefill", caps.local_prefill))
    for name, cap in paths:
        if cap is not None and req.input_tokens > cap:
            return f"needs {req.input_tokens} KV tokens for prefill but a {name} worker holds {cap}"
    return ""


class _Dispatcher:
    """The front end: each admitted request, at its arrival, as a new job to an encode worker
    (or LM instance), by ``policy``.

    Callbacks with the events of the generator process it replaces: its start
    (ahead of ordinary events), one timeout per arrival later than now, and its
    end (an event with nothing to do, as a finished process schedules).
    """

    def __init__(self, env: SimEnvironment, requests: Sequence[Request], admitted: list[int],
                 workers: Sequence[Any], policy: str, delay_s: float = 0.0) -> None:
        self.env, self.requests, self.admitted, self.workers = env, requests, admitted, workers
        self.round_robin = policy == "round-robin"
        self.delay_s = delay_s
        self._next = 0  # the position in ``admitted`` of the next request to hand over
        self._waited = False  # a timeout for that request's arrival has run
        env.call_first(self._resume)

    def _arrival_s(self, i: int) -> float:
        req = self.requests[self.admitted[i]]
        return req.arrival_s + self.delay_s if self.delay_s else req.arrival_s

    def _resume(self, _event: Any) -> None:
        env, i, n = self.env, self._next, len(self.admitted)
        while i < n:
            at = self._arrival_s(i)
            if at > env.now and not self._waited:
                self._next, self._waited = i, True
                env.call_later(at - env.now, self._resume)
                return
            self._waited = False
            self._offer(i, at)
            i += 1
        self._next = n
        env.call_later(0, _ended)

    def _offer(self, i: int, at: float) -> None:
        workers = self.workers
        worker = workers[i % len(workers)] if self.round_robin else min(workers, key=_load)
        index = self.admitted[i]
        worker.offer(Job(self.requests[index], index), at)


class _SteeredDispatcher(_Dispatcher):
    """The front end of a run with a controller: it tells the controller of each arrival, and
    parks a request when no encode worker serves (sim.roster)."""

    def attach(self, steering: SimSteering) -> None:
        self.steering = steering
        # once per request: the controller's arrival and the stamps, without a call between
        self._arrive, self._roster = steering.controller.arrive, steering.roster
        self._controller = steering.controller
        self._band_at, self._deployment_at = steering.band_at, steering.deployment_at
        table = steering.controller.table
        # a table planned along a weighted signal (easerve_core.controller.SIGNALS) weighs each arrival
        self._weights = (None if table.signal == "requests"
                         else [table.weight(r) for r in self.requests])

    def _offer(self, i: int, at: float) -> None:
        index = self.admitted[i]
        weights = self._weights
        if weights is None:  # the band and the deployment each request arrives under
            self._arrive(at)
        else:
            self._arrive(at, weights[index])
        self._band_at[index] = self._controller.band
        self._deployment_at[index] = self._roster.generation
        job = Job(self.requests[index], index)
        workers = self.workers
        if not workers:
            self._roster.parked.append(job)
            return
        worker = workers[i % len(workers)] if self.round_robin else min(workers, key=_load)
        worker.offer(job, at)


def _ended(_event: Any) -> None:
    """The dispatcher's end event: nothing to do."""


def _load(worker: Any) -> tuple[int, int]:
    return (worker.load, worker.index)


def simulate(plan: RunPlan, profile: StageProfile | ParallelProfile, *, options: SimOptions | None = None,
             trace: list[tuple[Any, ...]] | None = None, progress: Callable[[int], None] | None = None,
             controller: ControllerLike | None = None, reconfiguration_s: float | ReconfigCost | None = None,
             make_before_break: bool = True, drain_deadline_s: float | None = None,
             concurrent_steps: bool = False, serve_first: bool = False, linger: bool = False,
             interim_share: bool = False, sm_tables: Sequence[tuple[float, SMShareTable]] = ()) -> SimResult:
    """Simulate ``plan`` (see the module docstring).

    Args:
        plan: the resolved run (:mod:`easerve_core.plan`): deployment with its
            preset applied, cluster, requests, SM-share table, seed.
        profile: any :class:`StageProfile`, or a :class:`ParallelProfile` for TP and memory.
        options: simulator knobs; default: the plan's ``[sim]`` table
            (:func:`sim.options.options_for`).
        trace: if a list, receives ``(time_s, what, worker, request_ids)`` tuples.
        progress: called with 1 each time a request finishes.
        controller: an online controller (:mod:`easerve_core.controller`) that re-plans the
            run as it goes (:mod:`sim.control`); the run starts on the plan's deployment.
            Off by default: then nothing of it runs.
        reconfiguration_s: what a re-roled GPU group pays before it serves again, in
            seconds, or ``(role, tp) -> seconds``
            (:func:`calibration.reconfig.reconfiguration_s` of the model and GPU); needed
            with ``controller``.
        make_before_break: re-role as :mod:`easerve_core.moves` plans (new workers warm on free
            GPUs before the ones they replace drain; staged one worker at a time without a free
            GPU); False: the build's layout, every leaving worker drained at once (the move
            before 2026-12: docs/controller.md).
        drain_deadline_s, concurrent_steps, serve_first, linger, interim_share: with
            ``controller``, how a move runs: the knobs of those names of :mod:`sim.roster` (its
            docstring tells each; ``serve_first`` is :func:`easerve_core.moves.plan_moves`'s); off
            by default.
        sm_tables: ``(at_s, table)``: every encoder's SM-share table from ``at_s`` (:mod:`sim.sm_tables`).
    """
    options = options or options_for(plan)
    deployment, cluster, seed = plan.deployment, plan.cluster, plan.seed
    check_memory(deployment, profile)
    caps = kv_capacities(deployment, profile)
    deployments = [deployment]
    if controller is not None:
        deployments += _check_controller(controller, reconfiguration_s, deployment, cluster, profile)
    env = SimEnvironment()
    recorder = Recorder(utilization=options.record.utilization,
                        queues=options.record.queues, trace=trace, progress=progress)
    host = options.host
    quantiles = (host.handoff_prefill_quantiles_s, host.handoff_decode_quantiles_s)
    requests = plan.requests
    records = RecordTable(requests)
    layout = deployment.layout(cluster)
    pipe_class = Pipeline if controller is None else SteeredPipeline
    pipe = pipe_class(link=make_link(env, cluster, deployment), recorder=recorder, records=records,
                      encode_profile=profile_for_tp(profile, max(1, deployment.encode.tp)),
                      handoff_prefill_s=host.handoff_prefill_s, handoff_decode_s=host.handoff_decode_s,
                      handoff_busy_s=host.handoff_busy_s,
                      handoff_quantiles=quantiles, rng=handoff_rng(quantiles, seed))
    front: Sequence[Any]
    kit = None
    if deployment.architecture is Architecture.AGGREGATED:
        front = build_aggregated(env, recorder, pipe, deployment=deployment, profile=profile,
                                 caps=caps, options=options, seed=seed, layout=layout)
    else:
        kit = WorkerKit(env, recorder, pipe, profile=profile, table=plan.sm_table, options=options,
                        cluster=cluster)
        front = build_disaggregated(kit, deployment=deployment, caps=caps, seed=seed, layout=layout)
    # with a controller, a request any band's deployment could never serve is refused up front
    others = [(d, kv_capacities(d, profile)) for d in dict.fromkeys(deployments[1:]) if d != deployment]
    admitted = _admit(requests, [(deployment, caps), *others], records, recorder)
    steering = None
    if controller is None:
        _Dispatcher(env, requests, admitted, front, options.dispatch, host.dispatch_latency_s)
    else:
        assert kit is not None and reconfiguration_s is not None and isinstance(front, list)
        cost = reconfiguration_s if callable(reconfiguration_s) else _constant(float(reconfiguration_s))
        roster = Roster(kit, deployment=deployment, encoders=front, profile=profile, seed=seed,
                        reconfig_s=cost, make_before_break=make_before_break,
                        drain_deadline_s=drain_deadline_s, concurrent_steps=concurrent_steps,
                        serve_first=serve_first, linger=linger, interim_share=interim_share)
        steering = SimSteering(env, controller, roster, slo=plan.slo, num_requests=len(requests),
                            num_admitted=len(admitted))
        dispatcher = _SteeredDispatcher(env, requests, admitted, front, options.dispatch,
                                        host.dispatch_latency_s)
        dispatcher.attach(steering)
    if sm_tables:
        follow(env, sm_tables, kit, front, None if steering is None else steering.roster)
    env.run_all()
    unfinished = len(admitted) - pipe.num_finished
    if unfinished:
        raise RuntimeError(f"simulation ended with {unfinished} request(s) unfinished (a bug)")
    meta = _run_meta(plan, env, pipe, recorder, records.last_finish_s())
    if steering is not None:
        meta["controller"] = steering.meta()
    # the plan's resolved config (deployment, cluster and seed already its own) and the engine's options
    result = collect(records, recorder, config={**plan.config, "sim": options.to_dict()}, meta=meta)
    if steering is not None:
        result = replace(result, records=steering.stamp(result.records, [r.request_id for r in requests]))
    return result


def _admit(requests: Sequence[Request], deployments: Sequence[tuple[Deployment, Capacities]],
           records: RecordTable, recorder: Recorder) -> list[int]:
    """The indices of the requests the run serves, in order; each of the others is rejected
    with the first reason of ``deployments`` (``(deployment, KV capacities)``, the run's own
    first) and counts as finished."""
    admitted = []
    for index, req in enumerate(requests):
        why = next((w for d, c in deployments if (w := _rejection(req, c, d))), "")
        if why:
            records.reject(index, why)
            recorder.finished()
        else:
            admitted.append(index)
    return admitted


def _run_meta(plan: RunPlan, env: SimEnvironment, pipe: Pipeline, recorder: Recorder,
              end_s: float) -> dict[str, Any]:
    """What a finished run says of itself beside its records: the plan, events, link, queues."""
    return {
        **plan.describe(),
        "num_events": env.num_events,
        "events_per_request": env.num_events / max(1, len(plan.requests)),
        "link_transfers": pipe.link.num_transfers,
        "link_bytes": pipe.link.bytes_moved,
        **pipe.link.meta(),
        "queues": recorder.queue_summary(end_s),
    }


def _check_controller(controller: ControllerLike, reconfiguration_s: float | ReconfigCost | None,
                      deployment: Deployment, cluster: Any,
                      profile: StageProfile | ParallelProfile) -> list[Deployment]:
    """The plan table's deployments, each checked as the plan's is (ValueError naming the band)."""
    if deployment.architecture is Architecture.AGGREGATED:
        raise ValueError("controller: the simulator re-plans disaggregated deployments only")
    if reconfiguration_s is None:
        raise ValueError("controller: give reconfiguration_s (seconds, or (role, tp) -> seconds)")
    if not callable(reconfiguration_s) and not float(reconfiguration_s) >= 0:
        raise ValueError(f"reconfiguration_s must be >= 0, got {reconfiguration_s!r}")
    out = []
    for i, band in enumerate(controller.table.bands):
        d = band.deployment
        try:
            if d.architecture is Architecture.AGGREGATED:
                raise ValueError("an aggregated deployment cannot be re-roled to")
            d.check_fits(cluster)
            check_memory(d, profile)
        except ValueError as exc:
            raise ValueError(f"controller: plan table band {i} ({band.rate_hz:g} req/s): {exc}") from None
        out.append(d)
    return out


def _constant(seconds: float) -> ReconfigCost:
    def cost(_role: str, _tp: int) -> float:
        return seconds
    return cost


__all__ = ["simulate"]
