"""The serving check's kernels step: GEMM and attention timed on the device, against two price lists.

At a dozen sizes of a paper model (Qwen2.5-VL-32B's LM projections at a few
token counts, its LM attention in prefill and decode, its ViT attention), the
device's own BF16 kernels are timed (``torch.matmul``; ``scaled_dot_product_attention``)
and set beside

* ``measured_s``: the ``measured`` profile's price, from aiconfigurator-core's
  ``h200_sxm`` vLLM tables (:func:`calibration.aiconfigurator.load_tables`
  under :class:`calibration.op_prices.MeasuredOps`; ``measured_from`` says
  which table answered, or ``roofline`` where none did);
* ``fitted_s``: the fitted roofline's (``calibration/specs/fitted/h200.json``,
  :func:`calibration.roofline_fit.fitted_efficiency`, on the ``h200`` spec);

with ``time_over_measured`` and ``time_over_fitted`` (> 1: the device was
slower than the price). Each point: a warm-up, then the median of ``reps``
timings of ``inner`` back-to-back launches (CUDA events on the device).

``--dry-run``: the CPU, float32, the shapes shrunk (prices of the shrunk
shapes: the path runs, the ratios mean nothing). A missing kernel database
leaves ``measured_s`` empty and says why in ``measured_source``.
Usage: ``python -m bench.gpu.kernels --out FILE.json [--dry-run]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SYSTEM, ENGINE, GPU = "h200_sxm", "vllm", "h200"
MODEL = "qwen2.5-vl-32b"
# LM (TP 1): hidden 5120, 40 query / 8 KV heads of 128, FFN 27648; ViT: 16 heads of 80
_QKV, _H, _FFN = (40 + 2 * 8) * 128, 5120, 27648
#: (label, m, n, k) of an (m x k) @ (k x n) GEMM
GEMMS: tuple[tuple[str, int, int, int], ...] = (
    ("lm.qkv", 16, _QKV, _H), ("lm.qkv", 256, _QKV, _H), ("lm.qkv", 2048, _QKV, _H),
    ("lm.o", 2048, _H, _H), ("lm.gate_up", 16, 2 * _FFN, _H), ("lm.gate_up", 2048, 2 * _FFN, _H),
    ("lm.down", 256, _H, _FFN), ("lm.down", 2048, _H, _FFN))
#: (phase, batch, tokens, heads, kv_heads, head_dim); tokens: sequence length, or the context of a decode
ATTENTIONS: tuple[tuple[str, int, int, int, int, int], ...] = (
    ("context", 1, 512, 40, 8, 128), ("context", 1, 4096, 40, 8, 128),
    ("generation", 32, 2048, 40, 8, 128), ("encoder", 4, 1024, 16, 16, 80))


def _shrink_gemm(m: int, n: int, k: int) -> tuple[int, int, int]:
    return min(m, 64), max(8, n // 64), max(8, k // 64)


def _shrink_attention(b: int, t: int, h: int, kv: int, d: int) -> tuple[int, int, int, int, int]:
    return min(b, 2), max(8, t // 32), max(1, h // 8), max(1, kv // 8), max(8, d // 4)


def _timer(device: str, reps: int, inner: int) -> Callable[[Callable[[], Any]], tuple[float, list[float]]]:
    import torch

    def run(fn: Callable[[], Any]) -> tuple[float, list[float]]:
        for _ in range(2):  # warm-up (kernel choice, caches)
            fn()
        times = []
        for _ in range(reps):
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(inner):
                    fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e-3 / inner)
            else:
                t0 = time.perf_counter()
                for _ in range(inner):
                    fn()
                times.append((time.perf_counter() - t0) / inner)
        return statistics.median(times), times

    return run


def _sdpa(phase: str, b: int, t: int, h: int, kv: int, d: int, device: str, dtype: Any) -> Callable[[], Any]:
    import torch
    import torch.nn.functional as F

    q_len = 1 if phase == "generation" else t
    q = torch.randn(b, h, q_len, d, device=device, dtype=dtype)
    k = torch.randn(b, kv, t, d, device=device, dtype=dtype)
    v = torch.randn(b, kv, t, d, device=device, dtype=dtype)
    causal = phase == "context"
    if kv != h:
        try:
            F.scaled_dot_product_attention(q[:, :, :1], k[:, :, :1], v[:, :, :1], enable_gqa=True)
            return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        except TypeError:  # an older torch: the KV heads expanded once, outside the timing
            k, v = k.repeat_interleave(h // kv, dim=1), v.repeat_interleave(h // kv, dim=1)
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def prices() -> tuple[Any, Any, str]:
    """(measured ops or None, fitted roofline ops, where the measured prices come from)."""
    from calibration.efficiency import Efficiency
    from calibration.op_prices import MeasuredOps, RooflineOps
    from calibration.roofline_fit import fitted_efficiency
    from calibration.specs import gpu_spec

    gpu = gpu_spec(GPU)
    fitted = RooflineOps(gpu, fitted_efficiency(GPU) or Efficiency())
    try:
        from calibration.aiconfigurator import load_tables

        tables = load_tables(SYSTEM, ENGINE)
    except Exception as exc:  # no database on this machine: the fitted column alone
        return None, fitted, f"unavailable: {type(exc).__name__}: {exc}"
    return MeasuredOps(tables, RooflineOps(gpu, Efficiency())), fitted, tables.source


def _ratio(a: float, b: float | None) -> float | None:
    return None if not b else round(a / b, 4)


def run(*, device: str, dry_run: bool, reps: int, inner: int) -> dict[str, Any]:
    import torch

    from calibration.ops import Op

    dtype = torch.float32 if dry_run else torch.bfloat16
    measured, fitted, source = prices()
    timer = _timer(device, reps, inner)
    points: list[dict[str, Any]] = []

    def point(kind: str, label: str, shape: dict[str, int], op: Op, fn: Callable[[], Any]) -> None:
        secs, times = timer(fn)
        m_s, m_from = measured.op_s(op) if measured is not None else (None, None)
        f_s = fitted.op_s(op)[0]
        points.append({"kind": kind, "label": label, **shape, "time_s": secs,
                       "spread_frac": round((max(times) - min(times)) / secs, 3) if secs else None,
                       "measured_s": m_s, "measured_from": m_from, "fitted_s": f_s,
                       "time_over_measured": _ratio(secs, m_s), "time_over_fitted": _ratio(secs, f_s)})

    for label, m, n, k in GEMMS:
        if dry_run:
            m, n, k = _shrink_gemm(m, n, k)
        a = torch.randn(m, k, device=device, dtype=dtype)
        w = torch.randn(k, n, device=device, dtype=dtype)
        point("gemm", label, {"m": m, "n": n, "k": k}, Op("gemm", label, (m, n, k)),
              lambda a=a, w=w: torch.matmul(a, w))
        del a, w
    for phase, b, t, h, kv, d in ATTENTIONS:
        if dry_run:
            b, t, h, kv, d = _shrink_attention(b, t, h, kv, d)
        shape = {"batch": b, "tokens": t, "heads": h, "kv_heads": kv, "head_dim": d}
        point("attention", phase, shape, Op(f"{phase}_attention", phase, (b, t, h, kv, d)),
              _sdpa(phase, b, t, h, kv, d, device, dtype))
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    return {"device": device, "device_name": name, "dtype": str(dtype).removeprefix("torch."),
            "torch": torch.__version__, "dry_run": dry_run, "model": MODEL, "reps": reps, "inner": inner,
            "measured_source": source, "fitted": f"calibration/specs/fitted/{GPU}.json",
            "points": points, "medians": medians(points)}


def medians(points: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per kind, the median of each ratio over the points that have it."""
    out: dict[str, dict[str, float | None]] = {}
    for kind in ("gemm", "attention"):
        rows = [p for p in points if p["kind"] == kind]
        out[kind] = {}
        for key in ("time_over_measured", "time_over_fitted"):
            vals = [p[key] for p in rows if p[key] is not None]
            out[kind][key] = round(statistics.median(vals), 4) if vals else None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="the JSON file to write")
    parser.add_argument("--dry-run", action="store_true", help="CPU, float32, shrunk shapes, few reps")
    parser.add_argument("--reps", type=int, default=None, help="timings per point (default 15; dry run 3)")
    parser.add_argument("--inner", type=int, default=None, help="launches per timing (default 10; dry run 1)")
    args = parser.parse_args(argv)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("kernels: no CUDA device; use --dry-run on a CPU", file=sys.stderr)
        return 2
    device = "cpu" if args.dry_run else "cuda"
    doc = run(device=device, dry_run=args.dry_run, reps=args.reps or (3 if args.dry_run else 15),
              inner=args.inner or (1 if args.dry_run else 10))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1))
    for p in doc["points"]:
        print(f"kernels: {p['kind']:<9} {p['label']:<10} {p['time_s'] * 1e6:10.1f} us  "
              f"measured {p['time_over_measured']}x  fitted {p['time_over_fitted']}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
