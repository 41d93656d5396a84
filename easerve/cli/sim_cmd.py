"""``easerve sim CONFIG.toml --out DIR``: simulate one deployment on one workload.

Reads an experiment config (DESIGN.md, easerve_core.config) and resolves it
into a session (calibration.session.compose): the profile (``[profile] path``, the
analytic profile of the model on the GPU, or a live model's committed
profile), the preset (``--preset`` or ``[deployment] preset``; default
``easerve``), the workload drawn with the config's seed (``--rate`` rescales
it, and the batcher's rate hint with it). Then it simulates and writes into DIR: ``records.parquet``,
``utilization.parquet``, ``stage_log.parquet``, ``queues.parquet``,
``summary.json`` (with the SLO of the config's tier), ``config.json`` (the
resolved config) and ``latency.png`` / ``encoder_utilization.png``. Raw item
sizes in ``[workload]`` are printed with the LM tokens the model's processor
rule gives them (what ``records.parquet`` holds).

``--controller PLAN_TABLE.json`` (``easerve plan-table`` writes it) runs the
online controller on that table (docs/controller.md): the run starts on the
band its first ``window_s`` of arrivals call for, with that band's deployment; decisions
re-plan it, re-roled GPUs pay the reconfiguration cost of the model and GPU
(calibration.reconfig). ``summary.json`` then holds the decisions under
``controller``, and ``controller.png`` plots them.
Every input is validated before anything is written.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from tqdm import tqdm

from calibration.reconfig import ReconfigurationCost
from calibration.session import Overrides, Session
from easerve.cli.common import add_config, add_force, add_out, command_parser, open_session
from easerve.cli.outputs import RunFolder
from easerve_core import Architecture, Deployment
from easerve_core.config import model_label
from easerve_core.controller import Controller, ControllerSettings, PlanTable
from easerve_core.presets import PRESETS
from runtime.files import read_text
from runtime.results import write_result
from sim.plots import controller_plot, latency_plot, utilization_plot

#: runs shorter than this (wall seconds) never show the progress bar
PROGRESS_DELAY_S = 2.0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "sim", help="simulate a deployment on a workload (SimPy model)",
                       doc=__doc__, func=run)
    add_config(p, "experiment TOML (see configs/)")
    add_out(p, "folder to write results into")
    p.add_argument("--preset", default=None, help=f"baseline preset: {', '.join(sorted(PRESETS))}")
    p.add_argument("--rate", type=float, default=None, help="override the mean arrival rate (req/s)")
    p.add_argument("--controller", type=Path, default=None, metavar="PLAN_TABLE.json",
                   help="run the online controller on this plan table (easerve plan-table writes it)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    add_force(p)


def run(args: argparse.Namespace) -> int:
    session = open_session(args.config, Overrides(preset=args.preset, rate_hz=args.rate),
                           runs_deployment=True)
    session.sim_profile()  # a model without a profile, or bad [sim] options, refused before anything runs
    options = session.sim_options()
    controller: Controller | None = None
    cost: ReconfigurationCost | None = None
    if args.controller is not None:
        if args.preset not in (None, "easerve"):
            raise ValueError(f"--controller runs the plan table's EAServe deployments; "
                             f"drop --preset {args.preset}")
        session, controller, cost = _with_controller(args.controller, session)
    plan = session.plan
    folder = RunFolder(args.out, force=args.force)  # checked before the run, written whole after it
    with tqdm(total=len(plan.requests), desc=f"sim {plan.preset}", unit="req", delay=PROGRESS_DELAY_S,
              leave=False) as bar:
        engine = session.sim(options, progress=bar.update, controller=controller, reconfiguration_s=cost)
        result = engine.run()
    with folder as staging:
        write_result(result, staging, slo=plan.slo)
        if not args.no_plots:
            _plots(result, plan.deployment, staging, plan.slo,
                   title=f"{model_label(plan.model)} {plan.preset} {plan.deployment.label()}")
            if controller is not None:
                end = float(result.records["finish_s"].max())
                controller_plot(result.meta["controller"], staging / "controller.png",
                                end_s=end if math.isfinite(end) else 0.0,
                                title=f"online controller: {model_label(plan.model)}")
    out = args.out
    s = result.summary(plan.slo)
    tier = plan.slo.tier if plan.slo is not None else "no SLO"
    if controller is not None:
        decisions = result.meta["controller"]["decisions"]
        print(f"controller: {len(decisions)} decision(s): "
              + (", ".join(f"{d['at_s']:.0f} s -> band {d['band']}" for d in decisions) or "none"))
    if plan.workload is not None and plan.workload.sizes is not None:
        print(plan.workload.sizes.describe())
    print(f"{plan.preset}: {s.num_ok}/{s.num_requests} ok, throughput {s.throughput_rps:.3f} req/s, "
          f"goodput {s.goodput_rps:.3f} req/s ({tier}), TTFT mean {s.ttft_mean_s:.3f} s, "
          f"TPOT mean {s.tpot_mean_s * 1e3:.1f} ms -> {out}")
    return 0


def _plots(result: Any, deployment: Deployment, out: Path, slo: Any, *, title: str) -> None:
    latency_plot(result.records, out / "latency.png", slo=slo, title=title)
    if deployment.architecture is Architecture.AGGREGATED:
        gpus = list(range(deployment.decode.num_gpus))
    else:
        gpus = list(range(deployment.encode.num_gpus))
    end = float(result.records["finish_s"].max())
    utilization_plot(result.utilization, gpus, out / "encoder_utilization.png",
                     end_s=end if math.isfinite(end) else 0.0, title=f"encoder GPUs: {title}")


def _with_controller(path: Path, session: Session) -> tuple[Session, Controller, ReconfigurationCost]:
    """The session on the start band's deployment, the controller, and what a re-roled GPU group pays."""
    try:
        data = json.loads(read_text(path, what="plan table"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"--controller {path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict) or "bands" not in data:
        raise ValueError(f"--controller {path}: not a plan table (easerve plan-table writes one)")
    table = PlanTable.from_dict(data)
    settings = ControllerSettings.from_dict(data.get("settings", {}))
    plan = session.plan
    for i, band in enumerate(table.bands):  # before anything runs: name the band that does not fit
        try:
            band.deployment.check_fits(plan.cluster)
        except ValueError as exc:
            raise ValueError(f"--controller {path}: bands[{i}].deployment: {exc}") from None
    cost = ReconfigurationCost(plan.model, plan.cluster.gpu)
    cost("decode", 1)  # a model or GPU without specs is refused before the run
    first = min(r.arrival_s for r in plan.requests)  # the band the first window's arrivals call for
    opening = sum(r.arrival_s < first + settings.window_s for r in plan.requests) / settings.window_s
    start = table.band_for(opening)
    session = session.replan(deployment=table.bands[start].deployment, requests=plan.requests)
    return session, Controller(table, settings, start_band=start), cost
