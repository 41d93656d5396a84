"""Stage latency measurements in one process: encode per batch and share, prefill, decode.

The numbers calibration fits (DESIGN.md §7) and the SM-share table is built
from. Each point is timed ``reps`` times after ``warmup`` untimed runs; a
point keeps the median (what is fitted), the minimum and the spread
(interquartile range over the median), because the host is noisy.

* :func:`measure_encode`: the family's tower + projector over B requests of
  a given item size, at each share level. A share becomes what the live
  partition backend makes of it: on the CPU ``threads_for(share)`` torch
  threads out of ``encode_threads`` (so on a 2-core box only 1 and 2 threads
  are real levels); on a GPU the green-context lane of that share (the stream
  is made current and the timing syncs the device).
* :func:`measure_prefill`: the live path, ``prefill_inputs`` + ``prefill``
  over one request (one item of fixed size plus text up to the length).
* :func:`measure_decode`: one decode step of B rows at a given context per row.

``python -m live.profiling --model qwen2-audio --size small`` prints a table;
``easerve calibrate`` drives these functions and fits the result.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from easerve_core.request import Modality
from live.families.base import MMInput
from live.partition import Backend, CpuThreadBackend
from live.stages import DecodeBatch, KVState, encode_batch, prefill
from live.zoo import ModelSpec, build_model

COLUMNS = ["stage", "batch_size", "tokens", "median_s", "min_s", "reps"]
#: columns of a point row (the calibrate loop's input)
POINT_COLUMNS = ["stage", "batch_size", "items", "seq_len", "context_tokens", "sm_share", "threads",
                 "latency_s", "min_s", "spread_frac", "reps"]
_QUARTILES = 4


def time_interleaved(calls: Sequence[Callable[[], Any]], reps: int, warmup: int,
                     sync: Callable[[], None] = lambda: None, seed: int = 0) -> list[list[float]]:
    """Wall times of each call, ``reps`` rounds, each round in a fresh seeded random order.

    A noisy host drifts over seconds; timing point after point would fold
    that drift into the differences between points. Interleaving spreads it
    over every point alike, and the median over rounds drops the outliers.
    """
    for fn in calls:
        for _ in range(warmup):
            fn()
    sync()
    rng = np.random.default_rng(seed)
    out: list[list[float]] = [[] for _ in calls]
    for _ in range(reps):
        for i in rng.permutation(len(calls)):
            start = time.perf_counter()
            calls[i]()
            sync()
            out[i].append(time.perf_counter() - start)
    return out


def _stats(samples: Sequence[float]) -> dict[str, Any]:
    med = statistics.median(samples)
    if len(samples) >= _QUARTILES:
        q = statistics.quantiles(samples, n=_QUARTILES)
        spread = (q[2] - q[0]) / med
    else:
        spread = (max(samples) - min(samples)) / med
    return {"latency_s": med, "min_s": min(samples), "spread_frac": spread, "reps": len(samples)}


def modality_of(spec: ModelSpec) -> Modality:
    mods = spec.family.modalities
    return Modality.IMAGE if Modality.IMAGE in mods else sorted(mods, key=lambda m: m.value)[0]


def make_items(model: Any, spec: ModelSpec, tokens: int, count: int, seed: int = 0) -> list[MMInput]:
    """``count`` distinct one-item inputs of about ``tokens`` LM tokens each."""
    rng = np.random.default_rng(seed)
    return [spec.family.make_input(model.config, modality_of(spec), [tokens], rng) for _ in range(count)]


@torch.no_grad()
def measure_encode(model: Any, spec: ModelSpec, *, batch_sizes: Sequence[int], item_tokens: Sequence[int],
                   shares: Sequence[float] = (1.0,), backend: Backend | None = None, reps: int = 5,
                   warmup: int = 2, sync: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
    """Encode latency per (batch size, item size, share); ``backend`` applies each share."""
    backend = backend or CpuThreadBackend(1)
    rows, calls = [], []
    for tok in item_tokens:
        inputs = make_items(model, spec, tok, max(batch_sizes))
        actual = spec.family.validate(model.config, inputs[0])[0]
        for share in shares:
            for b in batch_sizes:
                def call(b: int = b, share: float = share, inputs: list[MMInput] = inputs) -> None:
                    backend.apply("encode", share)
                    encode_batch(model, spec.family, inputs[:b])

                calls.append(call)
                rows.append({"stage": "encode", "batch_size": b, "items": [actual] * b, "seq_len": 0,
                             "context_tokens": 0, "sm_share": share, "threads": _threads(backend, share)})
    for row, times in zip(rows, time_interleaved(calls, reps, warmup, sync), strict=True):
        row.update(_stats(times))
    backend.apply("encode", 1.0)
    return rows


def _threads(backend: Backend, share: float) -> int:
    threads_for = getattr(backend, "threads_for", None)
    return int(threads_for(share)) if threads_for else 0


@torch.no_grad()
def measure_prefill(model: Any, spec: ModelSpec, *, lengths: Sequence[int], item_tokens: int,
                    shares: Sequence[float] = (1.0,), backend: Backend | None = None, reps: int = 5,
                    warmup: int = 2, sync: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
    """Prefill latency per sequence length (one item of ``item_tokens`` plus text), live's own path."""
    backend = backend or CpuThreadBackend(1)
    family, modality = spec.family, modality_of(spec)
    mm = make_items(model, spec, item_tokens, 1)[0]
    feats = encode_batch(model, family, [mm])[0]
    rows, calls = [], []
    for share in shares:
        for n in lengths:
            text = [1, *range(5, 5 + max(0, n - sum(f.shape[0] for f in feats) - 1))]

            def run(text: list[int] = text, share: float = share) -> int:
                backend.apply("prefill", share)
                return prefill(model, family.prefill_inputs(model, text, modality, mm.meta, feats)).length

            calls.append(run)
            rows.append({"stage": "prefill", "batch_size": 1, "items": [], "seq_len": run(),
                         "context_tokens": 0, "sm_share": share, "threads": _threads(backend, share)})
    for row, times in zip(rows, time_interleaved(calls, reps, warmup, sync), strict=True):
        row.update(_stats(times))
    backend.apply("prefill", 1.0)
    return rows


@torch.no_grad()
def measure_decode(model: Any, spec: ModelSpec, *, batch_sizes: Sequence[int], contexts: Sequence[int],
                   reps: int = 5, warmup: int = 2,
                   sync: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
    """One decode step of B rows, each holding ``context`` KV tokens (the argument is summed)."""
    tc = model.config.text_config
    rows, calls = [], []
    for context in contexts:
        shape = (tc.num_hidden_layers, 2, 1, tc.num_key_value_heads, context,
                 getattr(tc, "head_dim", None) or tc.hidden_size // tc.num_attention_heads)
        for b in batch_sizes:
            batch = DecodeBatch(model, mrope=spec.family.mrope)
            for i in range(b):
                batch.join(i, KVState(kv=torch.randn(shape), first_token=5, length=context), steps=10**6)

            def step(batch: DecodeBatch = batch) -> None:
                batch.step()
                batch.rewind()  # stay at `context` tokens

            calls.append(step)
            rows.append({"stage": "decode", "batch_size": b, "items": [], "seq_len": 0,
                         "context_tokens": b * context, "sm_share": 1.0, "threads": 0})
    for row, times in zip(rows, time_interleaved(calls, reps, warmup, sync), strict=True):
        row.update(_stats(times))
    return rows


def profile_stages(spec: ModelSpec, *, encode_batches: Sequence[int] = (1, 2, 4, 8),
                   encode_item_tokens: int = 64, prefill_lengths: Sequence[int] = (64, 128, 256, 512),
                   decode_batches: Sequence[int] = (1, 2, 4, 8), decode_context: int = 256,
                   reps: int = 5, num_threads: int = 1) -> pd.DataFrame:
    """All three stages of ``spec``'s model, as one frame of :data:`COLUMNS` (a quick look)."""
    torch.set_num_threads(num_threads)
    model = build_model(spec)
    rows = measure_encode(model, spec, batch_sizes=encode_batches, item_tokens=[encode_item_tokens],
                          backend=CpuThreadBackend(num_threads), reps=reps)
    rows += measure_prefill(model, spec, lengths=prefill_lengths, item_tokens=encode_item_tokens // 4,
                            backend=CpuThreadBackend(num_threads), reps=reps)
    rows += measure_decode(model, spec, batch_sizes=decode_batches, contexts=[decode_context], reps=reps)
    frame = pd.DataFrame(rows)
    frame["tokens"] = [sum(r["items"]) or r["seq_len"] or r["context_tokens"] for r in rows]
    frame = frame.rename(columns={"latency_s": "median_s"})
    return frame[COLUMNS]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="llava-next")
    parser.add_argument("--size", default="small")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    frame = profile_stages(ModelSpec(name=args.model, size=args.size), reps=args.reps)
    frame["median_ms"] = (frame["median_s"] * 1e3).round(2)
    frame["min_ms"] = (frame["min_s"] * 1e3).round(2)
    print(frame[["stage", "batch_size", "tokens", "median_ms", "min_ms"]].to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
