"""``easerve validate``'s outputs: the runs, ``fidelity.csv``/``.md``, the CDF plot and ``summary.json``.

:func:`write_outputs` turns the compared deployments (sim and live runs of
each, :mod:`calibration.loop.fidelity` computing the errors, bars and
ranking) into the run folder; :mod:`easerve.cli.validate_cmd` runs the
comparison and calls it, also for an interrupted run.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

import pandas as pd

from calibration.loop.fidelity import (
    BARS_BY_DEVICE,
    TABLE_COLUMNS,
    bar_check,
    distribution_plot,
    fidelity_rows,
    markdown_table,
    ranking,
    side_metrics,
)
from easerve_core.config import ExperimentConfig, model_label
from runtime.results import write_result


def write_outputs(args: argparse.Namespace, config: ExperimentConfig, slo: Any, results: list[Any], *,
                  device: str, host_speed_hz: dict[str, float], out: Path,
                  interrupted: str | None = None) -> pd.DataFrame:
    """Write every run, ``fidelity.csv``, ``latency_cdf.png``, ``summary.json`` and ``fidelity.md``
    of ``results`` (judged on ``device``'s bars) into ``out``; return the fidelity table."""
    rows, sides = [], []
    for c in results:
        sim_m, _ = side_metrics([c.sim.records], slo)
        live_m, live_spread = side_metrics([r.records for r in c.live], slo)
        rows += fidelity_rows(c.name, sim_m, live_m, live_spread, len(c.live))
        sides.append((c.name, [c.sim.records], [r.records for r in c.live]))
        write_result(c.sim, out / "runs" / c.name / "sim", slo=slo)
        for i, r in enumerate(c.live):
            write_result(r, out / "runs" / c.name / f"live-{i}", slo=slo)
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    table.to_csv(out / "fidelity.csv", index=False)
    bars = bar_check(table, BARS_BY_DEVICE[device])
    rank = ranking(table, args.rank_by) if len(results) > 1 else None
    distribution_plot(sides, out / "latency_cdf.png",
                      title=f"{model_label(config.model)} {config.model_size}: sim vs live")
    command = " ".join(shlex.quote(str(a)) for a in _argv(args))
    repeats: Any = args.repeats if args.live_from is None else {c.name: len(c.live) for c in results}
    summary = {"config": str(args.config), "profile": str(args.profile), "repeats": repeats,
               "live": "new trials" if args.live_from is None else "recorded trials (--live-from)",
               "device": device,
               "host_cores": {c.name: (c.host.effects.num_host_cores if c.host else None) for c in results},
               "host_speed_hz": host_speed_hz,
               "slo": {"tier": slo.tier, "ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s},
               "deployments": {c.name: c.deployment.label() for c in results},
               "bars": bars.to_dict(orient="records"), "ranking": rank,
               "command": f"easerve validate {command}"}
    if interrupted is not None:  # the last deployment may be unfinished: its live side holds what ran
        summary["interrupted"] = {"why": interrupted, "deployments_done": [c.name for c in results]}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    (out / "fidelity.md").write_text(_markdown(table, bars, rank, summary))
    return table


def _argv(args: argparse.Namespace) -> list[Any]:
    """The command line that reproduces this report."""
    out: list[Any] = [args.config, "--profile", args.profile, "--out", args.out, "--repeats", args.repeats,
                      "--host-cores", args.host_cores]
    if args.device is not None:
        out += ["--device", args.device]
    if args.live_from is not None:
        out += ["--live-from", *args.live_from]
    if args.sweep is not None:
        out += ["--rank-by", args.rank_by, "--sweep", *args.sweep]
    return out


def _markdown(table: pd.DataFrame, bars: pd.DataFrame, rank: dict[str, Any] | None,
              summary: dict[str, Any]) -> str:
    lines = [f"# Fidelity: simulator vs live ({summary['config']})", "",
             f"Command: `{summary['command']}`", "",
             f"Profile: `{summary['profile']}`; live device: {summary['device']}; "
             f"live: {summary['live']}, per deployment: {summary['repeats']} "
             f"(medians); SLO ({summary['slo']['tier']}): TTFT {summary['slo']['ttft_s']:.4g} s, "
             f"TPOT {summary['slo']['tpot_s']:.4g} s.", "", "## Deployments", ""]
    lines += [f"- `{k}`: {v}" for k, v in summary["deployments"].items()]
    lines += ["", "## Sim vs live (relative error = (sim - live) / live)", "", markdown_table(table), "",
              "## Bars (median |relative error| across deployments)", "", markdown_table(bars), ""]
    if rank is not None:
        lines += ["## Ranking", "", f"- metric: `{rank['metric']}`; Kendall tau {rank['kendall_tau']:.3f}",
                  f"- simulator order: {rank['sim_order']}", f"- live order: {rank['live_order']}",
                  f"- live best `{rank['live_best']}` is the simulator's #{rank['live_best_sim_rank']} "
                  f"(in its top two: {rank['live_best_in_sim_top2']})", ""]
    return "\n".join(lines)
