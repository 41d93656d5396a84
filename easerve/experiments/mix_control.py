"""The controller on shifts where the best deployment moves: HAS per phase, five systems per shift.

docs/controller.md, "Shifts where the optimum moves". For a
:class:`~easerve.experiments.shifts.Shift`: HAS (:func:`~easerve.experiments.choose.choose`)
at each distinct phase (its mix at its rate, on streams ``search_s`` long),
one plan-table band per phase along the shift's signal (the band's level:
the phase stream's mean size for a ``*_mean`` signal, its rate in the
signal's unit otherwise), cross-checked (:func:`checked_table`: each band
keeps the best of the table's deployments judged on its own phase's
workload, so a phase whose own HAS pick is worse than another phase's takes
the better one), then five systems on one stream:

* ``static-low`` / ``static-high``: HAS's own pick for the lowest and the
  highest band (before the cross-check, as a user without the controller's
  planner would deploy it; the rate shift's static systems are the same)
  all run long (for a shift of the mix, HAS at "the mean" has no meaning:
  no one mix blends two modalities; the two phases' own choices stand in
  for static HAS at the mean and at the peak);
* ``oracle``: on the cross-checked table, moves to each phase's band at the phase's start
  (:class:`~easerve_core.oracle.ScriptedController`; :data:`ORACLE_LEAD_S`);
* ``reactive``: the controller's rules (:class:`~easerve_core.controller.Controller`, defaults but
  for rule 4's waiver, :data:`SETTLE_Z`, and rule 1's cut, :data:`CUT_Z`);
* ``predictive``: the same with Holt's forecaster ``lead_s`` ahead (:mod:`easerve_core.forecast`).

Re-roles are make-before-break (:mod:`easerve_core.moves`), cost what
:meth:`~easerve.experiments.shift_control.MoveMechanisms.reconfiguration` says and run as
:data:`MOVES` says (a leaving decoder's sequences recomputed elsewhere at once, disjoint
steps side by side, standby engines woken); every system's encoders run each phase's SM-share table
(:data:`PHASE_TABLES`). Each request is judged by the moderate SLO of its own
phase's mix. "High" phases are those of the top band, "low" the others.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from easerve.experiments.choose import choose
from easerve.experiments.plan_tables import CROSS_CHECK_SEEDS, segment_goodput
from easerve.experiments.setup import Setup, load_setup, with_mix
from easerve.experiments.shape_control import screened_capacity_hz
from easerve.experiments.shift_control import MoveMechanisms, engines_per_gpu, held_gpu_s, simulate_system
from easerve.experiments.shifts import Shift, phase_mix, phase_of, stream
from easerve.experiments.trace_shift import TRACE_PLANNING, plan_setups, synthetic_arrivals, trace_shift
from easerve_core.controller import Band, Controller, ControllerSettings, PlanTable
from easerve_core.oracle import ScriptedController
from easerve_core.plan_check import cross_check_bands
from easerve_core.slo import meets_slo, tpot_s, ttft_s
from runtime.parallel import IN_PROCESS, Backend, run_tasks
from sim.roster import worker_slots

SYSTEMS = ("static-low", "static-high", "oracle", "reactive", "predictive")
#: the shifts' moves (docs/controller.md, "Moves that pay"): a leaving decoder's sequences move at
#: once (to one at least its size), disjoint steps run side by side, a leaving decoder whose
#: sequences cannot move lingers, a half-served target's encoders route at the share that keeps
#: each serving Prefill worker's load (interim_share), and re-roles wake standby engines (standby)
MOVES = MoveMechanisms(drain_deadline_s=0.0, concurrent_steps=True, linger=True, interim_share=True,
                       standby=True)
#: every system's encoders run each phase's SM-share table from the phase's start (sim.sm_tables);
#: False: the first phase's for the whole run, which flattered static-low on image -> video
PHASE_TABLES = True
#: the controllers act on a move without the 60 s settle once the window's signal is this many
#: standard errors past the move's threshold (ControllerSettings.settle_z; None: always the settle).
#: Three errors: the usual bar for "not noise" (a one-sided 0.13% chance per check on a normal
#: estimate), not fitted to these shifts (docs/controller.md, "Settled by the evidence")
SETTLE_Z: float | None = 3.0
#: the controllers' window starts after a step in the signal once the two sides of it differ by
#: this many standard errors (ControllerSettings.cut_z; None: the whole window). Four errors: on a
#: steady stream the best of a window's cuts passes it at about 0.2% of checks (a standardised
#: Brownian bridge's maximum), not fitted to these shifts: on image -> video and resolution 3
#: gives the same results, 5 moves only image -> video's predictive controller (0.947 high-phase
#: attainment against 0.943; docs/controller.md, "A window that cuts at a step")
CUT_Z: float | None = 4.0
#: how long before each phase the oracle moves. At the phase's start: moving the re-role time
#: ahead (the rate shift's oracle, whose bigger deployment carries the phase before as well) was
#: worse on every mix shift, and more so the earlier (docs/controller.md, "When the oracle moves"),
#: because neither phase's deployment carries the other's mix, and a move's drain serves the old
#: phase's tail on a half-built new deployment
ORACLE_LEAD_S = 0.0
#: the reactive controller's settings (the rules' defaults but for :data:`SETTLE_Z` and
#: :data:`CUT_Z`); the predictive one adds its forecaster ``lead_s`` ahead
RULES = ControllerSettings(settle_z=SETTLE_Z, cut_z=CUT_Z)


def phase_setups(shift: Shift) -> dict[str, Setup]:
    base = load_setup(shift.model, anchored=True)
    return {m: with_mix(base, phase_mix(m), m, same_encoder=True) for m in shift.mixes}


def mix_capacity_hz(model: str, mix: str) -> float:
    """The screened capacity of ``mix`` on ``model``'s cluster (a trace-rate shift's scale)."""
    setup = with_mix(load_setup(model, anchored=True), phase_mix(mix), mix, same_encoder=True)
    return screened_capacity_hz(setup)


def synthetic_trace_shift() -> Shift:
    """The built-in trace-rate shift: :func:`~easerve.experiments.trace_shift.synthetic_arrivals`
    scaled to LLaVA-34B's cluster as a trace file's arrivals would be (``--trace FILE``)."""
    return trace_shift(synthetic_arrivals(), capacity_hz=mix_capacity_hz("image", "llava-image"))


def phase_rates(shift: Shift, setups: dict[str, Setup]) -> list[float]:
    """Each phase's rate: its own, else ``load_frac`` of its mix's screened capacity (2 decimals)."""
    cap = {m: screened_capacity_hz(setups[m]) for m in shift.mixes
           if any(p.rate_hz is None and p.mix == m for p in shift.phases)}
    return [p.rate_hz if p.rate_hz is not None else round(shift.load_frac * cap[p.mix], 2)
            for p in shift.phases]


def band_edges(shift: Shift, levels: list[float]) -> list[float]:
    """Each band's planned level, from its phases' levels (increasing): a rate signal's band is
    planned for its phase's rate (between bands the controller provisions for the higher, as on
    the rate shift); a mean signal's band reaches to the geometric midpoint of its level and the
    next (the top band: its own level), so a window's mean, noisy around a phase's level, stays
    in that phase's band, and a window that is mostly the other phase crosses the edge."""
    if not shift.signal.endswith("_mean"):
        return levels
    return [*(float(np.sqrt(a * b)) for a, b in pairwise(levels)), levels[-1]]


def lead_s(setup: Setup, table: PlanTable, moves: MoveMechanisms = MOVES) -> float:
    """The re-role time: the longest reconfiguration of any worker of the table's deployments."""
    cost = moves.reconfiguration(setup)
    slots = {(s.role, s.tp) for b in table.bands for s in worker_slots(b.deployment, setup.plan.cluster)}
    return max(float(cost(role, tp)) for role, tp in slots)


def checked_table(shift: Shift, setups: dict[str, Setup], table: PlanTable, kinds: list[tuple[str, float]],
                  *, seeds: tuple[int, ...] = CROSS_CHECK_SEEDS,
                  kind_setups: dict[tuple[str, float], Setup] | None = None
                  ) -> tuple[PlanTable, pd.DataFrame]:
    """:func:`easerve_core.plan_check.cross_check_bands` on the simulator: band ``i`` is phase
    kind ``kinds[i]`` (its mix at its rate); a candidate's score there is its mean goodput
    (moderate SLO of that mix) over ``seeds``' fresh streams one phase long
    (:func:`~easerve.experiments.plan_tables.segment_goodput`), its batcher told the rate hint it
    carries. The candidates are the table's deployments, each told every phase's rate; a tie
    goes first to the one tied with the best in the most phases (``fewest_moves``: a move that
    buys nothing measurable is not planned). ``kind_setups``: a phase kind's own setup (its
    streams a trace's gaps, :func:`plan_setups`) in place of its mix's."""
    span = {k: float(np.mean([p.duration_s for p in shift.phases if p.mix == k[0]])) for k in kinds}

    def score(deployment: Any, i: int) -> float:
        mix, rate = kinds[i]
        setup = (kind_setups or {}).get(kinds[i], setups[mix])
        return segment_goodput(setup, deployment, rate, segment_s=span[kinds[i]], seeds=seeds)

    checked, rows = cross_check_bands(table, score, [r for _, r in kinds], fewest_moves=True)
    frame = pd.DataFrame(rows)
    frame.insert(0, "shift", shift.name)
    frame.insert(2, "mix", [kinds[i][0] for i in frame["band"]])
    return checked, frame


def shift_study(shift: Shift, *, trials: int, num_samples: int = 1, search_s: float = 120.0, seed: int = 0,
                forecaster: str = "holt", cross_check: bool = True, moves: MoveMechanisms = MOVES,
                trace_planning: bool = TRACE_PLANNING,
                phase_tables: bool = PHASE_TABLES, rules: ControllerSettings = RULES,
                oracle_lead_s: float = ORACLE_LEAD_S, backend: Backend = IN_PROCESS) -> dict[str, Any]:
    """HAS per phase, the plan table (cross-checked unless ``cross_check`` is False) and the five
    systems (module docstring): ``plans`` (one row per phase kind: HAS's pick and the table's),
    ``scores`` (the cross-check's), ``systems``, ``phases`` (system x phase) and ``decisions``
    frames; ``has_table`` and ``table`` (the one the controllers run)."""
    setups = phase_setups(shift)
    rates = phase_rates(shift, setups)
    requests = stream(shift, rates, seed=seed)
    kinds = list(dict.fromkeys(zip((p.mix for p in shift.phases), rates, strict=True)))
    planned = plan_setups(shift, setups, kinds, trace_planning)
    tasks = [partial(choose, planned[(m, r)], rate_hz=r, trials=trials, seed=seed, num_samples=num_samples,
                     num_requests=max(40, round(r * search_s))) for m, r in kinds]
    choices = dict(zip(kinds, run_tasks(backend, tasks), strict=True))
    arrivals = np.array([r.arrival_s for r in requests])
    phase = phase_of(shift, arrivals)
    table0 = PlanTable((Band(rate_hz=1.0, deployment=choices[kinds[0]].deployment),), signal=shift.signal)
    weights = np.array([table0.weight(r) for r in requests])
    level = {}
    for k in kinds:
        mine = np.array([(p.mix, rates[i]) == k for i, p in enumerate(shift.phases)])[phase]
        span = sum(p.duration_s for i, p in enumerate(shift.phases) if (p.mix, rates[i]) == k)
        total = float(weights[mine].sum())
        level[k] = total / int(mine.sum()) if shift.signal.endswith("_mean") else total / span
    order = sorted(kinds, key=lambda k: level[k])
    edges = band_edges(shift, [level[k] for k in order])
    has_table = PlanTable(tuple(Band(rate_hz=round(edge, 3), deployment=choices[k].deployment)
                                for k, edge in zip(order, edges, strict=True)), signal=shift.signal)
    table, scores = (checked_table(shift, setups, has_table, order, kind_setups=planned) if cross_check
                     else (has_table, pd.DataFrame()))
    band_of = [order.index((p.mix, rates[i])) for i, p in enumerate(shift.phases)]
    plans = pd.DataFrame([{"shift": shift.name, "mix": m, "rate_hz": r, "band": order.index((m, r)),
                           "level": level[(m, r)], "deployment": choices[(m, r)].deployment.label(),
                           "has_goodput_rps": choices[(m, r)].best_goodput_rps,
                           "table_deployment": table.bands[order.index((m, r))].deployment.label(),
                           "told_hz": table.bands[order.index((m, r))].deployment.rate_hint_hz}
                          for m, r in kinds])
    lead = lead_s(setups[shift.phases[0].mix], table, moves)
    runs = [partial(_system, shift, setups, has_table if name.startswith("static") else table, band_of,
                    requests, name, lead=lead, seed=seed, forecaster=forecaster, moves=moves,
                    phase_tables=phase_tables, rules=rules, oracle_lead_s=oracle_lead_s)
            for name in SYSTEMS]
    outs = run_tasks(backend, runs)
    frames = {key: pd.DataFrame([row for out in outs for row in out[key]])
              for key in ("systems", "phases", "decisions")}
    return {"plans": plans, "scores": scores, "has_table": has_table, "table": table, "rates": rates,
            "lead_s": lead, **frames}


def _system(shift: Shift, setups: dict[str, Setup], table: PlanTable, band_of: list[int],
            requests: tuple[Any, ...], name: str, *, lead: float, seed: int,
            forecaster: str = "holt", moves: MoveMechanisms = MOVES,
            phase_tables: bool = PHASE_TABLES, rules: ControllerSettings = RULES,
            oracle_lead_s: float = ORACLE_LEAD_S) -> dict[str, list[dict[str, Any]]]:
    """One system's run and its rows (a task)."""
    start = {"static-low": 0, "static-high": len(table.bands) - 1}.get(name, band_of[0])
    controller: Any = None
    if name == "oracle":
        script = tuple((p.start_s, band_of[i]) for i, p in enumerate(shift.phases))
        controller = ScriptedController(table, script, start_band=start, lead_s=oracle_lead_s)
    elif name == "reactive":
        controller = Controller(table, rules, start_band=start)
    elif name == "predictive":
        controller = Controller(table, replace(rules, forecaster=forecaster, lead_s=lead), start_band=start)
    setup = setups[shift.phases[0].mix]
    deployment = table.bands[start].deployment
    tables = tuple((p.start_s, setups[p.mix].plan.sm_table) for p in shift.phases) if phase_tables else ()
    result = simulate_system(setup, deployment, requests, controller, seed=seed, moves=moves,
                             sm_tables=tables)
    return _rows(shift, setups, table, band_of, name, result, setup, deployment)


def _rows(shift: Shift, setups: dict[str, Setup], table: PlanTable, band_of: list[int], name: str,
          result: Any, setup: Setup, start: Any) -> dict[str, list[dict[str, Any]]]:
    rec = result.records.copy()
    rec["phase"] = phase_of(shift, rec["arrival_s"].to_numpy(dtype=float))
    rec["meets"] = False
    for i, p in enumerate(shift.phases):
        mine = rec["phase"] == i
        rec.loc[mine, "meets"] = meets_slo(rec[mine], setups[p.mix].slos["moderate"])
    rec["ttft_s"], rec["tpot_s"] = ttft_s(rec), tpot_s(rec)
    high = np.array(band_of)[rec["phase"].to_numpy()] == len(table.bands) - 1
    end_s = float(rec["finish_s"].max())
    span = end_s - float(rec["arrival_s"].min())
    meta = result.meta.get("controller", {"decisions": [], "reroles": [], "retired": []})
    held = held_gpu_s(start, setup.plan.cluster, meta, end_s)
    systems = [{"shift": shift.name, "system": name,
                "attainment_high": float(rec.loc[high, "meets"].mean()),
                "attainment_low": float(rec.loc[~high, "meets"].mean()),
                "goodput_rps": float(rec["meets"].sum()) / span,
                "ttft_p99_s": _p99(rec["ttft_s"]), "tpot_p99_s": _p99(rec["tpot_s"]),
                "decisions": len(meta["decisions"]),
                "gpus_moved": sum(d["gpus_moved"] for d in meta["decisions"]),
                "held_gpu_s": held, "makespan_s": span,
                "engines_per_gpu": engines_per_gpu(start, setup.plan.cluster, meta)}]
    phases = [{"shift": shift.name, "system": name, "phase": int(i), "mix": shift.phases[int(i)].mix,
               "attainment": float(g["meets"].mean()), "ttft_p99_s": _p99(g["ttft_s"])}
              for i, g in rec.groupby("phase")]
    keys = ("at_s", "from_band", "band", "reason", "gpus_moved")
    decisions = [{"shift": shift.name, "system": name, **{k: d[k] for k in keys}} for d in meta["decisions"]]
    return {"systems": systems, "phases": phases, "decisions": decisions}


def _p99(values: pd.Series) -> float:
    clean = values.dropna().to_numpy(dtype=float)
    return float(np.percentile(clean, 99)) if clean.size else float("nan")


#: the CSV tables of the mix shifts (reproduce's full run, ``easerve controller-eval --mix-shifts --out``)
MIX_TABLES = ("controller_mix_shifts", "controller_mix_shifts_phases", "controller_mix_shifts_decisions",
              "controller_mix_shifts_plans", "controller_mix_shifts_plan_table")


def mix_shift_tables(shifts: list[Shift], *, trials: int, num_samples: int = 1, forecaster: str = "holt",
                     cross_check: bool = True, moves: MoveMechanisms = MOVES,
                     phase_tables: bool = PHASE_TABLES, rules: ControllerSettings = RULES,
                     oracle_lead_s: float = ORACLE_LEAD_S, trace_planning: bool = TRACE_PLANNING,
                     backend: Backend = IN_PROCESS, log: Any = None,
                     seed: int = 0) -> tuple[dict[str, pd.DataFrame], list[dict[str, Any]]]:
    """:func:`shift_study` on each of ``shifts`` (``seed``: the streams', searches' and
    simulations'), its frames concatenated as :data:`MIX_TABLES`; also each study's dict (rates,
    tables, lead)."""
    studies = []
    for shift in shifts:
        if log is not None:
            log(f"mix shift {shift.name}")
        studies.append(shift_study(shift, trials=trials, num_samples=num_samples, forecaster=forecaster,
                                   cross_check=cross_check, moves=moves, phase_tables=phase_tables,
                                   rules=rules, oracle_lead_s=oracle_lead_s, trace_planning=trace_planning,
                                   backend=backend, seed=seed))
    return mix_tables(studies), studies


def mix_tables(studies: list[dict[str, Any]]) -> dict[str, pd.DataFrame]:
    """The studies' (:func:`shift_study`) frames concatenated in order as :data:`MIX_TABLES`."""
    keys = ("systems", "phases", "decisions", "plans", "scores")
    return {name: pd.concat([s[key] for s in studies if not s[key].empty] or [pd.DataFrame()],
                            ignore_index=True)
            for name, key in zip(MIX_TABLES, keys, strict=True)}
