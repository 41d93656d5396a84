"""``validate --bench`` and ``calibrate --from-bench``: the simulator against a real engine's benchmark.

  easerve validate CONFIG --bench FILE --out DIR [--profile P] [--bench-run N]
  easerve calibrate --from-bench FILE --config CONFIG --out P.json [--profile BASE] [--bench-run N]

Both read the benchmark (vLLM, SGLang or genai-perf; calibration.bench.readers),
check it against the config's workload, simulate the config's deployment on
its requests at its rate with the profile (``--profile``, else the config's
own) and refit the two scales a benchmark determines (calibration.bench.refit).
``validate`` prints the error table before and after the refit and writes
``fidelity.csv``, ``fidelity.md``, ``summary.json``, ``bench_records.csv``,
the simulator's runs and ``refit-profile.json`` into DIR; ``calibrate``
writes the refit profile. Bad input is one line and exit status 2, before
anything is written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from calibration.bench.compare import BenchCase, error_rows, metrics_of, prepare, simulate_case
from calibration.bench.readers import BenchRun, read_bench
from calibration.bench.refit import Refit, base_profile, fit_scales, refit_doc
from calibration.loop.fidelity import markdown_table
from easerve.cli.outputs import RunFolder
from easerve.resources import load_config
from easerve_core.config import ExperimentConfig
from easerve_core.profile import ProfileDoc
from runtime.profiles import load_profile_doc, save_profile_doc

COLUMNS = ["profile", "metric", "sim", "bench", "rel_error"]


def add_bench_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bench-run", type=int, default=None, metavar="N",
                        help="which run of a benchmark file holding several (SGLang JSONL lines, "
                             "genai-perf experiments), 0-based")


def _progress(what: str) -> None:
    print(f"bench refit: {what}", file=sys.stderr)


def _compare(config: ExperimentConfig, path: Path, run_index: int | None,
             profile_path: Path | None) -> tuple[BenchRun, BenchCase, ProfileDoc, pd.DataFrame, Refit]:
    """Read, check, simulate as is, refit: everything before a byte is written."""
    run = read_bench(path, run=run_index)
    profile, doc = base_profile(config, load_profile_doc(profile_path) if profile_path else None)
    case = prepare(run, config, profile, doc)
    before = simulate_case(case, config, profile, doc)
    refit = fit_scales(case, config, profile, doc, progress=_progress)
    return run, case, doc, before, refit


def _table(case: BenchCase, before: pd.DataFrame, refit: Refit) -> pd.DataFrame:
    rows = error_rows("as is", metrics_of(before, case.slo), case.bench_metrics)
    rows += error_rows("refit", refit.metrics, case.bench_metrics)
    return pd.DataFrame(rows, columns=COLUMNS)


def _header(run: BenchRun, case: BenchCase, refit: Refit) -> str:
    rate = f"{case.rate_hz:.4g} req/s" if run.send_s is None else "recorded send times"
    return (f"benchmark {run.path} ({run.tool}): {run.num_requests} requests ({run.num_failed} failed, "
            f"left out), {rate}; SLO ({case.slo.tier}) TTFT {case.slo.ttft_s:.4g} s, TPOT "
            f"{case.slo.tpot_s:.4g} s; refit: first_token_scale {refit.first_token_scale:.4g}, "
            f"decode_scale {refit.decode_scale:.4g}")


def validate_bench(args: argparse.Namespace) -> int:
    config = load_config(args.config, runs_deployment=True)
    folder = RunFolder(args.out, force=args.force)
    run, case, doc, before, refit = _compare(config, args.bench, args.bench_run, args.profile)
    table = _table(case, before, refit)
    new = refit_doc(doc, refit, run, case, before=metrics_of(before, case.slo))
    header = _header(run, case, refit)
    with folder as staging:
        table.to_csv(staging / "fidelity.csv", index=False)
        case.bench.to_csv(staging / "bench_records.csv", index=False)
        before.to_csv(staging / "sim_records.csv", index=False)
        refit.records.to_csv(staging / "sim_records_refit.csv", index=False)
        save_profile_doc(new, staging / "refit-profile.json")
        summary: dict[str, Any] = {"config": str(args.config), "benchmark": new.params["fit"]["benchmark"],
                                   "profile": str(args.profile) if args.profile else "the config's",
                                   "first_token_scale": refit.first_token_scale,
                                   "decode_scale": refit.decode_scale, "fit": new.params["fit"]}
        (staging / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        (staging / "fidelity.md").write_text(
            f"# Simulator vs benchmark ({args.config})\n\n{header}\n\n"
            f"Relative error = (sim - bench) / bench.\n\n{markdown_table(table)}\n")
    print(header)
    print(markdown_table(table))
    print(f"wrote {args.out} (refit profile: {args.out / 'refit-profile.json'})")
    return 0


def calibrate_bench(args: argparse.Namespace) -> int:
    if args.config is None:
        raise ValueError("--from-bench needs --config CONFIG (the deployment and workload benchmarked)")
    config = load_config(args.config, runs_deployment=True)
    run, case, doc, before, refit = _compare(config, args.from_bench, args.bench_run, args.profile)
    new = refit_doc(doc, refit, run, case, before=metrics_of(before, case.slo))
    save_profile_doc(new, args.out)
    print(_header(run, case, refit))
    print(markdown_table(_table(case, before, refit)))
    print(f"wrote scaled profile {new.model} on {new.gpu} to {args.out}")
    return 0
