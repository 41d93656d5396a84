"""Stage latency measurements on one process: encode per batch, prefill per length, decode per batch.

The numbers calibration fits (DESIGN.md §7) and the SM-share table is built
from; on a GPU the same functions run under each partition share. Each point
is timed ``reps`` times after ``warmup`` untimed runs; the frame keeps the
median and the minimum (the minimum is the least noisy on a shared CPU).

``python -m live.profiling --model qwen2-audio --size small`` prints a table.
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
from transformers import DynamicCache

from easerve_core.request import Modality
from live.stages import DecodeBatch, KVState, encode_batch
from live.zoo import ModelSpec, build_model

COLUMNS = ["stage", "batch_size", "tokens", "median_s", "min_s", "reps"]


def _time(fn: Callable[[], Any], reps: int, warmup: int) -> tuple[float, float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), min(samples)


@torch.no_grad()
def profile_encode(model: Any, spec: ModelSpec, batch_sizes: Sequence[int], tokens_per_item: int,
                   *, reps: int = 5, warmup: int = 2) -> list[dict[str, Any]]:
    family = spec.family
    modality = Modality.IMAGE if Modality.IMAGE in family.modalities else Modality.AUDIO
    mm = family.make_input(model.config, modality, [tokens_per_item], np.random.default_rng(0))
    tokens = sum(family.validate(model.config, mm))
    rows = []
    for b in batch_sizes:
        med, low = _time(lambda b=b: encode_batch(model, family, [mm] * b), reps, warmup)
        rows.append({"stage": "encode", "batch_size": b, "tokens": b * tokens, "median_s": med,
                     "min_s": low, "reps": reps})
    return rows


@torch.no_grad()
def profile_prefill(model: Any, lengths: Sequence[int], *, reps: int = 5,
                    warmup: int = 2) -> list[dict[str, Any]]:
    hidden = model.config.text_config.hidden_size
    rows = []
    for n in lengths:
        embeds = torch.randn(1, n, hidden)

        def run(embeds: torch.Tensor = embeds) -> None:
            model(inputs_embeds=embeds, cache=DynamicCache(config=model.config), use_cache=True,
                  logits_to_keep=1)

        med, low = _time(run, reps, warmup)
        rows.append({"stage": "prefill", "batch_size": 1, "tokens": n, "median_s": med, "min_s": low,
                     "reps": reps})
    return rows


@torch.no_grad()
def profile_decode(model: Any, spec: ModelSpec, batch_sizes: Sequence[int], context: int,
                   *, reps: int = 5, warmup: int = 2) -> list[dict[str, Any]]:
    """One decode step at each batch size, every row holding ``context`` KV tokens."""
    tc = model.config.text_config
    shape = (tc.num_hidden_layers, 2, 1, tc.num_key_value_heads, context,
             tc.hidden_size // tc.num_attention_heads)
    rows = []
    for b in batch_sizes:
        batch = DecodeBatch(model, mrope=spec.family.mrope)
        for i in range(b):
            batch.join(i, KVState(kv=torch.randn(shape), first_token=5, length=context),
                       steps=10**6)

        def step(batch: DecodeBatch = batch) -> None:
            batch.step()
            batch.rewind()  # stay at `context` tokens

        med, low = _time(step, reps, warmup)
        rows.append({"stage": "decode", "batch_size": b, "tokens": b * context, "median_s": med,
                     "min_s": low, "reps": reps})
    return rows


def profile_stages(spec: ModelSpec, *, encode_batches: Sequence[int] = (1, 2, 4, 8),
                   encode_item_tokens: int = 64, prefill_lengths: Sequence[int] = (64, 128, 256, 512),
                   decode_batches: Sequence[int] = (1, 2, 4, 8), decode_context: int = 256,
                   reps: int = 5, num_threads: int = 1) -> pd.DataFrame:
    """All three stages of ``spec``'s model, as one frame of :data:`COLUMNS`."""
    torch.set_num_threads(num_threads)
    model = build_model(spec)
    rows = profile_encode(model, spec, encode_batches, encode_item_tokens, reps=reps)
    rows += profile_prefill(model, prefill_lengths, reps=reps)
    rows += profile_decode(model, spec, decode_batches, decode_context, reps=reps)
    return pd.DataFrame(rows, columns=COLUMNS)


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
