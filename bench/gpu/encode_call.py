"""Section d of the serving check: what a live encode call costs beyond its kernels, per family.

``bench/encoder_call_cost.py`` timed the host pieces of an encoder call on
the CPU. On a GPU the question is how much of the live encode path
(:func:`live.stages.encode_batch`: items to the device, the family's tower
and projector, a sync) is the device's kernels and how much the host around
them. Per family and item size, one request per call:

* ``wall_ms``: median host wall time of the call, synced at the end;
* ``kernel_ms``: the call's kernel time, from ``torch.profiler`` (the sum of
  device self time over the profiled calls, divided by their count);
* ``overhead_ms`` = wall - kernel, ``overhead_frac`` = overhead / wall.

On the CPU (the dry run) there are no kernels to separate: ``kernel_ms`` is
empty. Usage: ``python -m bench.gpu.encode_call --out FILE.csv [--device cuda]``.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench.gpu.serve_plan import SCHEMAS  # noqa: E402
from live.device import sync, use_device  # noqa: E402
from live.profiling import make_items  # noqa: E402
from live.stages import encode_batch  # noqa: E402
from live.zoo import ModelSpec, build_model  # noqa: E402

COLUMNS = SCHEMAS["encode_call.csv"]


def wall_ms(call: Callable[[], Any], reps: int, device: str) -> float:
    """Median synced wall milliseconds of ``call`` over ``reps`` (after three warm-ups)."""
    for _ in range(3):
        call()
    sync(device)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def kernel_ms(call: Callable[[], Any], reps: int) -> float:
    """Mean device kernel milliseconds per call, from the profiler (CUDA only)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            call()
        torch.cuda.synchronize()
    total_us = 0.0
    for event in prof.key_averages():  # the attribute was renamed cuda -> device in torch 2.4
        total_us += float(getattr(event, "self_device_time_total", None)
                          or getattr(event, "self_cuda_time_total", 0.0) or 0.0)
    return total_us / 1e3 / reps


def measure(family: str, size: str, device: str, item_tokens: Sequence[int],
            reps: int) -> list[dict[str, Any]]:
    spec = ModelSpec(name=family, size=size)
    model = build_model(spec).to(device).eval()
    rows = []
    for tokens in item_tokens:
        mm = make_items(model, spec, tokens, 1)[0]
        mm = replace(mm, items=tuple(t.cpu() for t in mm.items))  # a client's tensors arrive on the host

        def call(mm: Any = mm) -> Any:
            return encode_batch(model, spec.family, [mm])

        with torch.no_grad():
            wall = wall_ms(call, reps, device)
            kernel = kernel_ms(call, reps) if device == "cuda" else None
        row = {"family": family, "size": size, "device": device, "item_tokens": tokens, "batch_size": 1,
               "reps": reps, "wall_ms": round(wall, 4), "kernel_ms": "", "overhead_ms": "",
               "overhead_frac": ""}
        if kernel is not None:
            row.update(kernel_ms=round(kernel, 4), overhead_ms=round(wall - kernel, 4),
                       overhead_frac=round((wall - kernel) / wall, 4) if wall > 0 else "")
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="CSV to write (rows appended as measured)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--size", default="small")
    parser.add_argument("--families", nargs="+", default=["qwen2-audio", "llava-next", "qwen2.5-vl"])
    parser.add_argument("--item-tokens", type=int, nargs="+", default=[4, 48])
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("encode_call: no CUDA device", file=sys.stderr)
        return 2
    torch.set_num_threads(1)  # as a live worker runs
    use_device(args.device)
    failed = 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(COLUMNS))
        writer.writeheader()
        for family in args.families:  # one family's failure leaves the others' rows
            try:
                rows = measure(family, args.size, args.device, args.item_tokens, args.reps)
            except Exception as exc:
                print(f"encode_call: {family}: {type(exc).__name__}: {exc}", file=sys.stderr)
                failed += 1
                continue
            finally:
                if args.device == "cuda":  # the family's model is gone: return its blocks
                    torch.cuda.empty_cache()
            for row in rows:
                writer.writerow(row)
                print("encode_call: " + ", ".join(f"{k}={row[k]}" for k in COLUMNS), flush=True)
            fh.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
