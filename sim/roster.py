"""Re-roling GPUs mid-run: which workers serve each stage, their drains and reconfigurations.
The module stays past 300 lines because the :class:`Roster` is one state machine (serve,
drain, linger, evict, retire, join, cancel) whose transitions share its slot tables and its step
queue, and the :class:`SteeredPipeline` reads that state (the serving encoders, the lingering
decoders); splitting them would spread that state across modules.

The online controller's driver (:mod:`sim.control`) hands the :class:`Roster`
each deployment it decides on. The roster lays it out on the GPUs as the
build does (:func:`layout`: stage order encode, remote Prefill, Decode; a
worker's GPUs contiguous) and compares it, slot by slot, with what runs
(docs/simulator.md, "The controller in the simulator"):

* a serving worker with the same GPUs and role in the new layout stays; an
  encode worker takes the new fast knobs at once
  (:func:`easerve_core.policies.retune`: its open micro-batch closes, reason
  ``retune``, and goes to its encoder; new batcher and router);
* every other serving worker **drains**: it leaves its stage's list at once,
  so the front end and the pipeline hand it nothing new, and finishes what it
  holds, including what is already on its way to it; an encode worker's open
  batch closes at once and its local Prefill runs on. It **retires** when it
  holds nothing (:meth:`~sim.worker.Worker.drained`);
* every slot of the new layout that nothing serves **joins**: it waits until
  every draining worker on any of its GPUs retired, then pays the
  reconfiguration cost of its role and TP, then serves as a new worker of its
  stage (the stage's next worker index);
* a slot still joining that the new layout no longer holds is cancelled (it
  never served; the GPUs are free at once).

While no remote Prefill worker serves, an encode worker that holds the LM prefills locally what its
router sends remote, and what an encode worker without the LM hands to remote Prefill goes over the
link to the serving encode worker that holds the LM with the least local Prefill ahead (the route
records say ``local``; before, it waited for the next remote Prefill worker, which a target without
remote Prefill never brings). Any other request handed to a stage that has no serving worker (every
worker of it drains, the new ones are not up) is parked, in order, and handed on when the stage's
first new worker joins: arrivals by the front end, remote prefills and KV caches by the
:class:`SteeredPipeline`. Parked arrivals are shared by the encoders as they join: each takes the
oldest of them, its share of those parked over itself and the encode slots still joining (all when
none is; before, the first took all and, round-robin fed, stayed behind for the phase). So no
request is lost or served twice; KV is never moved. By default a request finishes where it is; with
``drain_deadline_s`` (None: off) a draining Decode worker that still holds sequences that long after
its drain began (0: at once) **evicts** them at the end of its step in progress
(:meth:`sim.decode.DecodeWorker.evict`): each goes to the least-loaded serving Decode worker (or
waits, in order, for the stage's next new one), which recomputes its KV (a prefill of its input and
the tokens made so far, on that worker's TP, at the head of its next segment: vLLM's preemption by
recompute) and decodes the rest; only when the target keeps a Decode worker at least its TP (a
smaller one holds less KV and decodes slower: a TP-4 worker's batch recomputed on a TP-2 one stalls
it longer than the drain it saves, docs/controller.md), else it drains as before. With ``linger``
such a worker, when it leaves Decode with no serving worker and its sequences cannot move, still
takes the KV caches handed to Decode until every sequence it held when its drain began has left
(``SteeredPipeline.lingering``): Decode stays served while the long sequences of the phase before
finish, and goes dark only for the warm-up of the new decoder. With ``interim_share``, while a move
leaves only part of the target's remote Prefill or LM-holding encoders serving, the target's
encoders route at the share that keeps each serving worker's load as the target sets it
(:func:`easerve_core.policies.interim_remote_fraction`; :meth:`Roster._rebalance`), and at the
target's s once all serve. A move's steps run one after the other; with ``concurrent_steps`` a later
step starts beside the running ones when it touches none of their GPUs, nor any GPU of a waiting
step before it, and leaves no stage the target serves without a serving worker that the plan does
not list in its ``unserved`` (``Roster._may_start``)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from easerve_core import Cluster, Deployment, ParallelProfile, SMSharing, StageProfile
from easerve_core.moves import MovePlan, Slot, Step, plan_moves
from easerve_core.policies import interim_remote_fraction, make_batcher, make_router, retune
from easerve_core.profile import profile_for_tp
from easerve_core.worker_choice import least_loaded
from sim.build import WorkerKit
from sim.decode import DecodeWorker
from sim.encode import EncodeWorker
from sim.feasibility import kv_capacities
from sim.job import Job
from sim.pipeline import Pipeline
from sim.worker import Worker

#: (role, tp) -> seconds a GPU group pays to serve in ``role`` (calibration.reconfig.reconfiguration_s)
ReconfigCost = Callable[[str, int], float]
STAGES = ("encode", "prefill", "decode")


def worker_slots(d: Deployment, cluster: Cluster) -> list[Slot]:
    """The workers of ``d`` on ``cluster``'s GPUs (:meth:`Deployment.layout`), in build order."""
    local = d.sm_sharing is not SMSharing.NONE
    places = d.layout(cluster)
    return [Slot(stage, gpus, stage == "encode" and local) for stage in STAGES
            for gpus in getattr(places, stage)]


def slot_of(worker: Worker) -> Slot:
    local = isinstance(worker, EncodeWorker) and worker.gpu.mode is not SMSharing.NONE
    return Slot(worker.stage, worker.gpus, local)


class SteeredPipeline(Pipeline):
    """The pipeline of a run with a controller: hand-offs to a stage with no serving worker
    wait in order in the base pipeline's ``parked_*`` queues (a run without a controller never
    parks), :meth:`unpark` hands them on, and every finish is told ``on_finish``. A remote
    Prefill hand-off while no remote Prefill worker serves goes instead to the serving encode
    worker that holds the LM with the least local Prefill ahead (``encoders``: the roster's
    serving encode workers), which prefills it locally; it parks only when none holds the LM."""

    encoders: Sequence[EncodeWorker] = ()
    #: (worker, mark): draining Decode workers that still take KV caches while none serves, each
    #: until the sequences it held at ``mark`` (:meth:`DecodeWorker.mark`) have left (``linger``)
    lingering: list[tuple[DecodeWorker, int]]

    def park_decode(self, job: Job, now: float, kv_profile: StageProfile, sender: Any = None) -> None:
        lingering = self.lingering
        while lingering:
            worker, mark = lingering[0]
            if worker.holds_before(mark):
                self._kv_to(worker, job, now, kv_profile, sender)
                return
            lingering.pop(0)
        self.parked_decode.append((job, kv_profile))

    def park_prefill(self, job: Job, now: float, sender: Any = None) -> None:
        holders = [e for e in self.encoders if e.local_when_no_remote]
        if not holders:
            self.parked_prefill.append(job)
            return
        holder = min(holders, key=lambda e: (len(e.local_queue) + e.inbound, e.gpus))
        holder.inbound += 1
        nbytes = self.encode_profile.embed_bytes(job.mm_tokens) if job.items else 0
        self._send(holder, job, now, nbytes, self._handoff_s("prefill"), sender)

    def unpark(self, now: float) -> None:
        """Hand on what waits for a stage that has a serving worker again."""
        lm_held = any(e.local_when_no_remote for e in self.encoders)
        while self.parked_prefill and (self.prefill_workers or lm_held):
            self.to_remote_prefill(self.parked_prefill.popleft(), now)
        while self.parked_decode and self.decode_workers:
            job, kv_profile = self.parked_decode.popleft()
            self._kv_to(least_loaded(self.decode_workers), job, now, kv_profile, None)

    def _kv_to(self, worker: Any, job: Job, now: float, kv_profile: StageProfile, sender: Any) -> None:
        """Pipeline.after_prefill's hand-off of a KV cache to ``worker`` (inline there: it runs
        once per request; here only while Decode has no serving worker)."""
        worker.load_tokens += job.kv_tokens
        job.decode_worker = worker.index
        self._send(worker, job, now, kv_profile.kv_bytes(job.input_tokens), self._handoff_s("decode"), sender)


@dataclass(slots=True, eq=False)
class _Joining:
    """A slot of the new layout on its way to serving."""

    slot: Slot
    decision: int
    drain_start_s: float
    waits: list[Worker]
    origins: list[str] = field(default_factory=list)  # the roles of the workers it waited for
    drain_end_s: float = math.nan
    reconfig_s: float = math.nan
    ready_s: float = math.nan
    cancelled: bool = False


class Roster:
    """The workers of each stage, and the moves between them (see the module docstring)."""

    def __init__(self, kit: WorkerKit, *, deployment: Deployment, encoders: list[EncodeWorker],
                 profile: StageProfile | ParallelProfile, seed: int, reconfig_s: ReconfigCost,
                 make_before_break: bool = True, drain_deadline_s: float | None = None,
                 concurrent_steps: bool = False, serve_first: bool = False, linger: bool = False,
                 interim_share: bool = False) -> None:
        pipe = kit.pipe
        assert isinstance(pipe, SteeredPipeline)
        if drain_deadline_s is not None and not drain_deadline_s >= 0:
            raise ValueError(f"drain_deadline_s must be >= 0 or None, got {drain_deadline_s!r}")
        self.kit, self.pipe, self.profile, self.seed = kit, pipe, profile, seed
        self.reconfig_s = reconfig_s
        self.make_before_break = make_before_break
        self.drain_deadline_s = drain_deadline_s
        self.concurrent_steps = concurrent_steps
        self.serve_first = serve_first  # easerve_core.moves.plan_moves's
        self.linger = linger
        self.interim_share = interim_share
        pipe.lingering = []
        self.resumed: deque[Job] = deque()  # evicted sequences while no Decode worker serves
        self.deployment = deployment
        self.target: tuple[Slot, ...] = tuple(worker_slots(deployment, kit.cluster))
        self.steps: deque[Step] = deque()  # the current move's steps not started yet
        #: the running steps: each one's workers on their way up and its workers draining
        self._running: list[tuple[list[_Joining], list[Worker]]] = []
        self._stepping = False
        self.generation = 0
        self.stages: dict[str, list[Any]] = {"encode": encoders, "prefill": pipe.prefill_workers,
                                             "decode": pipe.decode_workers}
        pipe.encoders = encoders  # the same list: joins and drains update both
        self._next_index = {stage: len(workers) for stage, workers in self.stages.items()}
        self.draining: list[Worker] = []
        self.joining: list[_Joining] = []
        self.parked: deque[Job] = deque()  # arrivals while no encode worker serves
        #: the timeline: one row per re-roled GPU group, one per retired worker
        self.reroles: list[dict[str, Any]] = []
        self.retired: list[dict[str, Any]] = []
        for worker in encoders:
            worker.local_when_no_remote = slot_of(worker).local_prefill

    @property
    def encoders(self) -> list[EncodeWorker]:
        return self.stages["encode"]

    def waiting(self) -> int:
        """Requests queued anywhere (the controller's queue observation)."""
        pipe = self.pipe
        total = len(self.parked) + len(pipe.parked_prefill) + len(pipe.parked_decode) + len(self.resumed)
        for e in self.stages["encode"]:  # loops, not sums of generators: this runs at every check
            total += e.num_waiting + len(e.local_queue)
        for p in pipe.prefill_workers:
            total += len(p.queue)
        for d in pipe.decode_workers:
            total += len(d.waiting)
        for w in self.draining:
            if isinstance(w, EncodeWorker):
                total += w.num_waiting + len(w.local_queue)
            else:
                total += len(w.queue) if w.stage == "prefill" else len(w.waiting)
        return total

    # -- a new deployment ------------------------------------------------------------
    def apply(self, target: Deployment, now: float, generation: int) -> int:
        """Move to ``target`` (the steps of :func:`easerve_core.moves.plan_moves`, or with
        ``make_before_break`` off, one step at the build's layout); return how many GPUs change role."""
        self.deployment, self.generation = target, generation
        cluster = self.kit.cluster
        slots = worker_slots(target, cluster)
        serving = {slot_of(w): w for workers in self.stages.values() for w in workers}
        joining = {j.slot: j for j in self.joining}
        if self.make_before_break:
            busy = [g for w in self.draining for g in w.gpus]
            plan = plan_moves([*serving, *joining], slots, num_gpus=cluster.num_gpus,
                              gpus_per_node=cluster.gpus_per_node, busy=busy, serve_first=self.serve_first)
        else:
            plan = _break_first([*serving, *joining], slots)
        kept = set(plan.keep)
        for slot, j in joining.items():
            if slot not in kept:
                self._cancel(j, now)
        self.joining = [j for j in self.joining if not j.cancelled]
        self.target = plan.target
        self.steps = deque(plan.steps)
        self._running = []
        self._retune(now)
        self._next_step(now)
        self._rebalance()
        return plan.gpus_moved

    def _next_step(self, now: float) -> None:
        """Start the plan's next steps: in order, each that may start (:meth:`_startable`); one
        that has to wait (for a warm-up or a drain) holds back only the steps whose GPUs it shares."""
        if self._stepping:
            return  # a retirement inside a step's start: the loop below goes on
        self._stepping = True
        try:
            while (step := self._startable()) is not None:
                self.steps.remove(step)
                self._start(step, now)
        finally:
            self._stepping = False

    def _startable(self) -> Step | None:
        """The first waiting step that may start now: the next one when no step runs; with
        ``concurrent_steps`` also a later one beside the running ones (:meth:`_may_start`), when
        it touches no GPU of a waiting step before it (before 2026-12-02, only the next one)."""
        earlier: set[int] = set()
        for step in self.steps:
            gpus = {g for slot in (*step.drain, *step.up) for g in slot.gpus}
            if not gpus & earlier and self._may_start(step):
                return step
            if not self.concurrent_steps:
                return None
            earlier |= gpus
        return None

    def _start(self, step: Step, now: float) -> None:
        """Drain ``step``'s leaving workers and set its new ones on their way."""
        serving = {slot_of(w): w for workers in self.stages.values() for w in workers}
        drains = [serving[slot] for slot in step.drain if slot in serving]
        for worker in drains:
            self._start_drain(worker, now)
        ups = []
        for slot in step.up:
            waits = [w for w in self.draining if set(w.gpus) & set(slot.gpus)]
            ups.append(_Joining(slot=slot, decision=self.generation, drain_start_s=now, waits=waits,
                                origins=[slot_of(w).role for w in waits]))
        self.joining += ups
        for worker in drains:
            if worker.drained():
                self._retire(worker, now)
        for j in ups:
            if not j.waits and math.isnan(j.ready_s):
                self._reconfigure(j, now)
        self._running.append((ups, [w for w in drains if w in self.draining]))
        self._prune()
        self._rebalance()

    def _step_done(self, now: float) -> None:
        """After a retirement or a warm-up: the next step once this one's are all done."""
        self._prune()
        if not self._running or self.concurrent_steps:
            self._next_step(now)

    def _prune(self) -> None:
        """Forget the running steps whose workers are all up and whose drains all retired."""
        running = [([j for j in ups if j in self.joining], [w for w in drains if w in self.draining])
                   for ups, drains in self._running]
        self._running = [(ups, drains) for ups, drains in running if ups or drains]

    def _may_start(self, step: Step) -> bool:
        """Whether ``step`` starts now: when no step runs; with ``concurrent_steps`` also beside the
        running ones when it touches none of their GPUs and its drains leave every stage the target
        serves with a serving worker, unless the plan lists the stage in ``step.unserved``."""
        if not self._running:
            return True
        if not self.concurrent_steps:
            return False
        busy = {g for ups, drains in self._running for x in (*(j.slot for j in ups), *drains) for g in x.gpus}
        if any(set(slot.gpus) & busy for slot in (*step.drain, *step.up)):
            return False
        wanted = {slot.stage for slot in self.target}
        for stage in {slot.stage for slot in step.drain}:
            left = [w for w in self.stages[stage] if slot_of(w) not in step.drain]
            if not left and stage in wanted and stage not in step.unserved:
                return False
        return True

    def _retune(self, now: float) -> None:
        """The fast knobs, at once, on every encode worker that stays (one that leaves keeps its
        own until it drains)."""
        order = [slot for slot in self.target if slot.stage == "encode"]
        for worker in self.encoders:
            slot = slot_of(worker)
            if slot not in order:
                continue
            done = retune(worker.batcher, self.deployment, now=now, seed=self.seed,
                          index=order.index(slot), generation=self.generation)
            if done.flushed is not None:
                worker.fifo.append(done.flushed)
            worker.batcher, worker.router = done.batcher, done.router
            worker.notify()

    def _rebalance(self) -> None:
        """With ``interim_share``: every serving encoder of the target routes at the target's s
        re-weighted by the part of its remote Prefill and LM-holding encode GPUs that serve now
        (:func:`easerve_core.policies.interim_remote_fraction`; a fresh router where that
        changes, its batcher kept)."""
        if not self.interim_share:
            return
        d = self.deployment
        share = interim_remote_fraction(d.remote_fraction, remote_serving=self._serving_part("prefill"),
                                        local_serving=self._serving_part("encode"))
        order = [slot for slot in self.target if slot.stage == "encode"]
        for worker in self.encoders:
            slot = slot_of(worker)
            if slot in order and worker.router.remote_fraction != share:
                worker.router = make_router(d.with_(remote_fraction=share), self.seed, order.index(slot),
                                            self.generation)

    def _serving_part(self, stage: str) -> float:
        """The part of the target's GPUs of ``stage`` (of Encode: those holding the LM) that serve."""
        lm_only = stage == "encode"
        want = sum(len(s.gpus) for s in self.target if s.stage == stage and (s.local_prefill or not lm_only))
        have = sum(len(w.gpus) for w in self.stages[stage] if slot_of(w).local_prefill or not lm_only)
        return have / want if want else 0.0

    def _start_drain(self, worker: Worker, now: float) -> None:
        self.stages[worker.stage].remove(worker)
        self.draining.append(worker)
        worker.on_idle = self._idle
        self.retired.append({"decision": self.generation, "stage": worker.stage, "worker": worker.index,
                             "gpus": list(worker.gpus), "drain_start_s": now, "drain_end_s": math.nan})
        if isinstance(worker, EncodeWorker):
            batch = worker.batcher.flush(now)
            if batch is not None:
                worker.fifo.append(batch)
                worker.notify()
        if isinstance(worker, DecodeWorker) and self.linger and not self.stages["decode"] \
                and not self._hands_on(worker):
            self.pipe.lingering.append((worker, worker.mark()))
        deadline = self.drain_deadline_s
        if isinstance(worker, DecodeWorker) and deadline is not None and self._hands_on(worker):
            if deadline == 0:
                worker.evict(now, self._evicted)
            else:
                at = now + deadline
                self.kit.env.call_later(deadline, lambda _call: self._deadline(worker, at))

    def _hands_on(self, worker: DecodeWorker) -> bool:
        """Whether a draining Decode worker's sequences may move: only to decoders at least its size
        (TP) in the target; a smaller one holds less KV and decodes slower, so it finishes them."""
        sizes = [slot.tp for slot in self.target if slot.stage == "decode"]
        return bool(sizes) and max(sizes) >= len(worker.gpus)

    def _deadline(self, worker: DecodeWorker, at: float) -> None:
        if worker in self.draining:
            worker.evict(at, self._evicted)

    def _evicted(self, _worker: DecodeWorker, jobs: list[Job], now: float) -> None:
        """Each evicted sequence to a serving Decode worker, to recompute and decode on (module
        docstring), or to wait for the stage's next new one."""
        for job in jobs:
            if self.pipe.decode_workers:
                self._resume(job, now)
            else:
                self.resumed.append(job)

    def _resume(self, job: Job, now: float) -> None:
        worker = least_loaded(self.pipe.decode_workers)
        worker.load_tokens += job.kv_tokens
        job.decode_worker = worker.index
        lm = profile_for_tp(self.profile, len(worker.gpus))
        job.resume_s = float(lm.prefill_s([job.input_tokens + 1 + job.decoded], 1.0))
        worker.deliver(job, now)

    def _idle(self, worker: Worker, now: float) -> None:
        if worker in self.draining and worker.drained():
            self._retire(worker, now)

    def _retire(self, worker: Worker, now: float) -> None:
        worker.on_idle = None
        self.draining.remove(worker)
        for row in self.retired:
            if row["stage"] == worker.stage and row["worker"] == worker.index:
                row["drain_end_s"] = now
        for joining in self.joining:
            if worker in joining.waits:
                joining.waits.remove(worker)
                joining.drain_end_s = now  # retirements come in time order: the last is the latest
                if not joining.waits:
                    self._reconfigure(joining, now)
        self._step_done(now)

    # -- joining -------------------------------------------------------------------------
    def _reconfigure(self, joining: _Joining, now: float) -> None:
        if math.isnan(joining.drain_end_s):
            joining.drain_end_s = now
        slot = joining.slot
        joining.reconfig_s = float(self.reconfig_s(slot.role, slot.tp))
        joining.ready_s = now + joining.reconfig_s
        env = self.kit.env
        env.call_later(max(0.0, joining.ready_s - env.now), lambda _call: self._ready(joining))

    def _cancel(self, joining: _Joining, now: float) -> None:
        joining.cancelled = True
        if joining in self.joining:
            self.joining.remove(joining)
        self._row(joining, cancelled_s=now)

    def _ready(self, joining: _Joining) -> None:
        if joining.cancelled:
            return
        self.joining.remove(joining)
        slot, d, now = joining.slot, self.deployment, joining.ready_s
        index = self._next_index[slot.stage]
        self._next_index[slot.stage] += 1
        kit = self.kit
        worker: Worker
        if slot.stage == "encode":
            position = [s for s in self.target if s.stage == "encode"].index(slot)
            worker = kit.encode(d, index, slot.gpus, batcher=make_batcher(d),
                                router=make_router(d, self.seed, position, self.generation), fresh=False)
            worker.local_when_no_remote = slot.local_prefill
        elif slot.stage == "prefill":
            worker = kit.prefill(d, index, slot.gpus, fresh=False)
        else:
            worker = kit.decode(d, index, slot.gpus, kv_capacity_tokens=kv_capacities(d, self.profile).decode,
                                fresh=False)
        workers = self.stages[slot.stage]
        workers.append(worker)
        workers.sort(key=lambda w: w.gpus)
        self._row(joining, worker=index)
        if isinstance(worker, EncodeWorker) and self.parked:
            coming = sum(1 for j in self.joining if j.slot.stage == "encode")
            for _ in range(math.ceil(len(self.parked) / (1 + coming))):
                worker.offer(self.parked.popleft(), now)
        while self.resumed and slot.stage == "decode":  # older than the KV parked for decode
            self._resume(self.resumed.popleft(), now)
        self.pipe.unpark(now)
        self._step_done(now)
        self._rebalance()

    def _row(self, joining: _Joining, *, worker: int = -1, cancelled_s: float = math.nan) -> None:
        slot = joining.slot
        self.reroles.append({
            "decision": joining.decision, "gpus": list(slot.gpus),
            "from": "+".join(joining.origins) or "idle",
            "to": slot.role, "tp": slot.tp, "worker": worker, "drain_start_s": joining.drain_start_s,
            "drain_end_s": joining.drain_end_s, "reconfig_s": joining.reconfig_s, "ready_s": joining.ready_s,
            "cancelled_s": cancelled_s})


def _break_first(current: Sequence[Slot], slots: Sequence[Slot]) -> MovePlan:
    """The move before make-before-break (``make_before_break=False``): every worker off the new
    layout drains at once, every new slot waits for the drains on its GPUs (one step)."""
    wanted = set(slots)
    keep = tuple(s for s in current if s in wanted)
    drain = tuple(s for s in current if s not in wanted)
    up = tuple(s for s in slots if s not in set(current))
    return MovePlan(keep=keep, steps=(Step(drain=drain, up=up),))
