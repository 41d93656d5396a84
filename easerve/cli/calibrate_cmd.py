"""``easerve calibrate``: profile the live stages in isolation (or refit from live runs) and fit a profile.

  easerve calibrate --model M --size S --device cpu|cuda --out PROFILE.json [--quick] [--reps N]
  easerve calibrate --from-runs DIR [DIR ...] --out PROFILE.json [--profile BASE.json]

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
``--profile`` (whose table and host model it keeps). It finds every worker
process's one-off pause in the traces, leaves those batches out of the stage
fit and stores the fitted stall model in the host model
(calibration.loop.stalls); likewise the warm-up of each process's first
batches of each lane (calibration.loop.warmup).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from calibration.fit import FitResult, fit_samples
from calibration.loop.handoffs import fit_handoffs
from calibration.loop.host import HostModel, host_of
from calibration.loop.joins import boundaries_of_runs, fit_joins, join_summary
from calibration.loop.refit import samples_from_runs, step_gap_s
from calibration.loop.samples import calibrated_doc, held_out_error, share_table, spread_summary, to_samples
from calibration.loop.stalls import find_pauses, fit_stalls, pause_summary
from calibration.loop.warmup import fit_warmup, lane_excess, warmup_rows, warmup_summary
from easerve.cli.common import add_out, command_parser
from easerve.cli.outputs import check_file
from easerve_core.profile import ProfileDoc, load_profile_doc, save_profile_doc
from sim.host_effects import WARMUP_LANES

DEVICES = ("cpu", "cuda")
#: host-model fields the refit measures from the traces' batch changes and hand-offs
TRACE_HOST_KEYS = ("decode_join_s", "decode_leave_s", "decode_join_more_s", "handoff_prefill_s",
                   "handoff_decode_s", "handoff_busy_s", "handoff_prefill_quantiles_s",
                   "handoff_decode_quantiles_s")
#: threads of a live CPU worker (``[live] num_threads``): one, which no share can split
CPU_SHARE_STEPS = 1


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "calibrate", help="profile the live stages (or refit from live runs) "
                       "and write a fitted profile", doc=__doc__, func=run)
    p.add_argument("--model", help="live model family or alias (qwen2-audio, llava-next, qwen2.5-vl)")
    p.add_argument("--size", default="small", help="tiny | small | full (default small)")
    p.add_argument("--device", default="cpu", help="cpu | cuda (default cpu)")
    add_out(p, "profile JSON to write")
    p.add_argument("--reps", type=int, default=None, help="repeats per point (default: the plan's)")
    p.add_argument("--encode-threads", type=int, default=2,
                   help="CPU: threads the five share levels divide (default 2)")
    p.add_argument("--quick", action="store_true", help="a few points per stage (tests, tiny models)")
    p.add_argument("--from-runs", type=Path, nargs="+", default=None, metavar="DIR",
                   help="refit from the stage logs of these live run folders")
    p.add_argument("--profile", type=Path, default=None,
                   help="with --from-runs: the profile whose host model and table to use")


def run(args: argparse.Namespace) -> int:
    check_file(args.out)  # before minutes of measuring
    if args.from_runs:
        return _refit(args)
    if not args.model:
        raise ValueError("give --model (or --from-runs DIR...)")
    if args.device not in DEVICES:
        raise ValueError(f"--device must be one of {', '.join(DEVICES)}, got {args.device!r}")
    if args.reps is not None and args.reps < 1:
        raise ValueError(f"--reps must be >= 1, got {args.reps}")
    # torch and transformers take seconds to import; only this form needs them
    import torch

    from calibration.loop.measure import CalibrationPlan, measure
    from live.zoo import ModelSpec

    spec = ModelSpec(name=args.model, size=args.size)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device on this machine")
    plan = CalibrationPlan.quick() if args.quick else CalibrationPlan()
    changes = {"encode_threads": args.encode_threads}
    if args.reps is not None:
        changes["reps"] = args.reps
    plan = type(plan)(**{**{f: getattr(plan, f) for f in plan.__dataclass_fields__}, **changes})
    measured = measure(spec, plan, device=args.device,
                       progress=lambda what: print(f"calibrate: {what}", file=sys.stderr))
    gpu = "cpu" if args.device == "cpu" else torch.cuda.get_device_name(0)
    samples = to_samples(measured.points, model=spec.name, gpu=gpu,
                         embed_bytes_per_token=measured.embed_bytes_per_token,
                         kv_bytes_per_token=measured.kv_bytes_per_token,
                         share_steps=CPU_SHARE_STEPS if args.device == "cpu" else 0,
                         source=f"easerve calibrate --model {spec.name} --size {spec.size} "
                                f"--device {args.device} (live.profiling, {plan.reps} reps per point)")
    table = share_table(measured.share_points)
    extra = {"size": spec.size, "spread": spread_summary(measured.points), "plan_reps": plan.reps,
             "points": measured.points, "share_points": measured.share_points, "host_rows": measured.raw,
             "encode_threads": plan.encode_threads}
    doc, held = calibrated_doc(samples=samples, table=table, host=measured.host, created=_today(),
                               measured=extra, notes=_notes(args.device, plan.encode_threads))
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


def _read_run(folder: Path) -> tuple[pd.DataFrame, dict, pd.DataFrame | None]:
    """(stage log, config, records or None) of one run folder."""
    log_path, cfg_path = folder / "stage_log.parquet", folder / "config.json"
    if not folder.is_dir() or not log_path.exists() or not cfg_path.exists():
        raise ValueError(f"{folder} is not a run folder (needs stage_log.parquet and config.json)")
    rec_path = folder / "records.parquet"
    records = pd.read_parquet(rec_path) if rec_path.exists() else None
    return pd.read_parquet(log_path), json.loads(cfg_path.read_text()), records


def _refit(args: argparse.Namespace) -> int:
    runs = [_read_run(Path(d)) for d in args.from_runs]
    models = {(c["model"]["name"], c["model"].get("size", "full")) for _, c, _ in runs}
    if len(models) != 1:
        raise ValueError(f"--from-runs: runs of different models {sorted(models)}")
    base = load_profile_doc(args.profile) if args.profile is not None else None
    host = host_of(base.params) if base is not None else None
    from calibration.loop.measure import byte_sizes  # imports torch: only this form needs it
    from live.zoo import ModelSpec, build_model

    name, size = models.pop()
    spec = ModelSpec(name=name, size=size)
    embed, kv = byte_sizes(build_model(spec, device="meta"))
    logs = [log for log, _, _ in runs]
    kw = dict(host=host, model=spec.name, gpu=base.gpu if base else "cpu", embed_bytes_per_token=embed,
              kv_bytes_per_token=kv, share_steps=CPU_SHARE_STEPS)
    samples, result, pauses, excess = _fit_traces(logs, host, kw)
    warmup = fit_warmup(excess)
    joins = _fit_joins(runs, host)
    handoffs = _fit_handoffs(runs, host, joins, embed_bytes_per_token=embed, kv_bytes_per_token=kv)
    params = result.profile.to_params()
    params.update(lm_tp=1, held_out_error=held_out_error(samples),
                  measured={"size": size, "runs": [str(d) for d in args.from_runs],
                            "decode_step_gap_s": step_gap_s(pd.concat(logs)),
                            "stalls": pause_summary(pauses), "warmup": warmup_summary(excess),
                            "joins": joins, "handoffs": handoffs})
    if host is not None:
        # the refit decode steps exclude the loop's gaps: keep measuring those from the traces
        traced = {k: v for k, v in {**joins, **handoffs}.items() if k in TRACE_HOST_KEYS}
        lanes = {**{f"warmup_{lane}_s": () for lane in WARMUP_LANES}, **warmup}
        refit = host.with_effects(**fit_stalls(pauses), **lanes, **traced)
        step_gap = params["measured"]["decode_step_gap_s"]
        params["host"] = replace(refit, decode_step_overhead_s=step_gap).to_dict()
    table = base.sm_share_table if base is not None else None
    doc = ProfileDoc(kind="fitted", model=spec.name, gpu=base.gpu if base else "cpu",
                     source=str(samples["source"]), created=_today(), params=params, sm_share_table=table,
                     fit_error=result.fit_error,
                     notes="refit from live stage logs; contention taken out with the base host model")
    save_profile_doc(doc, args.out)
    _print(doc, params["held_out_error"], args.out)
    return 0


def _fit_joins(runs: list[tuple[pd.DataFrame, dict, pd.DataFrame | None]],
               host: HostModel | None) -> dict[str, Any]:
    """The decode batch-change costs from the runs' traces (:mod:`calibration.loop.joins`).

    Needs every run's ``records.parquet`` (which requests left at which step);
    without them the base profile's isolated join cost stays and no leave cost
    is fitted.
    """
    if any(rec is None for _, _, rec in runs):
        return {"boundaries": 0, "note": "a run lacks records.parquet: join and leave costs not refitted"}
    table = boundaries_of_runs([log for log, _, _ in runs], [rec for _, _, rec in runs if rec is not None],
                               host)
    return join_summary(table, fit_joins(table))


def _fit_handoffs(runs: list[tuple[pd.DataFrame, dict, pd.DataFrame | None]], host: HostModel | None,
                  joins: dict[str, Any], **sizes: int) -> dict[str, Any]:
    """The hand-off delays beyond the link, from the runs' traces (:mod:`calibration.loop.handoffs`).

    The decode direction leaves out the refitted join cost; like the joins,
    it needs every run's ``records.parquet``.
    """
    if any(rec is None for _, _, rec in runs):
        return {"note": "a run lacks records.parquet: hand-off delays not fitted"}
    base = (host or HostModel()).with_effects(decode_join_s=float(joins.get("decode_join_s", 0.0)))
    return fit_handoffs([log for log, _, _ in runs], [rec for _, _, rec in runs if rec is not None], base,
                        **sizes)


def _fit_traces(logs: list[pd.DataFrame], host: HostModel | None,
                kw: dict[str, Any]) -> tuple[dict[str, Any], FitResult, pd.DataFrame, pd.DataFrame]:
    """(samples, stage fit, pauses, warm-up excess rows) from the runs' stage logs.

    Three passes: the pauses are found against a first fit and left out; the
    warm-up against the second and its rows left out too; both are measured
    against the final fit.
    """
    first = fit_samples(samples_from_runs(logs, **kw)).profile
    paused = [p.loc[p["row"] >= 0, "row"].tolist() for p in (find_pauses(log, host, first) for log in logs)]
    second = fit_samples(samples_from_runs(logs, **kw, drop=paused)).profile
    warm = [lane_excess(log, host, second, drop=d) for log, d in zip(logs, paused, strict=True)]
    fitted = fit_warmup(pd.concat(warm, ignore_index=True))
    drop = [d + warmup_rows(w, fitted) for d, w in zip(paused, warm, strict=True)]
    samples = samples_from_runs(logs, **kw, drop=drop)
    result = fit_samples(samples)
    pauses = [find_pauses(log, host, result.profile) for log in logs]
    excess = [lane_excess(log, host, result.profile, drop=p.loc[p["row"] >= 0, "row"].tolist())
              for log, p in zip(logs, pauses, strict=True)]
    return samples, result, pd.concat(pauses, ignore_index=True), pd.concat(excess, ignore_index=True)
