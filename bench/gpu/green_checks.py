"""Section 1: build the SM levels and show that they confine work.

* the pool: green contexts per level on CUDA (actual SM counts from the
  driver), the nominal CPU pool in the dry run;
* the driver's split table (CUDA only): groups and remainder for a few
  ``minCount`` values and flags, to confirm the granularity (notes §8.3);
* confinement: a large bf16 matmul alone on each lane; on k of N SMs it should
  take about N/k times the full-device time (``expected_ratio``), then both
  lanes of a level at once (``concurrent_ms``: each side near its solo time);
* switch cost: microseconds per ``backend.apply(role, share)``, which is all
  a per-micro-batch switch does on the host.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import torch

from live.gpu.green import GreenContextBackend, GreenContextPool, GreenOptions
from live.gpu.lanes import Lane, LanePool, StreamPair, null_pool
from live.gpu.timing import Clock, Deadline

from .plan import Plan, Sink


def build_pool(plan: Plan, sink: Sink) -> tuple[LanePool, GreenContextPool | None]:
    """Green contexts on CUDA; the nominal pool on the CPU, or on CUDA when they cannot be built.

    In that CUDA fallback no share is enforced: :func:`swept_pairs` then gives
    no levels, and only the full-device lane is measured.
    """
    if plan.device == "cuda":
        t0 = time.monotonic()
        try:
            pool = GreenContextPool.build(GreenOptions())
        except Exception as exc:  # keep the stage profiles: they need no partitions
            sink.summary["errors"]["green:build"] = f"{type(exc).__name__}: {exc}"
            sink.summary["sections"]["green:build"] = {"ok": False, "secs": time.monotonic() - t0}
        else:
            sink.summary["sections"]["green:build"] = {"ok": True, "secs": time.monotonic() - t0}
            sink.summary["green"] = {"backend": "green-context", "build": pool.report,
                                     "levels": pool.lanes.rows()}
            return pool.lanes, pool
    lanes = null_pool()
    sink.summary["green"] = {"backend": "null", "levels": lanes.rows(), "enforced": plan.device == "cpu"}
    return lanes, None


def swept_pairs(plan: Plan, lanes: LanePool) -> tuple[StreamPair, ...]:
    """The levels worth measuring: none on CUDA without green contexts (shares not enforced)."""
    return () if plan.device == "cuda" and lanes.backend == "null" else lanes.pairs


def split_flag(drv: Any, flag: str) -> int | None:
    """``CU_DEV_SM_RESOURCE_SPLIT_<flag>`` from whichever enum these bindings put it in, else None.

    The enum's own name differs between cuda-bindings releases (13.3 has no
    ``CUdevSmResourceSplit_flags``), so look for the member, not the class.
    """
    member = f"CU_DEV_SM_RESOURCE_SPLIT_{flag}"
    for name in dir(drv):
        enum = getattr(drv, name)
        if isinstance(enum, type) and hasattr(enum, member):
            return int(getattr(enum, member))
    return None


def split_table() -> list[dict[str, Any]]:
    """What ``cuDevSmResourceSplitByCount`` gives for a few minCounts and flags (CUDA only)."""
    drv = importlib.import_module("cuda.bindings.driver")
    dev = drv.cuDeviceGet(0)[1]
    full = drv.cuDeviceGetDevResource(dev, drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM)[1]
    rows = []
    for flag in ("0", "IGNORE_SM_COSCHEDULING", "MAX_POTENTIAL_CLUSTER_SIZE"):
        value = 0 if flag == "0" else split_flag(drv, flag)
        for n in (2, 4, 8, 16, 24, 64, 128):
            if value is None:
                rows.append({"flags": flag, "min_count": n, "error": "flag missing in these bindings"})
                continue
            err, groups, nb, rem = drv.cuDevSmResourceSplitByCount(1, full, int(value), n)
            ok = err == drv.CUresult.CUDA_SUCCESS
            rows.append({"flags": flag, "min_count": n, "ok": ok, "groups": int(nb) if ok else None,
                         "group_sms": int(groups[0].sm.smCount) if ok and nb else None,
                         "remainder_sms": int(rem.sm.smCount) if ok else None})
    return rows


def _gemm_ms(lane: Lane, a: torch.Tensor, clock: Clock, reps: int) -> float:
    """Median-free mean ms of ``reps`` matmuls on ``lane`` after one warm-up (device marks)."""
    if lane.stream is not None:
        lane.stream.wait_stream(torch.cuda.current_stream())
    with lane.activate():
        a @ a
        t0 = clock.mark()
        for _ in range(reps):
            a @ a
        t1 = clock.mark()
    clock.sync()
    return clock.between_s(t0, t1) / reps * 1e3


def _concurrent_ms(enc: Lane, pre: Lane, a: torch.Tensor, clock: Clock, reps: int) -> tuple[float, float]:
    marks = []
    for lane in (enc, pre):
        if lane.stream is not None:
            lane.stream.wait_stream(torch.cuda.current_stream())
    for lane in (enc, pre):
        with lane.activate():
            t0 = clock.mark()
            for _ in range(reps):
                a @ a
            marks.append((t0, clock.mark()))
    clock.sync()
    return tuple(clock.between_s(t0, t1) / reps * 1e3 for t0, t1 in marks)  # type: ignore[return-value]


def confinement(plan: Plan, lanes: LanePool, sink: Sink, deadline: Deadline) -> None:
    dtype = torch.bfloat16 if plan.device == "cuda" else torch.float32
    a = torch.randn(plan.gemm_n, plan.gemm_n, device=plan.device, dtype=dtype)
    clock = Clock(plan.device)
    full_ms = _gemm_ms(lanes.full.encode, a, clock, plan.gemm_reps)
    n = lanes.total_sms
    sink.row("green.csv", {"level": "full", "lane": "encode", "sms": n, "total_sms": n, "gemm_n": plan.gemm_n,
                           "solo_ms": full_ms, "full_ms": full_ms, "expected_ratio": 1.0,
                           "measured_ratio": 1.0, "backend": lanes.backend})
    for pair in swept_pairs(plan, lanes):
        if deadline.expired():
            sink.summary["green"]["confinement_cut"] = pair.level
            break
        both = _concurrent_ms(pair.encode, pair.prefill, a, clock, plan.gemm_reps)
        for lane, conc in zip((pair.encode, pair.prefill), both, strict=True):
            solo = _gemm_ms(lane, a, clock, plan.gemm_reps)
            sink.row("green.csv", {
                "level": pair.level, "lane": lane.name.split("/")[-1], "sms": lane.sms, "total_sms": n,
                "gemm_n": plan.gemm_n, "solo_ms": solo, "full_ms": full_ms, "expected_ratio": n / lane.sms,
                "measured_ratio": solo / full_ms, "concurrent_ms": conc, "backend": lanes.backend})


def switch_cost_us(plan: Plan, lanes: LanePool) -> dict[str, float]:
    """Host microseconds per ``apply`` (the whole per-micro-batch switch) and per pure lookup."""
    backend = GreenContextBackend(lanes)
    shares = [p.encode_share for p in lanes.pairs] + [1.0]
    main = torch.cuda.current_stream() if plan.device == "cuda" else None
    t0 = time.perf_counter()
    for i in range(plan.switch_iters):
        lanes.lane_for("encode", shares[i % len(shares)])
    lookup = (time.perf_counter() - t0) / plan.switch_iters * 1e6
    t0 = time.perf_counter()
    for i in range(plan.switch_iters):
        share = shares[i % len(shares)]
        backend.apply("encode", share)
        backend.apply("prefill", 1.0 - share if share < 1.0 else 1.0)
    apply_pair = (time.perf_counter() - t0) / plan.switch_iters * 1e6
    if main is not None:
        torch.cuda.set_stream(main)
    return {"lookup_us": lookup, "apply_encode_and_prefill_us": apply_pair}


def split_table_section(sink: Sink) -> None:
    """Informative only (the levels built are what count); CUDA only."""
    sink.summary["green"]["split_table"] = split_table()


def switch_section(plan: Plan, lanes: LanePool, sink: Sink) -> None:
    sink.summary["green"]["switch"] = switch_cost_us(plan, lanes)
