"""One live trial: start the workers, play a plan's requests in real time, collect a result.

:class:`Trial` is the front end; it runs one :class:`easerve_core.plan.RunPlan`
(its deployment, requests, seed and SM-share table), the same plan the
simulator runs. ``start()`` saves the random weights once,
starts one process per worker (encode, remote prefill, decode) and waits
until each has loaded and warmed up. ``run()`` is the open-loop load
generator (a thread that issues every request at its arrival time, whatever
the system is doing) plus the event loop that folds worker events into the
:class:`~live.ledger.Ledger`, notices dead workers, and stops when every
request is settled or the trial times out. ``close()`` stops every worker,
terminating any that will not stop. :func:`run_trial` does all three.

Placement: each request goes to the next live encode worker in turn, and is
given the next live remote prefill and decode workers in turn; the encode
worker's router decides whether the remote prefill worker is used. In an
aggregated deployment (the ``vllm`` preset) each request goes to the next
live LM instance (:mod:`live.workers.aggregated`), which runs all three stages.

The module stays past 300 lines because :class:`Trial` is one front end whose start,
load generator, event loop and close share the worker processes, their channels and the
ledger.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as tmp

from easerve_core.controller import Controller
from easerve_core.deployment import Architecture
from easerve_core.plan import RunPlan
from easerve_core.request import Modality, Request, Status, check_modalities
from easerve_core.result import RunResult
from easerve_core.worker_choice import RoundRobin
from live.events import Crash, Ready, WorkerId
from live.families.base import MMInput
from live.ledger import Ledger, utilization
from live.options import LiveOptions
from live.placement import check_placement
from live.procs import drain_events, stop_workers
from live.steering import LiveSteering
from live.transport import FRONTEND, Channels, Job, Outbox, Retune, WorkerDown, clock
from live.workers import WorkerSpec, run_worker
from live.zoo import ModelSpec, build_model, count_params, save_model

_SPECIAL_HEADROOM = 8  # text ids stay clear of the placeholder ids at the top of a tiny vocab
_MAX_TEXT_ID = 32000  # and below every full-size model's special tokens
_BYTES_PER_PARAM = 4  # the random-weight models are float32


class Trial:
    """The live front end (see the module docstring). Use as a context manager.

    ``options`` default to the plan's ``[live]`` table; ``inputs`` replace the
    generated multimodal input of the requests they name (tests of malformed input).
    """

    def __init__(self, plan: RunPlan, options: LiveOptions | None = None, *,
                 inputs: Mapping[int, MMInput | None] | None = None,
                 controller: Controller | None = None) -> None:
        self.plan = plan
        self.steering = None if controller is None else LiveSteering(controller, plan.deployment, plan.slo)
        self.options = options or LiveOptions.from_dict(plan.engine("live"))
        self.spec = ModelSpec(name=plan.model, size=plan.model_size,
                              init_std=self.options.init_std, seed=self.options.model_seed)
        self.requests = list(plan.requests)
        check_modalities(self.requests, self.spec.family.modalities, model=self.spec.name)
        dep = plan.deployment
        self.overrides = dict(inputs or {})
        self.workers: list[WorkerId] = (
            [("encode", i) for i in range(dep.encode.num_workers)]
            + [("prefill", i) for i in range(dep.prefill.num_workers)]
            + [("decode", i) for i in range(dep.decode.num_workers)]
        )
        self.ledger = Ledger(self.requests)
        self.procs: dict[WorkerId, Any] = {}
        self.interrupted = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._tempdir: str | None = None
        self._channels: Channels | None = None
        self._wall_s = 0.0
        self.placement: dict[str, Any] = {}

    def __enter__(self) -> Trial:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- start ---------------------------------------------------------------
    def start(self) -> None:
        """Check the host can hold the workers (before any starts), then start them and wait."""
        weights = count_params(build_model(self.spec, device="meta")) * _BYTES_PER_PARAM
        self.placement = check_placement(self.plan.deployment, device=self.options.device,
                                         weights_bytes=weights, cuda_available=torch.cuda.is_available(),
                                         wanted_start=self.options.start_method)
        method = self.placement["start_method"]
        folder = self.options.weights_dir or tempfile.mkdtemp(prefix="easerve-live-")
        if not self.options.weights_dir:
            self._tempdir = folder
        save_model(self.spec, folder)
        ctx = tmp.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload(["live.workers"])
        self._channels = Channels.build(ctx, list(self.workers))
        for worker in self.workers:
            spec = WorkerSpec(me=worker, model=self.spec, weights_dir=str(folder),
                              options=self.options, deployment=self.plan.deployment,
                              sm_table=self.plan.sm_table, frontend_pid=os.getpid(), seed=self.plan.seed)
            proc = ctx.Process(target=run_worker, args=(spec, self._channels.for_worker(worker)), daemon=True,
                               name=f"easerve-{worker[0]}-{worker[1]}")
            proc.start()
            self.procs[worker] = proc
        self._await_ready()

    def _await_ready(self) -> None:
        assert self._channels is not None
        waiting = set(self.workers)
        deadline = clock() + self.options.startup_timeout_s
        while waiting:
            if clock() > deadline:
                raise ValueError(
                    f"workers not ready after {self.options.startup_timeout_s} s: {sorted(waiting)}")
            for event in drain_events(self._channels.events, self.options.poll_interval_s):
                if isinstance(event, Ready):
                    waiting.discard(event.worker)
                elif isinstance(event, Crash):
                    raise ValueError(f"{event.worker[0]} worker {event.worker[1]} failed to start: "
                                     f"{event.error}")
            dead = [w for w in waiting if self.procs[w].exitcode is not None]
            if dead:
                raise ValueError(f"worker(s) exited during start-up: {sorted(dead)}")

    def worker_pids(self) -> dict[WorkerId, int]:
        return {w: p.pid for w, p in self.procs.items()}

    # -- run -----------------------------------------------------------------
    def run(self) -> RunResult:
        """Play the workload; return the result (see :meth:`result` after a Ctrl-C)."""
        if self._channels is None:
            raise ValueError("call start() before run()")
        jobs = self.build_jobs()
        t0 = clock()
        self.ledger.set_t0(t0)
        outbox = Outbox(FRONTEND, self._channels)
        gen = threading.Thread(target=self._generate, args=(jobs, t0, outbox), daemon=True,
                               name="load-generator")
        gen.start()
        try:
            self._event_loop(t0, gen, outbox)
        except KeyboardInterrupt:
            self.interrupted = True
            raise
        finally:
            self._stop.set()
            gen.join(timeout=self.options.shutdown_timeout_s)
            self._wall_s = clock() - t0
        return self.result()

    def build_jobs(self) -> list[Job]:
        """Each request with its text ids and multimodal tensors (deterministic per request)."""
        cfg = self.spec.config()
        family = self.spec.family
        vocab_hi = min(cfg.text_config.vocab_size, _MAX_TEXT_ID) - _SPECIAL_HEADROOM
        jobs = []
        for req in self.requests:
            rng = np.random.default_rng([self.plan.seed, req.request_id])
            body = rng.integers(4, vocab_hi, max(0, req.prompt_tokens - 1)).tolist()
            text = [1, *body][: req.prompt_tokens]
            if req.request_id in self.overrides:
                mm = self.overrides[req.request_id]
            elif req.modality is Modality.TEXT:
                mm = None
            else:  # the plan's items: [live] mm_token_scale is applied when it is resolved
                mm = family.make_input(cfg, req.modality, list(req.mm_tokens_per_item), rng)
            jobs.append(Job(request=req, text_ids=tuple(text), mm=mm, prefill_worker=-1, decode_worker=-1))
        return jobs

    def _generate(self, jobs: list[Job], t0: float, outbox: Outbox) -> None:
        # the live worker choice, round-robin at issue (easerve_core.worker_choice)
        turns = {g: RoundRobin(n) for g, n in self._group_sizes().items()}
        # a request enters at an encode worker, or at an LM instance of an aggregated deployment
        entry = "decode" if self.plan.deployment.architecture is Architecture.AGGREGATED else "encode"
        for job in jobs:
            if self._stop.wait(max(0.0, t0 + job.request.arrival_s - clock())):
                return
            with self._lock:
                placed = {g: self._next_alive(g, turns[g]) for g in turns}
                rid = job.request.request_id
                if placed[entry] is None or placed["decode"] is None:
                    self.ledger.finish(rid, Status.FAILED, f"no live {entry} or decode worker")
                    continue
                dest: WorkerId = (entry, placed[entry])
                self.ledger.issue(rid, dest)
                if self.steering is not None:
                    self.steering.arrived(clock() - t0)
            outbox.send(dest, rid, Job(request=job.request, text_ids=job.text_ids, mm=job.mm,
                                       prefill_worker=-1 if placed["prefill"] is None else placed["prefill"],
                                       decode_worker=placed["decode"]))

    def model_requests(self) -> list[Request]:
        """The requests with the LM tokens the model really gets (the family's geometry).

        What the simulator must be given to mirror this trial (calibration.loop.runner).
        """
        model_config = self.spec.config()
        out = []
        for job in self.build_jobs():
            req = job.request
            if job.mm is not None:
                counts = tuple(self.spec.family.validate(model_config, job.mm))
                # the live families pool nothing after their projector: the counts are the tower's too
                req = replace(req, mm_tokens_per_item=counts, encode_tokens_per_item=())
            out.append(req)
        return out

    def _group_sizes(self) -> dict[str, int]:
        dep = self.plan.deployment
        return {"encode": dep.encode.num_workers, "prefill": dep.prefill.num_workers,
                "decode": dep.decode.num_workers}

    def _next_alive(self, group: str, turn: RoundRobin) -> int | None:
        return turn.pick(lambda index: (group, index) not in self.ledger.dead)

    def _event_loop(self, t0: float, gen: threading.Thread, outbox: Outbox) -> None:
        assert self._channels is not None
        deadline = t0 + self.options.trial_timeout_s
        while True:
            outbox.reap()
            events = drain_events(self._channels.events, self.options.poll_interval_s)
            with self._lock:
                for event in events:
                    self.ledger.apply(event)
                self._check_deaths()
                if self.steering is not None:
                    self._steer(clock() - t0)
                if not gen.is_alive() and not self.ledger.open_ids:
                    return
                if clock() > deadline:
                    self.ledger.fail_open(f"trial timeout after {self.options.trial_timeout_s} s")
                    return

    def _steer(self, now: float) -> None:
        """Offer the controller what settled; send its fast knobs to every live encode worker."""
        assert self.steering is not None and self._channels is not None
        settled = [self.ledger.records[rid] for rid in self.ledger.settled]
        self.ledger.settled.clear()
        tuned = self.steering.update(now, settled, len(self.ledger.open_ids))
        if tuned is None:
            return
        message = Retune(deployment=tuned, generation=self.steering.generation)
        for worker, proc in self.procs.items():
            if worker[0] == "encode" and worker not in self.ledger.dead and proc.exitcode is None:
                with contextlib.suppress(Exception):
                    self._channels.inboxes[worker].put(FRONTEND, message)

    def _check_deaths(self) -> None:
        assert self._channels is not None
        for worker, proc in self.procs.items():
            if worker in self.ledger.dead or proc.exitcode is None:
                continue
            for event in drain_events(self._channels.events, 0.0):  # what it said before dying
                self.ledger.apply(event)
            self.ledger.worker_died(worker, proc.exitcode)
            self._tell_encoders(worker)

    def _tell_encoders(self, worker: WorkerId) -> None:
        """Every live encode worker learns that ``worker`` died (it routes around a dead Prefill)."""
        assert self._channels is not None
        for other, proc in self.procs.items():
            if other[0] == "encode" and other not in self.ledger.dead and proc.exitcode is None:
                with contextlib.suppress(Exception):
                    self._channels.inboxes[other].put(FRONTEND, WorkerDown(worker=worker))

    # -- result and shutdown -------------------------------------------------
    def result(self) -> RunResult:
        """The result so far; requests still open end ``failed`` (interrupted or stopped)."""
        with self._lock:
            if self.ledger.open_ids:
                why = "interrupted" if self.interrupted else "trial stopped before the request finished"
                self.ledger.fail_open(why)
            stage_log = self.ledger.stage_log()
            config = {**self.plan.config, "live": self.options.to_dict()}
            return RunResult(
                records=self.ledger.records_frame(), stage_log=stage_log,
                utilization=utilization(stage_log, self.workers), config=config, engine="live",
                meta={**self.plan.describe(), "placement": self.placement, "notes": list(self.ledger.notes),
                      **self._controller_meta(),
                      "interrupted": self.interrupted, "wall_s": self._wall_s,
                      "workers": [f"{g}-{i}" for g, i in self.workers]},
            )

    def _controller_meta(self) -> dict[str, Any]:
        if self.steering is None:
            return {}
        return {"controller": {"decisions": list(self.steering.log), "retunes": list(self.ledger.retunes)}}

    def close(self) -> None:
        """Stop every worker (terminate those that will not stop) and free the weights."""
        self._stop.set()
        if self._channels is not None:
            stop_workers(self.procs, self._channels, self.options.shutdown_timeout_s)
        if self._tempdir:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None


def run_trial(plan: RunPlan, options: LiveOptions | None = None) -> RunResult:
    """Run one live trial of ``plan`` (``options``: default its ``[live]`` table) and return its result."""
    with Trial(plan, options) as trial:
        trial.start()
        return trial.run()
