"""``easerve calibrate``: profile the live stages in isolation (or refit from live runs) and fit a profile.

  easerve calibrate --model M --size S --device cpu|cuda --out PROFILE.json [--quick] [--reps N]
  easerve calibrate --from-runs DIR [DIR ...] --out PROFILE.json [--profile BASE.json]
  easerve calibrate --from-bench FILE --config CONFIG.toml --out PROFILE.json [--profile BASE.json]

The first form measures encode per batch size and item size (and at the
five share levels, for the SM-share table), prefill per length, decode per
batch size and context, and on the CPU the host (transfers per byte, core
contention, co-location, decode-loop overhead); every point is the median of
``--reps`` repeats and the profile keeps each stage's spread. It fits the
stage models (calibration.fit), checks them on held-out points, and writes a
``fitted`` profile with the fit error per stage, the held-out error, the
SM-share table and the host model (docs/calibration.md).

The second form refits the stage models from the ``stage_log.parquet`` of
live runs, taking the host contention out with the host model of
``--profile`` (whose table and host model it keeps), and refits the host
model's traced effects: pauses, warm-ups, batch changes and hand-offs
(calibration.loop.refit_profile).

The third refits a profile (``--profile``, else the config's) to a real
engine's serving benchmark: the scales on the first-token stages and the
decode step that bring the simulator's median TTFT and TPOT to the
benchmark's (easerve.cli.bench_calibration, docs/calibration.md section 6).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from calibration.loop.samples import CPU_SHARE_STEPS, calibrated_doc, share_table, spread_summary, to_samples
from easerve.cli.bench_calibration import add_bench_run, calibrate_bench
from easerve.cli.common import add_out, command_parser, given, refuse_unread
from easerve.cli.outputs import check_file
from easerve_core.profile import ProfileDoc
from runtime.profiles import load_profile_doc, save_profile_doc

DEVICES = ("cpu", "cuda")
#: each form's flags besides --out (a flag another form reads is refused: docs/cli.md)
READS = {"measure": ("--model", "--size", "--device", "--reps", "--encode-threads", "--quick"),
         "runs": ("--from-runs", "--profile"),
         "bench": ("--from-bench", "--config", "--profile", "--bench-run")}
FORMS = {"measure": "measuring (--model)", "runs": "--from-runs", "bench": "--from-bench"}


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "calibrate", help="profile the live stages (or refit from live runs) "
                       "and write a fitted profile", doc=__doc__, func=run)
    p.add_argument("--model", help="live model family or alias (qwen2-audio, llava-next, qwen2.5-vl)")
    p.add_argument("--size", default=None, help="tiny | small | full (default small)")
    p.add_argument("--device", default=None, help="cpu | cuda (default cpu)")
    add_out(p, "profile JSON to write")
    p.add_argument("--reps", type=int, default=None, help="repeats per point (default: the plan's)")
    p.add_argument("--encode-threads", type=int, default=None,
                   help="CPU: threads the five share levels divide (default 2)")
    p.add_argument("--quick", action="store_true", help="a few points per stage (tests, tiny models)")
    p.add_argument("--from-runs", type=Path, nargs="+", default=None, metavar="DIR",
                   help="refit from the stage logs of these live run folders")
    p.add_argument("--profile", type=Path, default=None,
                   help="with --from-runs: the profile whose host model and table to use; with "
                        "--from-bench: the profile to refit (default: the config's)")
    p.add_argument("--from-bench", type=Path, default=None, metavar="FILE",
                   help="refit from a serving benchmark's per-request results (vLLM, SGLang, genai-perf)")
    p.add_argument("--config", type=Path, default=None,
                   help="with --from-bench: the experiment TOML whose deployment and workload ran")
    add_bench_run(p)


def run(args: argparse.Namespace) -> int:
    if args.from_runs and args.from_bench:
        raise ValueError("give --from-runs or --from-bench, not both")
    form = "runs" if args.from_runs else "bench" if args.from_bench else "measure"
    refuse_unread(given(args, [f for flags in READS.values() for f in flags]), READS, form, FORMS)
    check_file(args.out)  # before minutes of measuring
    if args.from_runs:
        return _refit(args)
    if args.from_bench:
        return calibrate_bench(args)
    if not args.model:
        raise ValueError("give --model (or --from-runs DIR...)")
    device = "cpu" if args.device is None else args.device
    if device not in DEVICES:
        raise ValueError(f"--device must be one of {', '.join(DEVICES)}, got {device!r}")
    if args.reps is not None and args.reps < 1:
        raise ValueError(f"--reps must be >= 1, got {args.reps}")
    # torch and transformers take seconds to import; only this form needs them
    import torch

    from calibration.loop.measure import CalibrationPlan, measure
    from live.zoo import ModelSpec

    spec = ModelSpec(name=args.model, size="small" if args.size is None else args.size)
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device on this machine")
    plan = CalibrationPlan.quick() if args.quick else CalibrationPlan()
    changes = {"encode_threads": 2 if args.encode_threads is None else args.encode_threads}
    if args.reps is not None:
        changes["reps"] = args.reps
    plan = type(plan)(**{**{f: getattr(plan, f) for f in plan.__dataclass_fields__}, **changes})
    measured = measure(spec, plan, device=device,
                       progress=lambda what: print(f"calibrate: {what}", file=sys.stderr))
    gpu = "cpu" if device == "cpu" else torch.cuda.get_device_name(0)
    samples = to_samples(measured.points, model=spec.name, gpu=gpu,
                         embed_bytes_per_token=measured.embed_bytes_per_token,
                         kv_bytes_per_token=measured.kv_bytes_per_token,
                         share_steps=CPU_SHARE_STEPS if device == "cpu" else 0,
                         source=f"easerve calibrate --model {spec.name} --size {spec.size} "
                                f"--device {device} (live.profiling, {plan.reps} reps per point)")
    table = share_table(measured.share_points)
    extra = {"size": spec.size, "spread": spread_summary(measured.points), "plan_reps": plan.reps,
             "points": measured.points, "share_points": measured.share_points, "host_rows": measured.raw,
             "encode_threads": plan.encode_threads}
    doc, held = calibrated_doc(samples=samples, table=table, host=measured.host, created=_today(),
                               measured=extra, notes=_notes(device, plan.encode_threads))
    save_profile_doc(doc, args.out)
    _print(doc, held, args.out)
    return 0


def _notes(device: str, encode_threads: int) -> str:
    if device == "cuda":
        return "share points are green-context SM partitions (live.gpu.green), fitted with the stages"
    return (f"CPU: stage models on 1 thread (share_steps=1: no share splits a 1-thread worker); the "
            f"SM-share table from an encode worker of {encode_threads} threads, where a share is "
            f"round(share*{encode_threads}) threads (only 1..{encode_threads} threads are real levels); "
            "params.host is the host model the simulator uses (docs/calibration.md)")


def _today() -> str:
    return dt.date.today().isoformat()


def _print(doc: ProfileDoc, held: dict[str, float], out: Path) -> None:
    fit = ", ".join(f"{k} {v:.1%}" for k, v in doc.fit_error.items())
    held_text = ", ".join(f"{k} {v:.1%}" for k, v in held.items())
    print(f"wrote fitted profile {doc.model} on {doc.gpu} to {out}")
    print(f"fit error (RMS relative): {fit}")
    print(f"held-out error (median |relative|): {held_text}")
    if doc.sm_share_table is not None:
        print("SM-share table: " + ", ".join(f"B={b}: {s:.1f}" for b, s in doc.sm_share_table.shares.items()))
    host = doc.params.get("host")
    if host:
        print("host: " + json.dumps({k: [round(x, 6) for x in v] if isinstance(v, list) else round(v, 6)
                                     for k, v in host.items()}))


def _refit(args: argparse.Namespace) -> int:
    base = load_profile_doc(args.profile) if args.profile is not None else None
    # imports torch (the model's byte sizes): only this form needs it
    from calibration.loop.refit_profile import read_run, refit_from_runs

    runs = [read_run(Path(d)) for d in args.from_runs]
    doc = refit_from_runs(runs, base, created=_today(), sources=[str(d) for d in args.from_runs])
    save_profile_doc(doc, args.out)
    _print(doc, doc.params["held_out_error"], args.out)
    return 0
