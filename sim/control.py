"""The online controller in a simulated run: observations in, decisions applied, a timeline out.

:class:`SimSteering` runs an :class:`easerve_core.controller.Controller` (or the
evaluation's oracle, :class:`~easerve_core.oracle.ScriptedController`)
inside :func:`sim.simulate` (docs/simulator.md, "The controller in the
simulator"). It is offered every arrival as the front end hands it on, every
finished request and whether it met the plan's SLO (the rule both engines
apply, :func:`easerve_core.slo.request_meets_slo`: TTFT and TPOT within the
SLO; every request meets it when the plan has none), and, at each poll, the requests queued anywhere. It polls
the controller at its :meth:`next_deadline` with a light timer
(:meth:`~sim.clock.SimEnvironment.call_later`), and stops once every
admitted request finished. A decision goes to the :class:`~sim.roster.Roster`:
fast knobs at once, re-roles for a new allocation.

Every request is stamped, at its arrival, with the controller's band and the
deployment it arrives under (0: the plan's, k: the k-th decision's); they
become the records' ``controller_band`` and ``deployment_id`` columns. The
decisions, the re-roled GPU groups and the retired workers go into
``meta["controller"]`` (:func:`timeline` makes frames of them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd

from easerve_core.controller import Decision, PlanTable
from easerve_core.slo import SLO, request_meets_slo
from sim.clock import SimEnvironment
from sim.job import Job
from sim.roster import Roster

#: the records' columns a run with a controller adds (-1: never arrived, i.e. rejected)
RECORD_COLUMNS = ("controller_band", "deployment_id")


class ControllerLike(Protocol):
    """What the simulator needs of a controller (easerve_core.controller)."""

    table: PlanTable
    band: int
    decisions: list[Decision]

    def arrive(self, now: float, weight: float = 1.0) -> None: ...
    def finish(self, now: float, *, met_slo: bool) -> None: ...
    def queue(self, now: float, waiting: int) -> None: ...
    def next_deadline(self) -> float: ...
    def poll(self, now: float) -> Decision | None: ...


class SimSteering:
    """The controller's driver in one run (see the module docstring)."""

    def __init__(self, env: SimEnvironment, controller: ControllerLike, roster: Roster, *,
                 slo: SLO | None, num_requests: int, num_admitted: int) -> None:
        self.env, self.controller, self.roster, self.slo = env, controller, roster, slo
        self.num_admitted = num_admitted
        self.num_done = 0
        self.band_at = [-1] * num_requests  # per request index: the band at its arrival
        self.deployment_at = [-1] * num_requests
        self.decisions: list[dict[str, Any]] = []
        roster.pipe.on_finish = self.finished
        self._finish = controller.finish  # per request: bound once (arrivals: the dispatcher)
        self._due = controller.next_deadline()
        if num_admitted and math.isfinite(self._due):
            env.call_later(max(0.0, self._due - env.now), self._tick)

    def finished(self, job: Job, now: float) -> None:
        req = job.req  # a finished job is ok; the rule is the core's (easerve_core.slo.request_meets_slo)
        met = request_meets_slo(self.slo, ok=True, arrival_s=req.arrival_s, first_token_s=job.first_token_s,
                                finish_s=job.finish_s, output_tokens=req.output_tokens)
        self._finish(now, met_slo=met)
        self.num_done += 1

    def _tick(self, _call: Any) -> None:
        if self.num_done >= self.num_admitted:
            return  # the run is over: no more polls
        env, controller = self.env, self.controller
        now = max(self._due, env.now)  # the planned time, not SimPy's rounded now + delay
        controller.queue(now, self.roster.waiting())
        decision = controller.poll(now)
        if decision is not None:
            self._apply(decision, now)
        self._due = controller.next_deadline()
        if math.isfinite(self._due):
            env.call_later(max(0.0, self._due - env.now), self._tick)

    def _apply(self, decision: Decision, now: float) -> None:
        target = decision.deployment
        moved = self.roster.apply(target, now, len(self.decisions) + 1)
        e, p, d = target.encode, target.prefill, target.decode
        self.decisions.append({
            "decision": len(self.decisions) + 1, "at_s": now, "from_band": decision.from_band,
            "band": decision.band, "reason": decision.reason, "rate_hz": decision.rate_hz,
            "deployment": target.label(), "encode_workers": e.num_workers, "encode_tp": e.tp,
            "prefill_workers": p.num_workers, "prefill_tp": p.tp, "decode_workers": d.num_workers,
            "decode_tp": d.tp, "gpus_moved": moved})

    def meta(self) -> dict[str, Any]:
        table = self.controller.table
        return {"bands": [{"rate_hz": b.rate_hz, "deployment": b.deployment.label()} for b in table.bands],
                "settings": self.controller_settings(), "decisions": self.decisions,
                "reroles": self.roster.reroles, "retired": self.roster.retired}

    def controller_settings(self) -> dict[str, Any]:
        settings = getattr(self.controller, "settings", None)
        return {} if settings is None else dict(settings.to_dict())

    def stamp(self, records: pd.DataFrame, request_ids: Sequence[int]) -> pd.DataFrame:
        """``records`` (sorted by request id) with the band and deployment of each request's arrival."""
        order = np.argsort(np.asarray(request_ids, dtype=np.int64), kind="stable")
        out = records.copy()
        out["controller_band"] = np.asarray(self.band_at, dtype=np.int64)[order]
        out["deployment_id"] = np.asarray(self.deployment_at, dtype=np.int64)[order]
        return out


def timeline(meta: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """A run's controller timeline (``meta["controller"]``) as frames: ``decisions``,
    ``reroles`` (one row per re-roled GPU) and ``retired`` (one per drained worker)."""
    reroles = pd.DataFrame(meta.get("reroles", []))
    if not reroles.empty:
        reroles = reroles.explode("gpus").rename(columns={"gpus": "gpu"}).reset_index(drop=True)
        reroles["gpu"] = reroles["gpu"].astype("int64")
    return {"decisions": pd.DataFrame(meta.get("decisions", [])), "reroles": reroles,
            "retired": pd.DataFrame(meta.get("retired", []))}
