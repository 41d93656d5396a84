"""The online controller on the rate-shift study: four systems on one request stream.

The rate-shift study (:func:`easerve.experiments.studies.rate_shift`: a rate
stepping between ``shape`` multiples of the mean, one segment each) run by
four systems on the same requests (docs/controller.md, "Evaluation"):

* ``static-mean``: HAS's deployment for the mean rate, all run long;
* ``static-peak``: HAS's deployment for the peak rate (over-provisioned);
* ``oracle``: knows each segment's rate in advance and moves to its band at
  the segment's first instant (:class:`~easerve_core.oracle.ScriptedController`),
  paying the re-role (drain and reconfiguration) inside the segment;
* ``controller``: the online controller (:class:`~easerve_core.controller.Controller`,
  default settings unless given) on the same plan table, starting on the
  mean-rate band, as the static system does.

The plan table holds one HAS deployment per band
(:func:`easerve.experiments.plan_tables.phase_plan_table`: HAS at each
segment rate and the mean, searched on streams one segment long),
cross-checked (:func:`easerve.experiments.plan_tables.cross_checked_table`: each band keeps the best
of the table's deployments, each told each band's rate, at its rate on
fresh streams one segment long). The static systems run HAS's own choices
(the table before the cross-check), as a user without the controller's
planner would deploy them. Re-roles cost
:class:`calibration.reconfig.ReconfigurationCost` of the setup's model and GPU.
Each system is one task on the backend.

The module stays a little past 300 lines because the four systems and the accounting of
their rows (:func:`system_rows`, :func:`held_gpu_s` and the busy and union helpers)
belong together: what a row's GPU-seconds mean is defined by how its system ran.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from calibration.reconfig import STANDBY_WARMUP_S, WARMUP_S, ReconfigurationCost
from calibration.session import Session
from easerve.experiments import plan_tables
from easerve.experiments.setup import Arrivals, Setup, requests_for
from easerve_core import Deployment, Request, SMShareTable
from easerve_core.controller import Controller, ControllerSettings, PlanTable
from easerve_core.oracle import ScriptedController
from easerve_core.slo import goodput_rps, meets_slo, tpot_s, ttft_s
from runtime.parallel import IN_PROCESS, Backend, run_tasks
from sim.roster import worker_slots

SHIFT_SYSTEMS = ("static-mean", "static-peak", "oracle", "controller")
@dataclass(frozen=True, slots=True)
class Traffic:
    """What the evaluation (and the oracle) knows of a stream's traffic: the offered rate at
    any time (``rate_at``, vectorised and picklable: a shape's own), the mean and the peak
    rate the static systems plan for, and the grid the phases are read on."""

    rate_at: Callable[[np.ndarray], np.ndarray]
    mean_rate_hz: float
    peak_rate_hz: float
    step_s: float = 5.0

    def phases(self, table: PlanTable, end_s: float) -> tuple[tuple[float, int], ...]:
        """``(start_s, band)`` of each phase up to ``end_s``: a maximal run of grid times whose
        offered rate the table plans for with one band (a rate edge between two grid times is
        read at the next one)."""
        grid = np.arange(0.0, end_s + self.step_s, self.step_s)
        out: list[tuple[float, int]] = []
        for t, rate in zip(grid, np.asarray(self.rate_at(grid), dtype=float), strict=True):
            band = table.band_for(float(rate))
            if not out or out[-1][1] != band:
                out.append((float(t), band))
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Segments:
    """The rate shift's offered rate: ``rates_hz`` one ``segment_s`` each, repeated."""

    segment_s: float
    rates_hz: tuple[float, ...]

    def rate_at(self, t: np.ndarray) -> np.ndarray:
        k = (np.asarray(t, dtype=float) // self.segment_s).astype(int) % len(self.rates_hz)
        return np.asarray(self.rates_hz, dtype=float)[k]


def controller_shift(setup: Setup, table: PlanTable, *, mean_rate_hz: float, num_requests: int,
                     segment_s: float, bin_s: float, seed: int = 0,
                     shape: Sequence[float] = (0.5, 1.5, 0.5, 1.5),
                     settings: ControllerSettings | None = None, has_table: PlanTable | None = None,
                     frugal_table: PlanTable | None = None,
                     backend: Backend = IN_PROCESS) -> dict[str, pd.DataFrame]:
    """The four systems on one stream: ``systems`` (one row each), ``phases`` (system x
    segment), ``bins`` (system x arrival-time bin) and ``decisions`` (the controller's and
    the oracle's moves). The oracle and the controller run ``table``; the static systems
    ``has_table``'s bands when given (HAS's own choices, before the cross-check), else
    ``table``'s."""
    requests, traffic = shift_stream(setup, mean_rate_hz=mean_rate_hz, num_requests=num_requests,
                                     segment_s=segment_s, shape=shape, seed=seed)
    return four_systems(setup, table, requests, traffic, has_table=has_table, seed=seed, bin_s=bin_s,
                        settings=settings, frugal_table=frugal_table, backend=backend)


def shift_stream(setup: Setup, *, mean_rate_hz: float, num_requests: int, segment_s: float,
                 shape: Sequence[float], seed: int = 0) -> tuple[tuple[Request, ...], Traffic]:
    """The rate shift's requests (one ``segment_s`` at each ``shape`` multiple of the mean, repeated)
    and what the evaluation knows of its traffic."""
    schedule = tuple((segment_s, mean_rate_hz * f) for f in shape)
    requests = tuple(requests_for(setup, mean_rate_hz, num_requests, seed, Arrivals(schedule=schedule)))
    traffic = Traffic(Segments(segment_s, tuple(r for _, r in schedule)).rate_at, mean_rate_hz,
                      mean_rate_hz * max(shape))
    return requests, traffic


@dataclass(frozen=True, slots=True)
class ShiftStudy:
    """:func:`rate_shift_study`'s plan tables and frames."""

    has_table: PlanTable  # HAS per band: the static systems'
    table: PlanTable  # cross-checked: the oracle's and the controller's
    scores: pd.DataFrame  # the cross-check's, one row per band and candidate
    frames: dict[str, pd.DataFrame]  # controller_shift's
    frugal_table: PlanTable | None = None  # the GPU-frugal planner's, cross-checked
    frugal_counts: pd.DataFrame | None = None  # its HAS per band and GPU count
    frugal_scores: pd.DataFrame | None = None  # its cross-check's


def rate_shift_study(setup: Setup, *, mean_rate_hz: float, timeline_s: float, trials: int,
                     num_samples: int = 1, shape: Sequence[float] = (0.5, 1.5, 0.5, 1.5),
                     frugal: bool = False, search_requests: int | None = None,
                     backend: Backend = IN_PROCESS) -> ShiftStudy:
    """The whole study (docs/controller.md, "Evaluation"): HAS at each segment's rate and the
    mean (``trials`` each, on streams one segment long, or ``search_requests`` long), the
    cross-check, with ``frugal`` the GPU-frugal planner, then the systems on the shift
    (:func:`controller_shift`: ``mean_rate_hz x timeline_s`` requests, four segments)."""
    segment_s = timeline_s / len(shape)
    rates = sorted({mean_rate_hz * f for f in shape} | {mean_rate_hz})
    has_table = plan_tables.phase_plan_table(setup, rates, segment_s=segment_s, trials=trials,
                                             num_samples=num_samples, num_requests=search_requests,
                                             backend=backend)
    table, scores = plan_tables.cross_checked_table(setup, has_table, segment_s=segment_s)
    frugal_table = counts = frugal_scores = None
    if frugal:
        found, counts = plan_tables.frugal_plan_table(setup, rates, segment_s=segment_s, trials=trials,
                                                      num_samples=num_samples, backend=backend)
        frugal_table, frugal_scores = plan_tables.cross_checked_table(setup, found, segment_s=segment_s,
                                                                      fewer_gpus_first=True)
    frames = controller_shift(setup, table, has_table=has_table, frugal_table=frugal_table,
                              mean_rate_hz=mean_rate_hz, num_requests=int(mean_rate_hz * timeline_s),
                              segment_s=segment_s, bin_s=segment_s / 6, shape=shape, backend=backend)
    return ShiftStudy(has_table=has_table, table=table, scores=scores, frames=frames,
                      frugal_table=frugal_table, frugal_counts=counts, frugal_scores=frugal_scores)


def four_systems(setup: Setup, table: PlanTable, requests: Sequence[Request], traffic: Traffic, *,
                 bin_s: float, has_table: PlanTable | None = None, seed: int = 0,
                 settings: ControllerSettings | None = None, frugal_table: PlanTable | None = None,
                 backend: Backend = IN_PROCESS) -> dict[str, pd.DataFrame]:
    """The four systems on ``requests`` (:func:`controller_shift`'s frames; a ``segment`` is
    one of :meth:`Traffic.phases`, the oracle's script); with ``frugal_table``, its oracle and
    controller too (``oracle/frugal``, ``controller/frugal``: docs/controller.md)."""
    end = max(r.arrival_s for r in requests)
    runs = [(name, (has_table or table) if name.startswith("static") else table) for name in SHIFT_SYSTEMS]
    if frugal_table is not None:
        runs += [(f"{name}/frugal", frugal_table) for name in ("oracle", "controller")]
    tasks = [partial(_system, setup, t, name, requests, traffic, traffic.phases(t, end), seed=seed,
                     bin_s=bin_s, settings=settings) for name, t in runs]
    outs = run_tasks(backend, tasks)
    frames = {key: pd.DataFrame([row for out in outs for row in out[key]])
              for key in ("systems", "phases", "bins", "decisions")}
    if frames["decisions"].empty:  # no system moved: the columns still say what a move holds
        frames["decisions"] = pd.DataFrame(columns=list(DECISION_COLUMNS))
    return frames


#: one row of ``controller_shift``'s ``decisions``
DECISION_COLUMNS = ("system", "at_s", "from_band", "band", "reason", "rate_hz", "deployment", "gpus_moved",
                    "last_ready_s")


def _system(setup: Setup, table: PlanTable, name: str, requests: Sequence[Request], traffic: Traffic,
            phases: tuple[tuple[float, int], ...], *, seed: int, bin_s: float,
            settings: ControllerSettings | None) -> dict[str, list[dict[str, Any]]]:
    """One system's run and its rows (a task: everything it takes pickles)."""
    controller: Any = None
    kind = name.split("/")[0]
    if kind == "static-peak":
        start = table.band_for(traffic.peak_rate_hz)
    elif kind == "oracle":
        controller = ScriptedController(table, phases, start_band=phases[0][1])
        start = phases[0][1]
    else:
        start = table.band_for(traffic.mean_rate_hz)
        if kind == "controller":
            controller = Controller(table, settings, start_band=start)
    deployment = table.bands[start].deployment
    result = simulate_system(setup, deployment, requests, controller, seed=seed)
    return system_rows(name, result, setup, deployment, traffic, phases, bin_s=bin_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveMechanisms:
    """How a controlled system's moves run (:mod:`sim.roster`, docs/controller.md): a draining
    Decode worker hands its sequences on after ``drain_deadline_s`` (None: never), a staged
    move's steps start side by side where they may (``concurrent_steps``), and a stage losing its
    every worker comes up first (``serve_first``, :mod:`easerve_core.moves`), and a draining
    Decode worker whose sequences cannot move takes new ones while no other serves, until those it
    held have left (``linger``), and while part of the target serves, its encoders route at the
    share that keeps each serving Prefill worker's load as the target sets it (``interim_share``),
    and a re-roled GPU wakes a standby engine in place of starting one cold (``standby``:
    :data:`~calibration.reconfig.STANDBY_WARMUP_S` in place of the warm-up).
    The defaults are the moves of 2026-12 before any of them."""

    drain_deadline_s: float | None = None
    concurrent_steps: bool = False
    serve_first: bool = False
    linger: bool = False
    interim_share: bool = False
    standby: bool = False

    def __post_init__(self) -> None:
        if self.drain_deadline_s is not None and not self.drain_deadline_s >= 0:
            raise ValueError(f"drain_deadline_s must be >= 0 or None, got {self.drain_deadline_s!r}")

    def reconfiguration(self, setup: Setup) -> ReconfigurationCost:
        """What a re-role costs on ``setup``'s model and GPU under these moves."""
        warmup_s = STANDBY_WARMUP_S if self.standby else WARMUP_S
        return ReconfigurationCost(setup.plan.model, setup.plan.cluster.gpu, warmup_s=warmup_s)


def simulate_system(setup: Setup, start: Deployment, requests: Sequence[Request], controller: Any, *,
                    seed: int, moves: MoveMechanisms = MoveMechanisms(),
                    sm_tables: Sequence[tuple[float, SMShareTable]] = ()) -> Any:
    """One system's run: ``requests`` on ``start`` under EAServe, steered by ``controller`` (None:
    static), re-roles priced by :meth:`MoveMechanisms.reconfiguration` and run as
    ``moves`` says; the encoders follow ``sm_tables`` (:mod:`sim.sm_tables`; empty: the plan's)."""
    session = Session(plan=setup.plan, profile=setup.profile).replan(
        deployment=start, preset="easerve", requests=requests, seed=seed)
    if controller is None:
        return session.sim(sm_tables=sm_tables).run()
    return session.sim(controller=controller, reconfiguration_s=moves.reconfiguration(setup),
                       drain_deadline_s=moves.drain_deadline_s, concurrent_steps=moves.concurrent_steps,
                       serve_first=moves.serve_first, linger=moves.linger, interim_share=moves.interim_share,
                       sm_tables=sm_tables).run()


def system_rows(name: str, result: Any, setup: Setup, start: Deployment, traffic: Traffic,
                phases: tuple[tuple[float, int], ...], *, bin_s: float) -> dict[str, list[dict[str, Any]]]:
    """One system's rows of :func:`four_systems`' frames from its run (``start``: the deployment
    it started on; ``phases``: ``(start_s, band)``, the segments attainment is read over)."""
    slo = setup.slos["moderate"]
    rec = result.records.copy()
    rec["meets"] = meets_slo(rec, slo)
    rec["ttft_s"], rec["tpot_s"] = ttft_s(rec), tpot_s(rec)
    arrivals = rec["arrival_s"].to_numpy(dtype=float)
    rec["segment"] = np.searchsorted([at for at, _ in phases], arrivals, side="right") - 1
    rec["offered_rate_hz"] = traffic.rate_at(arrivals)
    high = rec["offered_rate_hz"] > traffic.mean_rate_hz
    end_s = float(rec["finish_s"].max())
    meta = result.meta.get("controller", {"decisions": [], "reroles": []})
    moves = [(d["at_s"], d["band"]) for d in meta["decisions"]]
    held = held_gpu_s(start, setup.plan.cluster, meta, end_s)
    num_ok = int((rec["status"] == "ok").sum())
    systems = [{
        "system": name, "attainment_high": float(rec.loc[high, "meets"].mean()),
        "attainment_low": float(rec.loc[~high, "meets"].mean()), "attainment": float(rec["meets"].mean()),
        "goodput_rps": goodput_rps(rec, slo), "ttft_p99_s": _p99(rec["ttft_s"]),
        "tpot_p99_s": _p99(rec["tpot_s"]), "gpu_s_per_request": held / max(1, num_ok),
        "busy_gpu_s_per_request": _busy_gpu_s(result.utilization, end_s) / max(1, num_ok),
        "decisions": len(moves), "gpus_moved": sum(d["gpus_moved"] for d in meta["decisions"]),
        "makespan_s": end_s - float(rec["arrival_s"].min()),
        "start": start.label()}]
    phase_rows = [{"system": name, "segment": int(seg), "start_s": phases[int(seg)][0],
                   "offered_rate_hz": float(g["offered_rate_hz"].mean()), "requests": len(g),
                   "attainment": float(g["meets"].mean()), "ttft_p99_s": _p99(g["ttft_s"]),
                   "tpot_p99_s": _p99(g["tpot_s"])}
                  for seg, g in rec.groupby("segment")]
    rec["bin_s"] = (rec["arrival_s"] // bin_s) * bin_s
    bins = [{"system": name, "bin_s": float(b), "offered_rate_hz": float(g["offered_rate_hz"].mean()),
             "attainment": float(g["meets"].mean()), "ttft_p99_s": _p99(g["ttft_s"])}
            for b, g in rec.groupby("bin_s")]
    decisions = [{"system": name, **{k: d[k] for k in DECISION_COLUMNS[1:-1]},
                  "last_ready_s": _last_ready(meta, d)}
                 for d in meta["decisions"]]
    return {"systems": systems, "phases": phase_rows, "bins": bins, "decisions": decisions}


def _last_ready(meta: dict[str, Any], decision: dict[str, Any]) -> float:
    """When the last GPU group a decision re-roled was serving again (its time if none moved)."""
    ready = [r["ready_s"] for r in meta["reroles"]
             if r["decision"] == decision["decision"] and r["ready_s"] == r["ready_s"]]
    return max(ready, default=float(decision["at_s"]))


def _p99(values: pd.Series) -> float:
    clean = values.dropna().to_numpy(dtype=float)
    return float(np.percentile(clean, 99)) if clean.size else float("nan")


def held_gpu_s(start: Deployment, cluster: Any, meta: dict[str, Any], end_s: float) -> float:
    """GPU-seconds held from 0 to ``end_s``: a GPU is held while a worker on it serves or drains,
    and from a decision that gives it a new role until that worker retires (its wait for the
    drain and its reconfiguration included); a GPU no deployment holds is free (released)."""
    retired = {(r["stage"], r["worker"]): r["drain_end_s"] for r in meta.get("retired", [])}

    def until(stage: str, worker: int) -> float:
        t = retired.get((stage, worker), math.nan)
        return end_s if math.isnan(t) else t

    spans: dict[int, list[tuple[float, float]]] = {}
    index = dict.fromkeys(("encode", "prefill", "decode"), 0)
    for slot in worker_slots(start, cluster):
        for gpu in slot.gpus:
            spans.setdefault(gpu, []).append((0.0, until(slot.stage, index[slot.stage])))
        index[slot.stage] += 1
    for row in meta.get("reroles", []):
        stage = "encode" if row["to"].startswith("encode") else row["to"]
        end = row["cancelled_s"] if not math.isnan(row["cancelled_s"]) else until(stage, row["worker"])
        for gpu in row["gpus"]:
            spans.setdefault(gpu, []).append((row["drain_start_s"], end))
    return sum(_union_s(v, end_s) for v in spans.values())


def engines_per_gpu(start: Deployment, cluster: Any, meta: dict[str, Any]) -> int:
    """The most workers any one GPU was part of in the run (a worker: its GPU group and role, at
    the start and after each re-role, a cancelled one counted): the engines it keeps when re-roles
    wake standby engines (:attr:`MoveMechanisms.standby`: one serving, the others asleep)."""
    engines: dict[int, set[tuple[tuple[int, ...], str]]] = {}
    for slot in worker_slots(start, cluster):
        for gpu in slot.gpus:
            engines.setdefault(gpu, set()).add((tuple(slot.gpus), slot.role))
    for row in meta.get("reroles", []):
        for gpu in row["gpus"]:
            engines.setdefault(gpu, set()).add((tuple(row["gpus"]), row["to"]))
    return max((len(v) for v in engines.values()), default=0)


def _union_s(spans: list[tuple[float, float]], end_s: float) -> float:
    """The length of the union of ``spans``, cut at ``end_s``."""
    total, reach = 0.0, -math.inf
    for a, b in sorted(spans):
        a, b = max(a, reach), min(b, end_s)
        if b > a:
            total, reach = total + b - a, b
    return total


def _busy_gpu_s(util: pd.DataFrame, end_s: float) -> float:
    """The area under every GPU's busy fraction, from its first row to ``end_s``."""
    total = 0.0
    for _, g in util.sort_values(["gpu", "time_s"], kind="stable").groupby("gpu"):
        t = g["time_s"].to_numpy(dtype=float)
        span = np.diff(np.append(t, max(end_s, t[-1])))
        total += float((g["busy_frac"].to_numpy(dtype=float) * span).sum())
    return total
