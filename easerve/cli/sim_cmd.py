"""``easerve sim CONFIG.toml --out DIR``: simulate one deployment on one workload.

Reads an experiment config (DESIGN.md, easerve_core.config), builds the
profile (``[profile] path`` or the analytic profile of the model on the GPU),
applies the preset (``--preset`` or ``[deployment] preset``; default
``easerve``), draws the workload with the config's seed (``--rate`` rescales
it), simulates, and writes into DIR: ``records.parquet``,
``utilization.parquet``, ``stage_log.parquet``, ``queues.parquet``,
``summary.json`` (with the SLO of the config's tier), ``config.json`` (the
resolved config) and ``latency.png`` / ``encoder_utilization.png``.
Every input is validated before anything is written.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from calibration import analytic_profile, cluster_for, load_profile
from easerve_core import Architecture, Deployment
from easerve_core.config import ExperimentConfig, load_experiment
from easerve_core.presets import PRESETS, apply_preset
from easerve_core.profile import load_profile_doc
from easerve_core.reference import slo_for
from easerve_core.workload import generate
from sim import SimOptions, simulate
from sim.plots import latency_plot, utilization_plot

#: runs shorter than this (wall seconds) never show the progress bar
PROGRESS_DELAY_S = 2.0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser("sim", help="simulate a deployment on a workload (SimPy model)",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", type=Path, help="experiment TOML (see configs/)")
    p.add_argument("--out", type=Path, required=True, help="folder to write results into")
    p.add_argument("--preset", default=None, help=f"baseline preset: {', '.join(sorted(PRESETS))}")
    p.add_argument("--rate", type=float, default=None, help="override the mean arrival rate (req/s)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.set_defaults(func=run)


def _profile(config: ExperimentConfig) -> tuple[Any, Any]:
    """The profile object and the SM-share table its file carries (None: derive)."""
    gpu = str(config.cluster["gpu"])
    if config.profile_path is None:
        return analytic_profile(config.model, gpu), None
    doc = load_profile_doc(config.profile_path)
    if doc.model != config.model or doc.gpu != gpu:
        raise ValueError(f"profile.path is for {doc.model} on {doc.gpu}, "
                         f"but the config asks for {config.model} on {gpu}")
    return load_profile(config.profile_path), doc.sm_share_table


def run(args: argparse.Namespace) -> int:
    config = load_experiment(args.config)
    profile, table = _profile(config)
    num_gpus = int(config.cluster.get("num_gpus", 8))
    cluster = config.build_cluster(cluster_for(str(config.cluster["gpu"]), num_gpus))
    preset = args.preset or config.deployment_preset or "easerve"
    deployment = apply_preset(preset, config.deployment, cluster)
    options = SimOptions.from_dict(config.engine.get("sim", {}))
    spec = config.workload
    if args.rate is not None:
        if not math.isfinite(args.rate) or args.rate <= 0:
            raise ValueError(f"--rate must be a positive number, got {args.rate!r}")
        spec = spec.with_rate(args.rate)
    requests = generate(spec, np.random.default_rng(config.seed))
    slo = slo_for(config.slo_tier, profile, spec.mix, cluster)
    with tqdm(total=len(requests), desc=f"sim {preset}", unit="req", delay=PROGRESS_DELAY_S,
              leave=False) as bar:
        result = simulate(deployment, requests, profile, cluster=cluster, seed=config.seed,
                          options=options, sm_share_table=table, progress=bar.update)
    resolved = _resolved(config, preset, deployment, options, args.rate)
    result = replace(result, config=resolved, meta={**result.meta, "preset": preset})
    out = result.write(args.out, slo=slo)
    if not args.no_plots:
        _plots(result, deployment, out, slo, title=f"{config.model} {preset} {deployment.label()}")
    s = result.summary(slo)
    print(f"{preset}: {s.num_ok}/{s.num_requests} ok, throughput {s.throughput_rps:.3f} req/s, "
          f"goodput {s.goodput_rps:.3f} req/s ({slo.tier}), TTFT mean {s.ttft_mean_s:.3f} s, "
          f"TPOT mean {s.tpot_mean_s * 1e3:.1f} ms -> {out}")
    return 0


def _resolved(config: ExperimentConfig, preset: str, deployment: Deployment, options: SimOptions,
              rate: float | None) -> dict[str, Any]:
    out = config.to_dict()
    out["deployment"] = {**deployment.to_dict(), "preset": preset}
    out["sim"] = options.to_dict()
    if rate is not None:
        out["workload"] = {**out["workload"], "rate_hz": rate}
    return out


def _plots(result: Any, deployment: Deployment, out: Path, slo: Any, *, title: str) -> None:
    latency_plot(result.records, out / "latency.png", slo=slo, title=title)
    if deployment.architecture is Architecture.AGGREGATED:
        gpus = list(range(deployment.decode.num_gpus))
    else:
        gpus = list(range(deployment.encode.num_gpus))
    end = float(result.records["finish_s"].max())
    utilization_plot(result.utilization, gpus, out / "encoder_utilization.png",
                     end_s=end if math.isfinite(end) else 0.0, title=f"encoder GPUs: {title}")
