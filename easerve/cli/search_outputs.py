"""``easerve search``'s output files: the trial table, the recheck, best.toml, search.json, the plot.

Written beside the study into a staging folder inside the output folder
and moved in one by one (:func:`write_outputs`), so a reader never sees a
half-written file; a rerun replaces them (and a recipe folder) whole.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from easerve.recipes import write_recipe
from easerve_core.config import ExperimentConfig
from easerve_core.has import (
    Rechecked,
    ScreenReport,
    best_deployment,
    recheck_frame,
    top_k,
    trials_to_reach,
)
from runtime.configs import portable_dict
from runtime.files import staged_into


def write_outputs(folder: Path, config: ExperimentConfig, args: argparse.Namespace,
                   report: ScreenReport, frames: list[pd.DataFrame], walls: Mapping[str, float],
                   rechecked: list[Rechecked]) -> None:
    """Every output file, written beside the study and moved into ``folder`` one by one (atomic)."""
    with staged_into(folder) as staging:  # a rerun's recipe folder is replaced whole
        _write_files(staging, config, args, report, frames, walls, rechecked)
    recipe = f", recipe-{args.emit}/" if args.emit else ""
    print(f"wrote {folder}/: trials.parquet, trials.csv, recheck.csv, best.toml, convergence.png, "
          f"search.json{recipe}")


def _pick_doc(rechecked: list[Rechecked]) -> dict[str, Any] | None:
    if not rechecked:
        return None
    pick = rechecked[0]
    low, high = pick.interval()
    merged = pick.merged
    return {"label": pick.label, "goodput_rps": merged.goodput_rps,
            "ci95_rps": None if math.isnan(low) else [low, high],  # one stream: no interval
            "attainment": merged.attainment, "unstable": merged.unstable,
            "goodput_per_seed_rps": pick.goodputs, "num_seeds": len(pick.verdicts),
            "requests_per_stream": merged.num_requests // len(pick.verdicts),
            "ties": [r.label for r in rechecked[1:] if pick.ties(r)]}


def _write_files(out: Path, config: ExperimentConfig, args: argparse.Namespace,
                 report: ScreenReport, frames: list[pd.DataFrame], walls: Mapping[str, float],
                 rechecked: list[Rechecked]) -> None:
    trials = pd.concat(frames, ignore_index=True)
    trials.to_parquet(out / "trials.parquet", index=False)
    trials.to_csv(out / "trials.csv", index=False)
    recheck_frame(rechecked).to_csv(out / "recheck.csv", index=False)
    if trials.empty:
        raise ValueError("--emit: the study holds no finished trial, so there is no deployment to write"
                         if args.emit else "the study holds no finished trial")
    best = rechecked[0].deployment if rechecked else best_deployment(trials)
    if args.emit is not None:
        recipe = out / f"recipe-{args.emit}"
        recipe.mkdir()
        write_recipe(args.emit, deployment=best, config=config, rate_hz=args.rate, folder=recipe)
    resolved = portable_dict(config, out.parent)  # staging sits in the output folder
    resolved["deployment"] = {k: v for k, v in best.to_dict().items() if v is not None}
    resolved["workload"] = {**resolved["workload"], "rate_hz": args.rate}
    if rechecked and "num_requests" in resolved["workload"]:  # easerve sim replays the first long stream
        resolved["workload"]["num_requests"] = rechecked[0].verdicts[0].num_requests
    resolved["slo"] = config.slo.with_tier(args.tier).to_dict()
    how = (f"the best of the top {len(rechecked)} re-run on {len(rechecked[0].verdicts)} longer streams"
           if rechecked else "the best trial")
    (out / "best.toml").write_text(
        f"# easerve search: {how}, of {len(trials)} trials at {args.rate:g} req/s, "
        f"{args.tier} tier\n" + dump_toml(resolved))
    grid_best = next((f["goodput_rps"].max() for f in frames if f["sampler"].eq("grid").all()
                      and len(f)), None)
    summary: dict[str, Any] = {
        "rate_hz": args.rate, "tier": args.tier,
        "screen": {"fit": len(report.candidates), "survivors": len(report.survivors),
                   "survivor_labels": [c.allocation.label for c in report.survivors]},
        "trial_s": args.trial_s,
        "pick": _pick_doc(rechecked),
        "samplers": {},
    }
    for f in frames:
        name = str(f["sampler"].iloc[0])
        reach = None if grid_best is None else trials_to_reach(f, 0.99 * grid_best)
        summary["samplers"][name] = {
            "trials": len(f), "pruned": int(f["pruned"].sum()), "unstable": int(f["unstable"].sum()),
            "best_goodput_rps": float(f["best_so_far_rps"].iloc[-1]),
            "best": top_k(f, 1).iloc[0]["label"], "wall_s": round(walls[name], 3),
            "trials_to_99pct_of_grid": reach,
        }
    (out / "search.json").write_text(json.dumps(summary, indent=2) + "\n")
    _plot(out / "convergence.png", frames, grid_best)
    print(f"top {args.top} distinct deployments that finished the ladder (goodput req/s):")
    for _, row in top_k(trials, args.top).iterrows():
        mark = "  UNSTABLE" if row["unstable"] else ""
        print(f"  {row['goodput_rps']:.3f}  {row['label']}  ({row['sampler']} trial {row['trial']}){mark}")
    if rechecked:
        _print_recheck(rechecked, trace=config.workload.trace is not None)


def _print_recheck(rechecked: list[Rechecked], *, trace: bool) -> None:
    """Each rechecked deployment's goodput (and interval, and the pick's paired lead over it, where
    there are several streams), then the pick and how sure it is."""
    pick = rechecked[0]
    several = len(pick.verdicts) > 1
    per_stream = pick.merged.num_requests // len(pick.verdicts)
    what = (f"{len(pick.verdicts)} streams" if several else "1 stream" + (", the trace" if trace else ""))
    print(f"recheck on {what} of {per_stream} requests (goodput req/s"
          + (", 95% interval, attainment; the pick's lead over each, paired on the same streams):"
             if several else ", attainment):"))
    for r in rechecked:
        line = f"  {r.merged.goodput_rps:.3f}"
        if several:
            low, high = r.interval()
            line += f" [{low:.3f}, {high:.3f}]"
        line += f"  {r.merged.attainment:.3f}  {r.label}" + ("  UNSTABLE" if r.merged.unstable else "")
        if several and r is not pick:
            lead, lead_low, lead_high = pick.lead_over(r)
            line += f"  (lead {lead:+.3f} [{lead_low:+.3f}, {lead_high:+.3f}]" + (
                ": a tie)" if pick.ties(r) else ")")
        print(line)
    print(f"pick: {pick.label}{_how_sure(rechecked, trace=trace)}")


def _how_sure(rechecked: list[Rechecked], *, trace: bool) -> str:
    """What the recheck says of the pick against the rest (docs/has.md §9, "How sure")."""
    pick, rest = rechecked[0], rechecked[1:]
    if not rest:
        return ""
    if len(pick.verdicts) < 2:
        why = "a trace is one stream" if trace else "one stream each (--recheck-seeds 1)"
        return f" ({why}: no interval says how sure)"
    ties = [r for r in rest if pick.ties(r)]
    if not ties:
        return (f" (none of the other {len(rest)} ties it on these streams: each lead's 95% interval is "
                "above 0, or the other is unstable)")
    return (f" (ties {len(ties)} of the other {len(rest)}: their leads' 95% intervals hold 0, so any of "
            "them serves this rate as well on these streams)")


def _plot(path: Path, frames: list[pd.DataFrame], grid_best: float | None) -> None:
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for f in frames:
        ax.step(f.index + 1, f["best_so_far_rps"], where="post", label=str(f["sampler"].iloc[0]))
    if grid_best is not None:
        ax.axhline(0.99 * grid_best, color="grey", ls="--", lw=1, label="99% of grid best")
    ax.set_xlabel("trial")
    ax.set_ylabel("best goodput so far (req/s)\nstable, on the full stream")
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
