"""``easerve validate``: the simulator against the live executor on one host (fidelity report).

  easerve validate CONFIG.toml --profile PROFILE.json --out DIR [--repeats N]
  easerve validate CONFIG.toml --profile PROFILE.json --out DIR --sweep [SPEC ...] [--rank-by METRIC]
  easerve validate CONFIG.toml --bench FILE --out DIR [--profile PROFILE.json]

With ``--bench`` the simulator is judged against a real engine's serving
benchmark instead of the live executor, and refit to it
(easerve.cli.bench_calibration, docs/calibration.md section 6).

Runs the config's deployment (or, with ``--sweep``, several variants of it)
on the config's workload in the simulator, with the profile and its host
model, and live (``--repeats`` trials each, the median taken), judged by one
SLO computed from the profile. Writes into DIR: ``fidelity.csv`` (per
deployment and metric: sim, live, relative error, the live spread),
``fidelity.md`` (the table, the bars, the ranking and the command),
``latency_cdf.png`` (TTFT and TPOT distributions of both sides),
``summary.json`` and every run under ``runs/<name>/{sim,live-<i>}``, whose
stage logs ``easerve calibrate --from-runs`` can refit from.

A sweep SPEC changes the base deployment, tokens joined by ``-``: ``b<B>``
(max encode batch), ``s<fraction>`` (remote prefill), a sharing mode
(``dynamic``, ``static``, ``time-slice``, ``none``), ``e<n>``/``p<n>``/``d<n>``
(workers per stage), e.g. ``b4-s0.5-dynamic``; each at most once, and at least one
(a SPEC that changes nothing, or sets a knob twice, is refused). Without SPECs the sweep is
:data:`DEFAULT_SWEEP`.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from calibration.loop.fidelity import (
    BARS_BY_DEVICE,
    METRICS,
    markdown_table,
)
from easerve.cli import Terminated
from easerve.cli.bench_calibration import add_bench_run, validate_bench
from easerve.cli.common import add_config, add_force, add_out, command_parser, given, refuse_unread
from easerve.cli.outputs import RunFolder
from easerve.cli.validate_outputs import write_outputs
from easerve.resources import load_config
from easerve_core.config import ExperimentConfig
from easerve_core.deployment import Deployment, SMSharing, StageGroup
from runtime.files import read_json
from runtime.profiles import load_profile_doc

DEFAULT_SWEEP = ("b1-s1-none", "b4-s1-none", "b4-s0.5-dynamic", "b8-s0.5-static", "b4-s0-time-slice")
_MODES = {m.value for m in SMSharing}
#: processes the host re-measurement runs at once (--host-cores auto)
CONTENTION_PROCS = 4


#: the flags left to their default (None on the command line, so that a flag given is known)
DEFAULTS = {"repeats": 3, "host_cores": "auto", "rank_by": "goodput_rps"}
#: each form's flags besides CONFIG, --out and --force (a flag another form reads is refused:
#: docs/cli.md); --rank-by goes with --sweep
READS = {"live": ("--profile", "--repeats", "--sweep", "--host-cores", "--rank-by", "--device"),
         "recorded": ("--profile", "--live-from", "--sweep", "--host-cores", "--rank-by", "--device"),
         "bench": ("--bench", "--profile", "--bench-run")}
FORMS = {"live": "a live run (no --bench or --live-from)", "recorded": "--live-from", "bench": "--bench"}


def _read(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with :data:`DEFAULTS` filled in, once no flag goes unread (a ``ValueError`` naming it)."""
    if args.bench is not None and (args.sweep is not None or args.live_from is not None):
        raise ValueError("--bench compares one deployment with a benchmark; drop --sweep and --live-from")
    form = "bench" if args.bench is not None else "recorded" if args.live_from is not None else "live"
    refuse_unread(given(args, [f for flags in READS.values() for f in flags]), READS, form, FORMS)
    if args.rank_by is not None and args.sweep is None:
        raise ValueError("--rank-by: ranks the deployments of a --sweep; this run has one deployment")
    unset = {k: v for k, v in DEFAULTS.items() if getattr(args, k) is None}
    return argparse.Namespace(**{**vars(args), **unset})


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "validate", help="compare the simulator with live runs (fidelity report)",
                       doc=__doc__, func=run)
    add_config(p, "experiment TOML (e.g. configs/small_qwen2audio_cpu.toml)")
    p.add_argument("--profile", type=Path, default=None,
                   help="fitted profile (easerve calibrate); required but with --bench "
                        "(default: the config's)")
    add_out(p, "folder to write the report into")
    add_force(p)
    p.add_argument("--repeats", type=int, default=None,
                   help=f"live trials per deployment (default {DEFAULTS['repeats']})")
    p.add_argument("--sweep", nargs="*", default=None, metavar="SPEC",
                   help="run several deployments (default set if no SPEC) and check the ranking")
    p.add_argument("--host-cores", default=None,
                   help="host cores for the simulator's contention model: auto (default: re-measure "
                        "before each deployment; with --live-from, the value measured before those "
                        "trials, from their summary.json), profile (the profile's), or a number")
    p.add_argument("--rank-by", default=None,
                   help=f"with --sweep: the ranking metric, one of: {', '.join(METRICS)} (default "
                        f"{DEFAULTS['rank_by']})")
    p.add_argument("--live-from", type=Path, nargs="+", default=None, metavar="DIR",
                   help="judge the simulator against the live trials of earlier validate folders "
                        "(DIR/runs/<deployment>/live-*) instead of running new ones")
    p.add_argument("--device", default=None,
                   help="cpu | cuda: where the live side runs (default: the config's [live] device); "
                        "the bars follow it (CPU 15%%/25%%, CUDA 5%%/10%% at P50/P99)")
    p.add_argument("--bench", type=Path, default=None, metavar="FILE",
                   help="judge the simulator against a serving benchmark's per-request results instead "
                        "(vllm bench serve --save-result --save-detailed JSON, SGLang bench_serving "
                        "--output-details JSONL, genai-perf profile_export.json), then refit")
    add_bench_run(p)


def parse_spec(base: Deployment, spec: str) -> Deployment:
    """The base deployment changed by one sweep SPEC (see the module docstring)."""
    changes: dict[str, Any] = {}
    tokens = [t.replace("time_slice", "time-slice")  # the one mode whose name holds a '-'
              for t in filter(None, spec.replace("time-slice", "time_slice").split("-"))]
    named = spec if len(spec) <= 40 else spec[:37] + "..."
    if not tokens:
        raise ValueError(f"--sweep: {named!r} changes nothing (b<B>, s<frac>, e/p/d<n>, or a mode)")
    for token in tokens:
        shown = token if len(token) <= 40 else token[:37] + "..."
        if token in _MODES:
            if "sm_sharing" in changes:
                raise ValueError(f"--sweep: {named!r} sets the sharing mode twice")
            changes["sm_sharing"] = token
            continue
        key, value = token[0], token[1:]
        if key in "bsepd" and {"b": "max_encode_batch", "s": "remote_fraction", "e": "encode",
                               "p": "prefill", "d": "decode"}[key] in changes:
            raise ValueError(f"--sweep: {named!r} sets {key}<...> twice")
        try:
            if key == "b":
                changes["max_encode_batch"] = int(value)
            elif key == "s":
                changes["remote_fraction"] = float(value)
            elif key in "epd" and value:
                group = {"e": "encode", "p": "prefill", "d": "decode"}[key]
                changes[group] = StageGroup(num_workers=int(value), tp=getattr(base, group).tp)
            else:
                raise ValueError
        except ValueError:
            raise ValueError(f"--sweep: bad token {shown!r} (b<B>, s<frac>, e/p/d<n>, "
                             f"or a mode: {', '.join(sorted(_MODES))})") from None
    return base.with_(**changes)


def run(args: argparse.Namespace) -> int:
    args = _read(args)
    if args.bench is not None:
        return validate_bench(args)
    if args.profile is None:
        raise ValueError("--profile is required (or give --bench FILE)")
    config = with_device(load_config(args.config, runs_deployment=True), args.device)
    doc = load_profile_doc(args.profile)
    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    if args.rank_by not in METRICS:
        raise ValueError(f"--rank-by must be one of {', '.join(METRICS)}, got {args.rank_by!r}")
    if args.sweep is not None:
        specs = args.sweep or list(DEFAULT_SWEEP)
        deployments = [(s, parse_spec(config.deployment, s)) for s in specs]
        if len(deployments) < 2:
            raise ValueError("--sweep needs at least two deployments")
    else:
        deployments = [("base", config.deployment)]
    # imported here: torch, transformers and the engines take seconds to import
    from calibration.loop.runner import CompareInterrupted, compare, setup
    from live.zoo import ModelSpec

    if ModelSpec(name=config.model).name != doc.model:
        raise ValueError(f"profile {args.profile} is for {doc.model}, the config runs {config.model}")
    fixed, remeasure = _host_cores(args.host_cores)
    s = setup(config, doc, host_cores=fixed)
    folder = RunFolder(args.out, force=args.force)  # checked before the trials, written whole after
    names = [n for n, _ in deployments]
    recorded = None if args.live_from is None else recorded_live(args.live_from, names)
    if recorded is not None and remeasure is not None:
        remeasure = recorded_cores(args.live_from, names)
    speed = remeasure.speed_hz if isinstance(remeasure, _Remeasure) else {}
    try:
        results = compare(config, s, deployments, repeats=args.repeats, host_cores=remeasure,
                          recorded=recorded)
    except CompareInterrupted as exc:  # keep the finished deployments and the unfinished one's trials
        for signum in (signal.SIGINT, signal.SIGTERM):  # a second signal must not cut the write short
            signal.signal(signum, signal.SIG_IGN)
        why = "terminated" if isinstance(exc.__cause__, Terminated) else "interrupted"
        if exc.results:
            with folder as staging:
                write_outputs(args, config, s.plan.slo, exc.results, device=live_device(config),
                              host_speed_hz=speed, out=staging, interrupted=why)
        print(f"easerve validate: {why}; {len(exc.results)} deployment(s) of {len(deployments)} written "
              f"to {args.out if exc.results else 'nowhere (none had a trial)'}", file=sys.stderr)
        return 143 if why == "terminated" else 130
    with folder as staging:
        table = write_outputs(args, config, s.plan.slo, results, device=live_device(config),
                              host_speed_hz=speed, out=staging)
    print(markdown_table(table[["deployment", "metric", "sim", "live", "rel_error"]]))
    return 0


def recorded_live(folders: list[Path], names: list[str]) -> dict[str, list[Any]]:
    """Every recorded live trial of each deployment in earlier validate folders (at least one each)."""
    from runtime.results import read_result

    for folder in folders:
        if not (folder / "runs").is_dir():
            raise ValueError(f"--live-from: {folder} has no runs/ folder (not a validate output)")
    out = {}
    for name in names:
        runs = sorted(p for folder in folders for p in (folder / "runs" / name).glob("live-*") if p.is_dir())
        if not runs:
            where = ", ".join(map(str, folders))
            raise ValueError(f"--live-from: no live runs of deployment {name!r} in {where}")
        out[name] = [read_result(p) for p in runs]
    return out


def recorded_cores(folders: list[Path], names: list[str]) -> Callable[[str], float]:
    """Per deployment, the host cores measured before its recorded trials (``--host-cores auto``).

    Read from each folder's ``summary.json`` (the first folder that has the
    deployment); one that recorded none is refused.
    """
    cores: dict[str, float] = {}
    for folder in folders:
        path = folder / "summary.json"
        summary = read_json(path, what="validate summary") if path.exists() else {}
        recorded = summary.get("host_cores", {}) if isinstance(summary, dict) else summary
        if not isinstance(recorded, dict):
            raise ValueError(f"{path}: host_cores must be an object (deployment: cores), got {recorded!r:.9}")
        for name in names:
            value = recorded.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                      or not math.isfinite(value) or value < 0):
                raise ValueError(f"{path}: host_cores.{name} must be a number >= 0, got {value!r:.40}")
            if name not in cores and value:
                cores[name] = float(value)
    missing = [n for n in names if n not in cores]
    if missing:
        raise ValueError(f"--live-from: no host cores recorded for {', '.join(missing)} "
                         f"(give --host-cores profile or a number)")
    return cores.__getitem__


def with_device(config: ExperimentConfig, device: str | None) -> ExperimentConfig:
    """``config`` with its live side on ``device`` (unchanged for None)."""
    if device is None:
        return config
    if device not in BARS_BY_DEVICE:
        raise ValueError(f"--device must be one of {', '.join(BARS_BY_DEVICE)}, got {device!r}")
    live = {**config.engine.get("live", {}), "device": device}
    return replace(config, engine={**config.engine, "live": live})


def live_device(config: ExperimentConfig) -> str:
    return str(config.engine.get("live", {}).get("device", "cpu"))


class _Remeasure:
    """``--host-cores auto``: the contention test before each deployment (a callable by name).

    It also keeps the test's one-process rate per deployment (calls of its
    fixed one-thread workload per second): how fast the host runs right then,
    which the contention fraction cannot show; ``summary.json`` records it.
    """

    def __init__(self) -> None:
        self.speed_hz: dict[str, float] = {}

    def __call__(self, name: str) -> float:
        from live.profiling_host import fit_cores, measure_contention

        rows = measure_contention(CONTENTION_PROCS)
        cores = fit_cores(rows)
        self.speed_hz[name] = next(r["rate_hz"] for r in rows if r["procs"] == 1)
        print(f"validate: host has {cores:.2f} free cores now "
              f"(one process: {self.speed_hz[name]:.0f} calls/s)", file=sys.stderr)
        return cores


def _host_cores(value: str) -> tuple[float | None, Any]:
    """(a fixed core count or None, a re-measuring callable or None) for ``--host-cores``."""
    if value == "profile":
        return None, None
    if value == "auto":
        return None, _Remeasure()
    try:
        cores = float(value)
    except ValueError:
        cores = -1.0
    if not cores > 0:
        raise ValueError(f"--host-cores must be auto, profile or a number > 0, got {value!r}")
    return cores, None
