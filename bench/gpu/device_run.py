"""The device check's body: torch, the real-size models, the sections (its door:
``bench/gpu/run_device_check.py``, which reads and checks the flags before this module's
imports take their seconds)."""

from __future__ import annotations

import dataclasses
import faulthandler
import importlib.metadata as md
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.gpu import ablation, green_checks, samples, stage_sweeps
from bench.gpu.plan import Plan, Sink, dry_plan, full_plan
from easerve_core.sm_share import SMShareTable
from live.gpu.realsize import PAIRS, EncoderStage, build_encoder, build_lm
from live.gpu.realsize_lm import LMStage
from live.gpu.timing import Deadline


def gpu_label() -> str:
    name = torch.cuda.get_device_name(0)
    return "h200" if "H200" in name else "".join(c if c.isalnum() else "-" for c in name.lower())


def env_info(plan: Plan) -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for pkg in ("torch", "transformers", "numpy", "pandas", "cuda-bindings", "cuda-core", "cupy-cuda13x"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    info: dict[str, Any] = {"python": platform.python_version(), "versions": versions,
                            "device": plan.device, "gpu_label": plan.gpu_label, "size": plan.size,
                            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                            "CUDA_DEVICE_MAX_CONNECTIONS": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")}
    if plan.device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(device_name=props.name, sm_count=props.multi_processor_count,
                    capability=list(torch.cuda.get_device_capability(0)), torch_cuda=torch.version.cuda,
                    memory_bytes=props.total_memory)
        sdp = {}  # which attention kernels SDPA may pick (a new-shape cost depends on it)
        for kind in ("flash", "mem_efficient", "cudnn", "math"):
            check = getattr(torch.backends.cuda, f"{kind}_sdp_enabled", None)
            sdp[kind] = bool(check()) if check is not None else None
        info["sdp_enabled"] = sdp
    return info


def section(sink: Sink, name: str, fn: Callable[[], Any]) -> Any:
    """Run one section; record its time and any error; never raise."""
    t0 = time.monotonic()
    print(f"[device-check] {name} ...", flush=True)
    try:
        result = fn()
        sink.summary["sections"][name] = {"ok": True, "secs": round(time.monotonic() - t0, 3)}
    except Exception as exc:  # record, go on: the other sections still count
        result = None
        sink.summary["sections"][name] = {"ok": False, "secs": round(time.monotonic() - t0, 3)}
        sink.summary["errors"][name] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-3000:]}"
        print(f"[device-check] {name} FAILED: {type(exc).__name__}: {exc}", flush=True)
    sink.write_summary()
    return result


def run_model(plan: Plan, sink: Sink, model: str, lanes: Any, deadline: Deadline,
              earlier_tables: dict[str, SMShareTable]) -> None:
    enc_name, lm_name = PAIRS[model]
    dtype = torch.bfloat16 if plan.device == "cuda" else torch.float32
    ablate = model == plan.ablation_model and plan.runs("ablation")
    enc = None
    if plan.runs("encode") or ablate:
        enc = section(sink, f"build:{enc_name}",
                      lambda: build_encoder(enc_name, size=plan.size, device=plan.device, dtype=dtype))
    latency: dict[tuple[int, float], float] = {}
    if enc is not None and plan.runs("encode"):
        latency = section(sink, f"encode:{model}", lambda: stage_sweeps.encode_sweep(
            plan, model, enc, lanes, sink, deadline.within(plan.budget_s("encode")))) or {}
    lm = None
    if plan.runs("prefill") or plan.runs("decode") or ablate:
        lm = section(sink, f"build:{lm_name}", lambda: build_lm(
            lm_name, size=plan.size, num_layers=plan.lm_layers, device=plan.device, dtype=dtype))
    rows: list[dict[str, Any]] = []
    if lm is not None and (plan.runs("prefill") or plan.runs("decode")):
        rows = section(sink, f"lm:{model}", lambda: stage_sweeps.lm_sweep(
            plan, model, lm, lanes, sink, deadline.within(plan.budget_s("lm")))) or []
    enforced = bool(green_checks.swept_pairs(plan, lanes))
    table = earlier_tables.get(model)
    if latency and enforced:  # measured at the granted shares; the fitted profile's table is separate
        table = SMShareTable.from_measurements(latency, tolerance=plan.share_tolerance)
        sink.summary.setdefault("sm_share_table", {})[model] = table.to_dict()
    if ablate and table is not None:
        sink.summary["ablation_share_table"] = {model: table.to_dict()}
    if ablate and enc is not None and lm is not None and table is not None:
        sink.summary["ablation"] = section(sink, "ablation", lambda: ablation.run(
            plan, enc, lm, lanes, table, sink, deadline.within(plan.budget_s("ablation"))))
    if plan.runs("samples") and enc is not None and lm is not None and (latency or rows):
        section(sink, f"samples:{model}", lambda: write_samples(plan, sink, model, enc, lm, latency, rows))
    if plan.device == "cuda":  # the caller drops this pair's models; return their cached blocks
        torch.cuda.empty_cache()


def write_samples(plan: Plan, sink: Sink, model: str, enc: EncoderStage, lm: LMStage,
                  latency: dict[tuple[int, float], float], rows: list[dict[str, Any]]) -> None:
    """``samples/<model>.json`` for ``easerve profile fit``; stages too short to fit go in the summary."""
    notes = (f"{plan.size} sizes on {plan.device}; LM: {len(lm.built_types)} of {lm.dims.num_layers} layers "
             f"built, latencies scaled to full depth per layer type (lm.csv scaled_ms); encoder at full "
             f"depth, one item size ({enc.lm_tokens_per_item} LM tokens, {enc.positions_per_item} "
             f"positions), so the fit cannot separate per_item from per_token")
    itemsize = next(lm.model.parameters()).element_size()  # the hand-off is in the model dtype
    doc = samples.to_samples(
        model=model, gpu=plan.gpu_label, lm_tokens_per_item=enc.lm_tokens_per_item,
        embed_bytes_per_token=lm.dims.hidden * itemsize, kv_bytes_per_token=lm.kv_bytes_per_token(),
        latency=latency, lm=rows, source=f"measured: bench/gpu/run_device_check.py ({enc.name} + {lm.name})",
        notes=notes)
    samples.write(doc, sink.root / "samples" / f"{model}.json")
    short = samples.short_stages(doc)
    if short:
        sink.summary.setdefault("samples_short", {})[model] = short


def print_table(sink: Sink) -> None:
    print("\n[device-check] sections:")
    for name, s in sink.summary["sections"].items():
        if isinstance(s, dict):
            print(f"  {name:<40} {'ok' if s['ok'] else 'FAILED':<7} {s['secs']:8.1f} s")
    for mode, m in (sink.summary.get("ablation") or {}).items():
        print(f"  ablation {mode:<11} req/s {m['requests_per_s']:8.2f}  enc p99 {m['encode_p99_ms']:8.1f} ms"
              f"  prefill p99 {m['prefill_p99_ms']:8.1f} ms  ({m['micro_batches']} micro-batches)")
    levels = (sink.summary.get("green") or {}).get("levels", [])
    pairs = ", ".join(f"{r['encode_sms']}/{r['prefill_sms']}" for r in levels)
    print(f"  levels (encode/prefill SMs): {pairs}")


def run(*, dry_run: bool, out: Path, models: tuple[str, ...] | None, sections: tuple[str, ...] | None,
        earlier: dict[str, SMShareTable]) -> int:
    """One device check with flags already checked (the door's); 1 when a section failed."""
    if not dry_run and not torch.cuda.is_available():
        print("[device-check] no CUDA device; use --dry-run on a CPU", file=sys.stderr)
        return 2
    plan = dry_plan() if dry_run else full_plan(gpu_label())
    if models:
        plan = dataclasses.replace(plan, models=models, ablation_model=models[0])
    if sections:
        plan = dataclasses.replace(plan, sections=sections)
    if plan.device == "cpu":
        torch.set_num_threads(1)  # 2-vCPU machines time erratically with more (notes/tiny-models.md)
    faulthandler.dump_traceback_later(plan.total_budget_s + 40, exit=True)  # a hang still ends the run
    deadline = Deadline.after(plan.total_budget_s)
    sink = Sink(out)
    sink.summary["env"] = env_info(plan)
    sink.summary["env"]["sections"] = list(plan.sections)
    torch.manual_seed(plan.seed)
    with torch.inference_mode():
        lanes, pool = green_checks.build_pool(plan, sink)
        sink.write_summary()
        green_deadline = deadline.within(plan.budget_s("green"))
        if pool is not None and plan.runs("green"):
            section(sink, "green:split_table", lambda: green_checks.split_table_section(sink))
        if plan.runs("green"):
            section(sink, "green:confinement",
                    lambda: green_checks.confinement(plan, lanes, sink, green_deadline))
            section(sink, "green:switch", lambda: green_checks.switch_section(plan, lanes, sink))
        for model in plan.models:
            if deadline.expired():
                sink.summary["sections"][f"skipped:{model}"] = "total budget spent"
                continue
            run_model(plan, sink, model, lanes, deadline, earlier)
        if pool is not None:
            section(sink, "green:close", pool.close)
    sink.summary["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    sink.write_summary()
    sink.close()
    faulthandler.cancel_dump_traceback_later()
    print_table(sink)
    failed = [n for n, s in sink.summary["sections"].items() if isinstance(s, dict) and not s["ok"]]
    return 1 if failed else 0

