"""Sections 2 and 3: encode latency per batch size x SM level, and the LM's prefill and decode.

Encode runs on each level's encode lane and on the full-device lane (share
1.0), largest share first for each batch size, so a time-out cuts the small
shares of the big batches last measured. The LM runs ``plan.lm_layers``
layers plus embedding and head; ``scaled_ms`` adds the missing layers at the
measured per-layer time of each layer type (:meth:`LMStage.scale_s`):

* prefill of one sequence per length, on the full-device lane, then at one
  length on every level's prefill lane (local Prefill's side of each split);
* decode: one step for a batch of ``B`` rows of ``context`` cached tokens each
  (random KV), on the full-device lane. Decode runs eagerly (no CUDA graph),
  so small batches include Python launch time, as the live executor does.
  Every rep gets a fresh cache of exactly ``context`` tokens: reusing one
  cache grows it by a token per call, so each call met a new KV length, and
  on the H200 of 2026-11-30 each new length cost ~37 ms once (inside whichever
  layer first saw it), which the per-layer scaling then multiplied by the
  depth (bench/gpu/RESULTS.md). :func:`decode_shape_check` measures that
  first-call cost on its own.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from live.device import model_device
from live.gpu.lanes import Lane, LanePool
from live.gpu.realsize import EncoderStage
from live.gpu.realsize_lm import LMStage, cache_kwarg, random_cache
from live.gpu.timing import Clock, Deadline, LayerTimer, repeat_s

from .green_checks import swept_pairs
from .plan import Plan, Sink


def encode_sweep(plan: Plan, model: str, stage: EncoderStage, lanes: LanePool, sink: Sink,
                 deadline: Deadline) -> dict[tuple[int, float], float]:
    """Median wall seconds per ``(batch_size, share)``; rows go to encode.csv."""
    clock = Clock(plan.device)
    latency: dict[tuple[int, float], float] = {}
    for b in plan.batch_sizes:
        inputs = stage.make_inputs(b)
        for pair in (lanes.full, *reversed(swept_pairs(plan, lanes))):
            if deadline.expired():
                sink.summary["sections"].setdefault("encode_cut", []).append(f"{model}: B={b} {pair.level}")
                return latency
            lane = pair.encode
            clock.sync()  # inputs were made on the default stream

            def fn(lane: Lane = lane, inputs: dict[str, torch.Tensor] = inputs) -> None:
                with lane.activate():
                    stage.run(inputs)

            times = repeat_s(fn, clock, plan.reps, deadline)
            share = 1.0 if pair is lanes.full else pair.encode_share
            latency[(b, share)] = statistics.median(times)
            sink.row("encode.csv", {
                "model": model, "encoder": stage.name, "batch_size": b, "level": pair.level,
                "encode_sms": lane.sms, "total_sms": lanes.total_sms, "share": share,
                "lm_tokens_per_item": stage.lm_tokens_per_item,
                "positions_per_item": stage.positions_per_item,
                "reps": len(times), "wall_ms_median": latency[(b, share)] * 1e3,
                "wall_ms_min": min(times) * 1e3, "wall_ms_max": max(times) * 1e3})
    return latency


def _layer_ms(stage: LMStage, fn: Any, clock: Clock) -> dict[str, float]:
    """Mean ms per built layer, by layer type, from one marked forward."""
    with LayerTimer(stage.layers, clock) as timer:
        fn()
    clock.sync()
    by_type: dict[str, list[float]] = defaultdict(list)
    for kind, seconds in zip(stage.built_types, timer.layer_s(), strict=True):
        by_type[kind].append(seconds * 1e3)
    return {kind: statistics.fmean(v) for kind, v in by_type.items()}


def _lm_point(plan: Plan, stage: LMStage, lane: Lane, fn: Any, clock: Clock, deadline: Deadline,
              base: dict[str, Any]) -> dict[str, Any]:
    times = repeat_s(fn, clock, plan.reps, deadline)
    return _lm_row(stage, lane, times, _layer_ms(stage, fn, clock), base)


def _decode_point(plan: Plan, stage: LMStage, lane: Lane, clock: Clock, deadline: Deadline, b: int, n: int,
                  base: dict[str, Any]) -> dict[str, Any]:
    """One decode step over a fresh ``n``-token cache per rep: wall time and per-layer marks together."""
    kw = cache_kwarg(stage.model)
    device = model_device(stage.model)
    times: list[float] = []
    by_type: dict[str, list[float]] = defaultdict(list)
    for i in range(plan.reps.warmup + plan.reps.max):
        cache = random_cache(stage, b, n)
        ids = torch.randint(3, stage.dims.vocab, (b, 1), device=device)
        clock.sync()  # the cache was made on the default stream
        with LayerTimer(stage.layers, clock) as timer:
            t0 = time.perf_counter()
            with lane.activate():
                stage.model(input_ids=ids, use_cache=True, **{kw: cache})
            clock.sync()
            elapsed = time.perf_counter() - t0
        del cache
        if i < plan.reps.warmup:
            continue
        times.append(elapsed)
        for kind, seconds in zip(stage.built_types, timer.layer_s(), strict=True):
            by_type[kind].append(seconds * 1e3)
        if (len(times) >= plan.reps.min and sum(times) >= plan.reps.target_s) or deadline.expired():
            break
    per = {kind: statistics.median(v) for kind, v in by_type.items()}
    return _lm_row(stage, lane, times, per, base)


def decode_shape_check(plan: Plan, stage: LMStage, b: int, n: int, steps: int = 4) -> dict[str, Any]:
    """Step ms on one growing cache (a new KV length each call) vs. fresh caches of one length.

    Says whether the first call at a new length pays a one-off cost (e.g. an
    attention kernel plan built per shape), which the fixed-length sweep avoids.
    Measured with SDPA's default backends, then again with cuDNN attention
    excluded (``without_cudnn``): if the cost goes away there, cuDNN's per-shape
    plan is the cause.
    """
    result = _shape_check(plan, stage, b, n, steps)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        result["without_cudnn"] = _shape_check(plan, stage, b, n, steps)
    return result


def _shape_check(plan: Plan, stage: LMStage, b: int, n: int, steps: int) -> dict[str, Any]:
    kw = cache_kwarg(stage.model)
    device = model_device(stage.model)
    clock = Clock(plan.device)

    def step(cache: Any) -> float:
        ids = torch.randint(3, stage.dims.vocab, (b, 1), device=device)
        clock.sync()
        t0 = time.perf_counter()
        stage.model(input_ids=ids, use_cache=True, **{kw: cache})
        clock.sync()
        return (time.perf_counter() - t0) * 1e3

    growing = random_cache(stage, b, n)
    step(growing)  # warm-up at n + 1
    grow_ms = [step(growing) for _ in range(steps)]
    del growing
    fixed_ms = [step(random_cache(stage, b, n)) for _ in range(steps)]  # every call at n + 1, seen before
    return {"batch_size": b, "context": n, "growing_cache_ms": grow_ms, "fixed_length_ms": fixed_ms,
            "first_call_cost_ms": statistics.median(grow_ms) - statistics.median(fixed_ms)}


def _lm_row(stage: LMStage, lane: Lane, times: list[float], per: dict[str, float],
            base: dict[str, Any]) -> dict[str, Any]:
    wall_ms = statistics.median(times) * 1e3
    full = stage.full_type_counts()
    built = {t: stage.built_types.count(t) for t in full}
    scaled = wall_ms + sum((full[t] - built[t]) * per.get(t, per.get("full_attention", 0.0)) for t in full)
    return {**base, "lane": lane.name, "lane_sms": lane.sms, "layers_built": len(stage.built_types),
            "layers_full": stage.dims.num_layers, "reps": len(times), "wall_ms_median": wall_ms,
            "layer_full_ms": per.get("full_attention", ""),
            "layer_sliding_ms": per.get("sliding_attention", ""),
            "outside_ms": wall_ms - sum(per[t] * built[t] for t in per if t in built), "scaled_ms": scaled}


def lm_sweep(plan: Plan, model: str, stage: LMStage, lanes: LanePool, sink: Sink,
             deadline: Deadline) -> list[dict[str, Any]]:
    """Prefill per length, prefill per level, decode per batch and context; rows go to lm.csv."""
    clock = Clock(plan.device)
    vocab = stage.dims.vocab
    device = model_device(stage.model)
    rows: list[dict[str, Any]] = []
    full = lanes.full.encode
    points: list[tuple[str, int, int, Lane]] = []
    if plan.runs("prefill"):
        points += [("prefill", 1, n, full) for n in plan.prefill_lens]
        points += [("prefill", 1, plan.prefill_level_len, p.prefill) for p in swept_pairs(plan, lanes)]
    if plan.runs("decode"):
        b, n = plan.shape_check_point
        sink.summary.setdefault("decode_shape_check", {})[model] = decode_shape_check(plan, stage, b, n)
        points += [("decode", b, c, full) for b in plan.decode_batches for c in plan.decode_contexts]
    for phase, b, n, lane in points:
        if deadline.expired():
            sink.summary["sections"].setdefault("lm_cut", []).append(f"{model}: {phase} B={b} n={n}")
            break
        base = {"model": model, "lm": stage.name, "phase": phase, "batch_size": b, "seq_len": n,
                "context_tokens": b * n, "total_sms": lanes.total_sms}
        if phase == "prefill":
            ids = torch.randint(3, vocab, (1, n), device=device)

            def fn(ids: torch.Tensor = ids, lane: Lane = lane) -> None:
                with lane.activate():
                    stage.model(input_ids=ids, logits_to_keep=1, use_cache=True)

            clock.sync()  # inputs were made on the default stream
            row = _lm_point(plan, stage, lane, fn, clock, deadline, base)
            del fn
        else:
            row = _decode_point(plan, stage, lane, clock, deadline, b, n, base)
        sink.row("lm.csv", row)
        rows.append(row)
    return rows
