"""After the serving check: its files into the repository, its profiles, and a RESULTS.md section.

Usage (this machine, no device; ``F`` is the ``files_at`` folder of the run)::

    python bench/gpu/serve_post.py F --results bench/gpu/results/h200-DATE-serve \\
        --profiles calibration/profiles/h200 --append bench/gpu/RESULTS.md

It copies every returned file into ``--results`` (``files_at`` is read-only),
copies the profiles calibrated and refitted on the device into ``--profiles``
(only when ``summary.json`` says the run was on an H200: a dry run's tiny CPU
profiles never land there), and writes ``RESULTS-section.md`` into
``--results``: every figure read from those files, nothing estimated. With
``--append`` the section is added to RESULTS.md too.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.gpu.serve_plan import STEPS  # noqa: E402

#: where each returned profile goes under --profiles (an H200 run only)
PROFILE_NAMES = {"profile.json": "qwen2-audio-small--h200--sharing.json",
                 "profile-refit.json": "qwen2-audio-small--h200--sharing-refit.json"}


def _csv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _ms(value: Any) -> str:
    return "-" if value in (None, "") else f"{float(value) * 1e3:.1f}"


def _num(value: Any, fmt: str = ".2f") -> str:
    return "-" if value in (None, "") else format(float(value), fmt)


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]


def steps_lines(summary: dict[str, Any]) -> list[str]:
    rows = []
    steps = summary.get("steps", {})  # summary.json sorts its keys: back to the run's order
    for name, s in sorted(steps.items(), key=lambda kv: STEPS.index(kv[0]) if kv[0] in STEPS else len(STEPS)):
        state = f"skipped ({s['skipped']})" if "skipped" in s else ("ok" if s["ok"] else f"exit {s['rc']}")
        rows.append([name, state, _num(s.get("secs"), ".0f"), f"`{s.get('command', '')}`"])
    return _table(["step", "result", "s", "command"], rows)


def calibrate_lines(summary: dict[str, Any]) -> list[str]:
    cal = summary.get("calibrate") or {}
    if "fallback_profile" in cal:
        return [f"Calibration failed; the later steps used `{cal['fallback_profile']}` (see `steps`)."]
    if not cal:
        return ["No calibration (see `steps`)."]
    fit = ", ".join(f"{k} {v:.1%}" for k, v in (cal.get("fit_error") or {}).items())
    held = ", ".join(f"{k} {v:.1%}" for k, v in (cal.get("held_out_error") or {}).items())
    table = (cal.get("sm_share_table") or {}).get("shares", {})
    lines = [f"Profile `{cal.get('gpu')}`: fit error {fit}; held-out {held}.",
             "SM-share table (measured on the levels): "
             + ", ".join(f"B{b} {s:g}" for b, s in table.items()) + ".",
             f"Device sharing: `num_host_cores` = {_num(cal.get('num_host_cores'))} "
             "(processes at full speed)."]
    rows = [[r.get("procs"), _num(r.get("speed_frac"), ".3f"), _num(r.get("rate_hz"), ".1f")]
            for r in cal.get("device_sharing") or []]
    if rows:
        lines += ["", *_table(["processes at once", "speed of each (vs one)", "calls/s of each"], rows)]
    return lines


def serve_lines(summary: dict[str, Any]) -> list[str]:
    serve, cap = summary.get("serve") or {}, summary.get("capacity") or {}
    if not serve:
        return ["No serving trial finished (see `steps`)."]
    lines = [f"Offered {cap.get('rate_hz')} req/s, {cap.get('num_requests')} requests per trial "
             f"({cap.get('capacity_frac')} x the simulated capacity "
             f"{_num(cap.get('sim_capacity_rps'), '.1f')} "
             "req/s of the dynamic deployment at an overload).", ""]
    rows = []
    for mode, m in serve["modes"].items():
        rows.append([mode, m["deployment"], m["live_runs"], _num(m["throughput_rps"]), _num(m["goodput_rps"]),
                     _ms(m["ttft_p50_s"]), _ms(m["ttft_p99_s"]), _ms(m["tpot_p50_s"]), _ms(m["tpot_p99_s"])])
    lines += _table(["mode", "deployment", "trials", "req/s", "goodput", "TTFT P50 ms", "TTFT P99 ms",
                     "TPOT P50 ms", "TPOT P99 ms"], rows)
    lines += ["", "SM split applied (from the encode worker's stage log, shares mapped to the built "
              "lanes):", ""]
    rows = []
    for mode, m in serve["modes"].items():
        s = m["split"]
        enc = "; ".join(f"B{b}: " + ", ".join(f"{k} SMs x{v}" for k, v in c.items())
                        for b, c in sorted(s["encode_sms_by_batch_size"].items(), key=lambda x: int(x[0])))
        pre = ", ".join(f"{k} SMs x{v}" for k, v in s["local_prefill_sms"].items())
        rows.append([mode, s["encode_batches"], enc, s["local_prefills"],
                     s["local_prefills_during_encode"], pre])
    return lines + _table(["mode", "encode batches", "encode lane per batch size", "local prefills",
                           "of them during an encode", "local prefill lanes"], rows)


def fidelity_lines(summary: dict[str, Any]) -> list[str]:
    rounds = summary.get("fidelity") or {}
    if not rounds:
        return ["No fidelity round finished (see `steps`)."]
    rows = []
    for name, r in rounds.items():
        for b in r["bars"]:
            rows.append([name, r["profile"], r["repeats"], b["metric"],
                         _num(b["median_abs_rel_error"], ".1%"), f"{b['bar']:.0%}",
                         "met" if b["passes"] else "missed"])
    return _table(["round", "profile", "trials each", "metric", "median abs error", "bar", ""], rows)


def search_lines(summary: dict[str, Any]) -> list[str]:
    search = summary.get("search")
    if not search:
        return ["No search (see `steps`)."]
    conf = search.get("confirm")
    step = summary.get("steps", {}).get("search", {})
    head = f"{'Full' if search.get('full') else 'Reduced'} search: `{step.get('command', '')}`."
    if not conf:
        return [head, "The confirmation wrote no report (see `steps`)."]
    lines = [head, f"Confirmation: `{conf['command']}`, {conf['wall_s']} s, "
                   f"interrupted: {conf['interrupted']}."]
    for side in ("before_refit", "after_refit"):
        data = conf.get(side) or {}
        errors = ", ".join(f"{k} {v:.1%}" for k, v in (data.get("errors") or {}).items() if v is not None)
        rank = data.get("ranking") or {}
        if errors or rank:
            lines.append(f"- {side.replace('_', ' ')}: median abs errors {errors}; live best "
                         f"{rank.get('live_best')}, sim pick {rank.get('sim_pick')}, "
                         f"regret {rank.get('regret')}.")
    return lines


def call_lines(rows: list[dict[str, str]]) -> list[str]:
    if not rows:
        return ["No encode-call rows (see `steps`)."]
    return _table(["family", "size", "item tokens", "wall ms", "kernel ms", "overhead ms", "overhead"],
                  [[r["family"], r["size"], r["item_tokens"], r["wall_ms"], r["kernel_ms"] or "-",
                    r["overhead_ms"] or "-", _num(r["overhead_frac"], ".0%")] for r in rows])


def kernel_lines(summary: dict[str, Any]) -> list[str]:
    """The kernels step's table: device time against the measured and fitted-roofline prices."""
    k = summary.get("kernels")
    if not k:
        return ["No kernel timings (see `steps`)."]
    lines = [f"{k['device_name']}, {k['dtype']}, torch {k['torch']}; median of {k['reps']} timings of "
             f"{k['inner']} launches. Measured: {k['measured_source']}; fitted: `{k['fitted']}`."
             + (" Dry run: shrunk shapes on the CPU, the ratios mean nothing." if k.get("dry_run") else ""),
             ""]
    rows = []
    for p in k["points"]:
        shape = (f"{p['m']}x{p['n']}x{p['k']}" if p["kind"] == "gemm"
                 else f"b{p['batch']} t{p['tokens']} h{p['heads']}/{p['kv_heads']} d{p['head_dim']}")
        rows.append([p["kind"], p["label"], shape, _num(p["time_s"] * 1e6, ".1f"),
                     _num(p["measured_s"] * 1e6 if p["measured_s"] is not None else None, ".1f"),
                     p["measured_from"] or "-", _num(p["fitted_s"] * 1e6, ".1f"),
                     _num(p["time_over_measured"]), _num(p["time_over_fitted"])])
    lines += _table(["kind", "op", "shape", "device us", "measured us", "from", "fitted us",
                     "device / measured", "device / fitted"], rows)
    med = k.get("medians") or {}
    medians = "; ".join(f"{kind} device/measured {_num(m.get('time_over_measured'))}, device/fitted "
                        f"{_num(m.get('time_over_fitted'))}" for kind, m in med.items())
    return [*lines, "", f"Medians: {medians}."]


def section(folder: Path, *, results: str) -> str:
    """The RESULTS.md section of one run's files (every figure read from them)."""
    summary = json.loads((folder / "summary.json").read_text())
    env = summary.get("env", {})
    dry = env.get("gpu_label") == "cpu-dry-run"
    title = ("DRY RUN on the CPU (tiny model): not GPU figures" if dry
             else env.get("device_name", env.get("device")))
    versions = ", ".join(f"{k} {v}" for k, v in env.get("versions", {}).items() if v)
    lines = [f"## Serving with local Prefill under SM sharing (issue 20): {title}", "",
             f"Run {env.get('started_utc')} to {summary.get('finished_utc')} ({summary.get('wall_s')} s), "
             f"runner `{env.get('runner')}`; {versions}. Files: `{results}`.", "",
             *steps_lines(summary), "", "### Calibration on the device", "", *calibrate_lines(summary), "",
             "### a. EAServe with local Prefill (s < 1), open loop, per partitioner", "",
             *serve_lines(summary),
             "", "### b. Fidelity on new trials (bars: median abs error across deployments)", "",
             *fidelity_lines(summary), "", "### c. HAS's live confirmation", "", *search_lines(summary), "",
             "### d. The live encode call beyond its kernels", "",
             *call_lines(_csv(folder / "encode_call.csv")), "",
             "### Kernels against the measured (h200_sxm) and fitted-roofline prices", "",
             *kernel_lines(summary), ""]
    errors = summary.get("errors") or {}
    if errors:
        lines += ["### Errors", "", *(f"- `{k}`: {v.splitlines()[0]}" for k, v in errors.items()), ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", type=Path, help="the run's files (files_at of the device reply)")
    parser.add_argument("--results", type=Path, required=True, help="folder to copy the files into")
    parser.add_argument("--profiles", type=Path, default=None, help="where the H200 profiles go")
    parser.add_argument("--append", type=Path, default=None, help="RESULTS.md to add the section to")
    args = parser.parse_args(argv)
    if not (args.files / "summary.json").exists():
        print(f"serve_post: {args.files} has no summary.json", file=sys.stderr)
        return 2
    args.results.mkdir(parents=True, exist_ok=True)
    for p in args.files.iterdir():
        if p.is_file():
            dest = args.results / p.name
            shutil.copyfile(p, dest)
            dest.chmod(dest.stat().st_mode | stat.S_IWUSR)
    summary = json.loads((args.results / "summary.json").read_text())
    if args.profiles is not None:
        if summary.get("env", {}).get("gpu_label") != "h200":
            print("serve_post: not an H200 run; no profile copied", file=sys.stderr)
        else:
            args.profiles.mkdir(parents=True, exist_ok=True)
            for name, target in PROFILE_NAMES.items():
                if (args.results / name).exists():
                    shutil.copyfile(args.results / name, args.profiles / target)
                    print(f"serve_post: {args.profiles / target}")
    text = section(args.results, results=str(args.results))
    (args.results / "RESULTS-section.md").write_text(text)
    if args.append is not None:
        with open(args.append, "a") as fh:
            fh.write("\n" + text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
