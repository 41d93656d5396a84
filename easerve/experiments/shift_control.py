"""The online controller on the rate-shift study: four systems on one request stream.

The rate-shift study (:func:`easerve.experiments.studies.rate_shift`: a rate
stepping between ``shape`` multiples of the mean, one segment each) run by
four systems on the same requests (docs/controller.md, "Evaluation"):

* ``static-mean``: HAS's deployment for the mean rate, all run long;
* ``static-peak``: HAS's deployment for the peak rate (over-provisioned);
* ``oracle``: knows each segment's rate in advance and moves to its band at
  the segment's first instant (:class:`~easerve_core.controller.ScriptedController`),
  paying the re-role (drain and reconfiguration) inside the segment;
* ``controller``: the online controller (:class:`~easerve_core.controller.Controller`,
  default settings unless given) on the same plan table, starting on the
  mean-rate band, as the static system does.

The plan table holds one HAS deployment per band (:func:`phase_plan_table`:
HAS at each segment rate and the mean, searched on streams one segment
long), cross-checked (:func:`cross_checked_table`: each band keeps the best
of the table's deployments, each told each band's rate, at its rate on
fresh streams one segment long). The static systems run HAS's own choices
(the table before the cross-check), as a user without the controller's
planner would deploy them. Re-roles cost
:class:`calibration.reconfig.ReconfigurationCost` of the setup's model and GPU.
Each system is one task on the backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from calibration.reconfig import ReconfigurationCost
from easerve.experiments.choose import choose
from easerve.experiments.setup import Arrivals, Setup, requests_for, run
from easerve_core import Request
from easerve_core.controller import Band, Controller, ControllerSettings, PlanTable, ScriptedController
from easerve_core.has import SearchSpace
from easerve_core.has.screen import screen
from easerve_core.parallel import IN_PROCESS, Backend, run_tasks
from easerve_core.plan import replan
from easerve_core.plan_check import cross_check
from easerve_core.slo import goodput_rps, meets_slo, tpot_s, ttft_s
from sim import simulate

SHIFT_SYSTEMS = ("static-mean", "static-peak", "oracle", "controller")
#: the cross-check's request streams: fresh, neither HAS's (1000 on) nor the evaluation's (0 on)
CROSS_CHECK_SEEDS = (2000, 2001)


def phase_plan_table(setup: Setup, rates_hz: Sequence[float], *, segment_s: float, trials: int,
                     num_samples: int = 1, seed: int = 0, backend: Backend = IN_PROCESS) -> PlanTable:
    """HAS at each of ``rates_hz`` (:func:`~easerve.experiments.choose.choose`, ``trials`` TPE
    trials), each band searched on ``num_samples`` streams one segment long (``rate x
    segment_s`` requests): a band's deployment serves a phase, and an overloaded phase's queue
    grows over all of it, which a shorter stream does not show. One study per task."""
    tasks = [partial(choose, setup, rate_hz=r, trials=trials, seed=seed, num_samples=num_samples,
                     num_requests=max(20, round(r * segment_s))) for r in rates_hz]
    choices = run_tasks(backend, tasks)
    return PlanTable(tuple(Band(rate_hz=r, deployment=c.deployment)
                           for r, c in zip(rates_hz, choices, strict=True)))


def cross_checked_table(setup: Setup, table: PlanTable, *, segment_s: float,
                        seeds: Sequence[int] = CROSS_CHECK_SEEDS, tier: str = "moderate"
                        ) -> tuple[PlanTable, pd.DataFrame]:
    """:func:`easerve_core.plan_check.cross_check` on the simulator: a deployment's score at a
    rate is its mean goodput (``tier``) over ``seeds``' streams of one segment at that rate, its
    batcher told the rate hint it carries. Returns the table and the scores (one row per band
    and candidate)."""
    slo = setup.slos[tier]

    def score(deployment: Any, rate_hz: float) -> float:
        n = max(20, round(rate_hz * segment_s))
        return float(np.mean([run(setup, deployment, rate_hz=rate_hz, num_requests=n, seed=seed,
                                  keep_hint=True).summary(slo).goodput_rps for seed in seeds]))

    checked, rows = cross_check(table, score)
    return checked, pd.DataFrame(rows)


def controller_shift(setup: Setup, table: PlanTable, *, mean_rate_hz: float, num_requests: int,
                     segment_s: float, bin_s: float, seed: int = 0,
                     shape: Sequence[float] = (0.5, 1.5, 0.5, 1.5),
                     settings: ControllerSettings | None = None, has_table: PlanTable | None = None,
                     backend: Backend = IN_PROCESS) -> dict[str, pd.DataFrame]:
    """The four systems on one stream: ``systems`` (one row each), ``phases`` (system x
    segment), ``bins`` (system x arrival-time bin) and ``decisions`` (the controller's and
    the oracle's moves). The oracle and the controller run ``table``; the static systems
    ``has_table``'s bands when given (HAS's own choices, before the cross-check), else
    ``table``'s."""
    schedule = tuple((segment_s, mean_rate_hz * f) for f in shape)
    requests = tuple(requests_for(setup, mean_rate_hz, num_requests, seed, Arrivals(schedule=schedule)))
    tasks = [partial(_system, setup, (has_table or table) if name.startswith("static") else table, name,
                     requests, seed=seed, mean_rate_hz=mean_rate_hz,
                     segment_s=segment_s, bin_s=bin_s, shape=tuple(shape), settings=settings)
             for name in SHIFT_SYSTEMS]
    outs = run_tasks(backend, tasks)
    frames = {key: pd.DataFrame([row for out in outs for row in out[key]])
              for key in ("systems", "phases", "bins", "decisions")}
    if frames["decisions"].empty:  # no system moved: the columns still say what a move holds
        frames["decisions"] = pd.DataFrame(columns=list(DECISION_COLUMNS))
    return frames


#: one row of ``controller_shift``'s ``decisions``
DECISION_COLUMNS = ("system", "at_s", "from_band", "band", "reason", "rate_hz", "deployment", "gpus_moved",
                    "last_ready_s")


def _plan_rates(mean_rate_hz: float, shape: Sequence[float]) -> tuple[float, float, float]:
    return mean_rate_hz * min(shape), mean_rate_hz, mean_rate_hz * max(shape)


def _system(setup: Setup, table: PlanTable, name: str, requests: Sequence[Request], *, seed: int,
            mean_rate_hz: float, segment_s: float, bin_s: float, shape: tuple[float, ...],
            settings: ControllerSettings | None) -> dict[str, list[dict[str, Any]]]:
    """One system's run and its rows (a task: everything it takes pickles)."""
    _low, mean, peak = _plan_rates(mean_rate_hz, shape)
    controller: Any = None
    if name == "static-peak":
        start = table.band_for(peak)
    elif name == "oracle":
        last = max(r.arrival_s for r in requests)
        bands = [table.band_for(mean_rate_hz * shape[k % len(shape)])
                 for k in range(int(last // segment_s) + 1)]
        controller = ScriptedController(table, tuple((k * segment_s, b) for k, b in enumerate(bands)),
                                        start_band=bands[0])
        start = bands[0]
    else:
        start = table.band_for(mean)
        if name == "controller":
            controller = Controller(table, settings, start_band=start)
    plan = replan(setup.plan, setup.profile, deployment=table.bands[start].deployment, preset="easerve",
                  requests=requests, seed=seed)
    cost = ReconfigurationCost(setup.plan.model, setup.plan.cluster.gpu)
    result = simulate(plan, setup.profile, controller=controller,
                      reconfiguration_s=None if controller is None else cost)
    return _rows(name, result, setup, table, start, segment_s=segment_s, bin_s=bin_s,
                 mean_rate_hz=mean_rate_hz, shape=shape)


def _rows(name: str, result: Any, setup: Setup, table: PlanTable, start: int, *, segment_s: float,
          bin_s: float, mean_rate_hz: float, shape: tuple[float, ...]) -> dict[str, list[dict[str, Any]]]:
    slo = setup.slos["moderate"]
    rec = result.records.copy()
    rec["meets"] = meets_slo(rec, slo)
    rec["ttft_s"], rec["tpot_s"] = ttft_s(rec), tpot_s(rec)
    rec["segment"] = ((rec["arrival_s"] % (segment_s * len(shape))) // segment_s).astype(int)
    rec["offered_rate_hz"] = [mean_rate_hz * shape[s] for s in rec["segment"]]
    high = rec["offered_rate_hz"] > mean_rate_hz
    end_s = float(rec["finish_s"].max())
    meta = result.meta.get("controller", {"decisions": [], "reroles": []})
    moves = [(d["at_s"], d["band"]) for d in meta["decisions"]]
    held = _held_gpu_s(table, start, moves, end_s)
    num_ok = int((rec["status"] == "ok").sum())
    systems = [{
        "system": name, "attainment_high": float(rec.loc[high, "meets"].mean()),
        "attainment_low": float(rec.loc[~high, "meets"].mean()), "attainment": float(rec["meets"].mean()),
        "goodput_rps": goodput_rps(rec, slo), "ttft_p99_s": _p99(rec["ttft_s"]),
        "tpot_p99_s": _p99(rec["tpot_s"]), "gpu_s_per_request": held / max(1, num_ok),
        "busy_gpu_s_per_request": _busy_gpu_s(result.utilization, end_s) / max(1, num_ok),
        "decisions": len(moves), "gpus_moved": sum(d["gpus_moved"] for d in meta["decisions"]),
        "makespan_s": end_s - float(rec["arrival_s"].min()),
        "start": table.bands[start].deployment.label()}]
    phases = [{"system": name, "segment": int(seg), "offered_rate_hz": float(g["offered_rate_hz"].iloc[0]),
               "requests": len(g), "attainment": float(g["meets"].mean()), "ttft_p99_s": _p99(g["ttft_s"]),
               "tpot_p99_s": _p99(g["tpot_s"])}
              for seg, g in rec.groupby("segment")]
    rec["bin_s"] = (rec["arrival_s"] // bin_s) * bin_s
    bins = [{"system": name, "bin_s": float(b), "offered_rate_hz": float(g["offered_rate_hz"].iloc[0]),
             "attainment": float(g["meets"].mean()), "ttft_p99_s": _p99(g["ttft_s"])}
            for b, g in rec.groupby("bin_s")]
    decisions = [{"system": name, **{k: d[k] for k in DECISION_COLUMNS[1:-1]},
                  "last_ready_s": _last_ready(meta, d)}
                 for d in meta["decisions"]]
    return {"systems": systems, "phases": phases, "bins": bins, "decisions": decisions}


def _last_ready(meta: dict[str, Any], decision: dict[str, Any]) -> float:
    """When the last GPU group a decision re-roled was serving again (its time if none moved)."""
    ready = [r["ready_s"] for r in meta["reroles"]
             if r["decision"] == decision["decision"] and r["ready_s"] == r["ready_s"]]
    return max(ready, default=float(decision["at_s"]))


def _p99(values: pd.Series) -> float:
    clean = values.dropna().to_numpy(dtype=float)
    return float(np.percentile(clean, 99)) if clean.size else float("nan")


def _held_gpu_s(table: PlanTable, start: int, moves: Sequence[tuple[float, int]], end_s: float) -> float:
    """GPU-seconds held by the deployments in turn (a re-roling GPU is held), from 0 to ``end_s``."""
    times = [0.0, *(at for at, _ in moves), end_s]
    bands = [start, *(band for _, band in moves)]
    return sum(table.bands[b].deployment.num_gpus * max(0.0, t1 - t0)
               for b, t0, t1 in zip(bands, times[:-1], times[1:], strict=True))


def _busy_gpu_s(util: pd.DataFrame, end_s: float) -> float:
    """The area under every GPU's busy fraction, from its first row to ``end_s``."""
    total = 0.0
    for _, g in util.sort_values(["gpu", "time_s"], kind="stable").groupby("gpu"):
        t = g["time_s"].to_numpy(dtype=float)
        span = np.diff(np.append(t, max(end_s, t[-1])))
        total += float((g["busy_frac"].to_numpy(dtype=float) * span).sum())
    return total


def throughput_ceiling(setup: Setup, *, need_rps: float, rate_hz: float, num_requests: int = 2000,
                       seed: int = 5) -> pd.DataFrame:
    """How many requests/s the best deployments finish when offered more than they carry.

    Every point of HAS's grid (B and s) on every allocation whose screened
    capacity carries ``need_rps`` (the screen is optimistic: it prices the
    typical request and no queueing) is run at ``rate_hz`` (above what any of
    them carries); its throughput is the requests finished between the 20th
    percentile of arrivals and the last arrival, over that span (the queue is
    full by then, so the workers never idle). Sorted, highest first.
    """
    report = screen(setup.profile, setup.plan.cluster, setup.mix, rate_hz=need_rps,
                    slo=setup.slos["moderate"])
    space = SearchSpace(allocations=report.survivor_allocations, base=setup.deployment)
    rows = []
    for label, batch, s in space.grid():
        deployment = space.deployment(label, batch, s)
        rec = run(setup, deployment, rate_hz=rate_hz, num_requests=num_requests, seed=seed).records
        arrivals, finishes = rec["arrival_s"].to_numpy(), rec["finish_s"].to_numpy()
        lo, hi = float(np.percentile(arrivals, 20)), float(arrivals.max())
        done = int(((finishes > lo) & (finishes <= hi)).sum())
        rows.append({"deployment": deployment.label(), "throughput_rps": done / (hi - lo)})
    return pd.DataFrame(rows).sort_values("throughput_rps", ascending=False, kind="stable",
                                          ignore_index=True)
