"""``easerve search``: Hybrid Auto Selection from a config file, on the simulator.

Screens the config's cluster at the target rate, then runs an Optuna study
per sampler (``--sampler``, or tpe, random and grid with ``--compare``) in an
Optuna storage (default ``OUT/study.db``; rerunning the same command resumes
it), as ``--workers`` jobs: processes on this machine, or Ray tasks with
``--backend ray`` (docs/scaling.md). Writes into ``--out``:
``trials.parquet`` and ``trials.csv`` (every trial of every sampler run),
``best.toml`` (the config with the best deployment, ready for ``easerve
sim``/``easerve live``), ``convergence.png`` (best goodput vs trial) and
``search.json`` (screen and per-sampler summary). See docs/has.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from matplotlib.figure import Figure
from tqdm import tqdm

from calibration.plans import Resolved, plan_for, scaled_mix
from easerve.cli import confirm_step
from easerve.cli.common import add_backend, add_config, add_out, backend_settings
from easerve.cli.outputs import check_study_folder
from easerve.resources import load_config
from easerve_core import checks
from easerve_core.config import ExperimentConfig
from easerve_core.has import (
    SAMPLERS,
    ScreenReport,
    SearchSettings,
    SearchSpace,
    best_deployment,
    normalize_url,
    open_storage,
    run_search,
    screen,
    top_k,
    trials_frame,
    trials_to_reach,
)
from easerve_core.parallel import open_backend
from easerve_core.reference import slo_for
from easerve_core.slo import TIER_NAMES
from sim.evaluate import DEFAULT_NUM_REQUESTS, SimEvaluator, make_evaluator


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("search", help="HAS: screen and search deployments on the simulator",
                              description=__doc__.split("\n\n")[0])
    add_config(p, "experiment TOML (model, cluster, workload, deployment knobs)")
    p.add_argument("--rate", type=float, required=True, help="target arrival rate, req/s")
    p.add_argument("--tier", default="moderate", help=f"SLO tier: {', '.join(TIER_NAMES)} "
                   "(the config's absolute [slo] limits win)")
    p.add_argument("--trials", type=int, default=30, help="trials per sampler (not for grid)")
    p.add_argument("--sampler", default="tpe", help=f"{' | '.join(SAMPLERS)} (default tpe)")
    p.add_argument("--compare", action="store_true", help="run tpe, random and grid")
    p.add_argument("--storage", help="Optuna storage URL or path (default OUT/study.db)")
    p.add_argument("--workers", type=int, default=1,
                   help="jobs: processes on this machine, or Ray tasks with --backend ray")
    add_backend(p, jobs=False)
    p.add_argument("--join", action="store_true",
                   help="add workers to a study another machine runs (shared --storage)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--top", type=int, default=5, help="print the K best distinct deployments")
    p.add_argument("--num-requests", type=int, default=DEFAULT_NUM_REQUESTS,
                   help="requests simulated per trial")
    add_out(p, "output folder")
    confirm_step.add_arguments(p)
    p.set_defaults(func=run)


def _validate(args: argparse.Namespace) -> list[str]:
    checks.positive("rate", args.rate)
    checks.one_of("tier", args.tier, TIER_NAMES)
    checks.integer("trials", args.trials, minimum=1)
    checks.one_of("sampler", args.sampler, SAMPLERS)
    checks.integer("workers", args.workers, minimum=1)
    checks.integer("seed", args.seed, minimum=0)
    checks.integer("top", args.top, minimum=1)
    checks.integer("num-requests", args.num_requests, minimum=1)
    samplers = list(SAMPLERS) if args.compare else [args.sampler]
    if args.join and "grid" in samplers:
        raise ValueError("--join: the grid is enqueued by one process; join tpe or random studies")
    return samplers


def _study_name(config: ExperimentConfig, args: argparse.Namespace, sampler: str) -> str:
    """Same command -> same name (so a rerun resumes); another input -> another study."""
    ident = json.dumps([config.to_dict(), args.rate, args.tier, args.num_requests, sampler,
                        args.seed, args.trials if sampler != "grid" else 0], sort_keys=True,
                       default=str)
    digest = hashlib.sha1(ident.encode()).hexdigest()[:10]
    stem = config.source.stem if config.source else config.model
    return f"{stem}-{args.tier}-r{args.rate:g}-{sampler}-seed{args.seed}-{digest}"


def _print_screen(report: ScreenReport) -> None:
    print(f"screen: {len(report.candidates)} allocations fit in memory, "
          f"{len(report.survivors)} carry {report.rate_hz:g} req/s", file=sys.stderr)
    for c in report.candidates:
        cap = c.capacity
        mark = "keep" if c in report.survivors else "drop"
        net = "" if math.isinf(cap.network_rps) else f"  network {cap.network_rps:6.2f}"
        print(f"  {mark} {c.allocation.label:<16} encode {cap.encode_rps:8.2f}  prefill "
              f"{cap.prefill_rps:6.2f}  decode {cap.decode_rps:6.2f}{net} req/s", file=sys.stderr)


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """What a search needs: the config, the screen, the space and the evaluator."""

    config: ExperimentConfig
    report: ScreenReport
    space: SearchSpace
    evaluator: SimEvaluator
    resolved: Resolved


def plan_search(config_path: str | Path, *, rate_hz: float, tier: str,
                num_requests: int = DEFAULT_NUM_REQUESTS, num_samples: int = 1) -> Plan:
    """Load the config, screen its cluster at ``rate_hz`` and build the sim evaluator.

    The search space's base is the config's EAServe deployment (a
    ``[deployment] preset`` other than ``easerve`` does not apply: HAS
    searches EAServe's knobs), its batcher's rate hint at the target rate.
    """
    config = load_config(config_path)
    resolved = plan_for(config, preset="easerve", rate_hz=rate_hz, tier=tier)
    plan, profile = resolved.plan, resolved.sim_profile()
    assert plan.slo is not None and plan.workload is not None
    if "live" in config.engine:  # a live-capable config: judge the mix its live model gets
        mix = scaled_mix(config)
        plan = replace(plan, workload=replace(plan.workload, mix=mix),
                       slo=slo_for(config.slo.with_tier(tier) if tier else config.slo, profile, mix,
                                   plan.cluster))
    assert plan.slo is not None and plan.workload is not None
    report = screen(profile, plan.cluster, plan.workload.mix, rate_hz=rate_hz, slo=plan.slo)
    space = SearchSpace(allocations=report.survivor_allocations, base=plan.deployment)
    evaluator = make_evaluator(plan, profile, num_requests=num_requests, options=resolved.sim_options(),
                               num_samples=num_samples)
    return Plan(config=config, report=report, space=space, evaluator=evaluator, resolved=resolved)


class _Bar:
    """A tqdm bar on stderr, opened once the study's planned size is known."""

    def __init__(self, desc: str) -> None:
        self.desc = desc
        self.bar: tqdm[Any] | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = tqdm(total=total, initial=done, desc=self.desc, unit="trial", file=sys.stderr)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run(args: argparse.Namespace) -> int:
    samplers = _validate(args)
    backend = backend_settings(args, num_jobs=args.workers)
    plan = plan_search(args.config, rate_hz=args.rate, tier=args.tier,
                       num_requests=args.num_requests)
    out = Path(args.out)
    check_study_folder(out)  # the study's home: a rerun resumes the study kept there
    confirm_step.check(args, plan.resolved, out)  # before the search: a confirmation it cannot run
    if args.storage:
        open_storage(args.storage)  # fail on an unreachable URL before any work
    storage = args.storage or str(out / "study.db")
    if backend.address is not None and normalize_url(storage).startswith("sqlite"):
        raise ValueError("--backend ray --address: every node opens the study, so its storage must be "
                         "shared: a database server (--storage postgresql+psycopg://...) or a journal "
                         "on a shared path (--storage journal:/shared/has.journal), not an SQLite file")
    out.mkdir(parents=True, exist_ok=True)
    _print_screen(plan.report)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    frames, walls = [], {}
    # local jobs keep the search's own path (this process, or a pool of --workers processes)
    with open_backend(backend) if backend.name == "ray" else nullcontext(None) as pool:
        for sampler in samplers:
            settings = SearchSettings(sampler=sampler, num_trials=args.trials, seed=args.seed,
                                      storage=storage,
                                      study_name=_study_name(plan.config, args, sampler),
                                      num_workers=args.workers, join=args.join)
            start = time.perf_counter()
            bar = _Bar(sampler)
            try:
                study = run_search(plan.space, plan.evaluator, settings, progress=bar, backend=pool)
            finally:
                bar.close()
            walls[sampler] = time.perf_counter() - start
            frames.append(trials_frame(study))
    _write_outputs(out, plan.config, args, plan.report, frames, walls)
    if args.confirm:
        return confirm_step.run(args, plan.config, plan.resolved, pd.concat(frames, ignore_index=True), out)
    return 0


def _write_outputs(folder: Path, config: ExperimentConfig, args: argparse.Namespace,
                   report: ScreenReport, frames: list[pd.DataFrame], walls: Mapping[str, float]
                   ) -> None:
    """Every output file, written beside the study and moved into ``folder`` one by one (atomic)."""
    staging = Path(tempfile.mkdtemp(dir=folder, prefix=".outputs."))
    try:
        _write_files(staging, config, args, report, frames, walls)
        for item in sorted(staging.iterdir()):
            os.replace(item, folder / item.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"wrote {folder}/: trials.parquet, trials.csv, best.toml, convergence.png, search.json")


def _write_files(out: Path, config: ExperimentConfig, args: argparse.Namespace,
                 report: ScreenReport, frames: list[pd.DataFrame], walls: Mapping[str, float]) -> None:
    trials = pd.concat(frames, ignore_index=True)
    trials.to_parquet(out / "trials.parquet", index=False)
    trials.to_csv(out / "trials.csv", index=False)
    best = best_deployment(trials)
    resolved = config.to_dict()
    resolved["deployment"] = {k: v for k, v in best.to_dict().items() if v is not None}
    resolved["workload"] = {**resolved["workload"], "rate_hz": args.rate}
    resolved["slo"] = config.slo.with_tier(args.tier).to_dict()
    (out / "best.toml").write_text(
        f"# easerve search: best of {len(trials)} trials at {args.rate:g} req/s, "
        f"{args.tier} tier\n" + dump_toml(resolved))
    grid_best = next((f["goodput_rps"].max() for f in frames if f["sampler"].eq("grid").all()
                      and len(f)), None)
    summary: dict[str, Any] = {
        "rate_hz": args.rate, "tier": args.tier,
        "screen": {"fit": len(report.candidates), "survivors": len(report.survivors),
                   "survivor_labels": [c.allocation.label for c in report.survivors]},
        "samplers": {},
    }
    for f in frames:
        name = str(f["sampler"].iloc[0])
        reach = None if grid_best is None else trials_to_reach(f, 0.99 * grid_best)
        summary["samplers"][name] = {
            "trials": len(f), "best_goodput_rps": float(f["goodput_rps"].max()),
            "best": top_k(f, 1).iloc[0]["label"], "wall_s": round(walls[name], 3),
            "trials_to_99pct_of_grid": reach,
        }
    (out / "search.json").write_text(json.dumps(summary, indent=2) + "\n")
    _plot(out / "convergence.png", frames, grid_best)
    print(f"top {args.top} distinct deployments (goodput req/s):")
    for _, row in top_k(trials, args.top).iterrows():
        print(f"  {row['goodput_rps']:.3f}  {row['label']}  ({row['sampler']} trial {row['trial']})")


def _plot(path: Path, frames: list[pd.DataFrame], grid_best: float | None) -> None:
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for f in frames:
        ax.step(f.index + 1, f["best_so_far_rps"], where="post", label=str(f["sampler"].iloc[0]))
    if grid_best is not None:
        ax.axhline(0.99 * grid_best, color="grey", ls="--", lw=1, label="99% of grid best")
    ax.set_xlabel("trial")
    ax.set_ylabel("best goodput so far (req/s)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"cannot write {value!r} to TOML")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items() if v is not None)
        return "{ " + inner + " }"
    raise ValueError(f"cannot write {type(value).__name__} to TOML")


def dump_toml(data: Mapping[str, Any]) -> str:
    """Top-level scalars, then one [table] per mapping (nested mappings inline)."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items()
             if v is not None and not isinstance(v, Mapping)]
    for name, table in data.items():
        if isinstance(table, Mapping):
            lines += ["", f"[{name}]"]
            lines += [f"{k} = {_toml_value(v)}" for k, v in table.items() if v is not None]
    return "\n".join(lines) + "\n"
