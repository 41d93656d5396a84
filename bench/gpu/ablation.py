"""Section 4: the sharing ablation, Encode and local Prefill running together.

A closed-loop micro-benchmark on one GPU, not the paper's open-loop serving
run: the same work in every mode, and the mode that finishes it sooner has
the higher throughput. Per micro-batch (sizes drawn with a seeded generator
from the plan's batch sizes) the encode lane runs the encoder on ``B``
requests while the prefill lane runs one local prefill of the paired LM at
full depth (the built layers repeated, ``ceil(full / built)`` passes); both
are then drained before the next micro-batch, as SGLang does before it
switches levels (notes §1.4).

Shares come from ``live.partition``'s policy objects over
:class:`~live.gpu.green.GreenContextBackend`: ``dynamic`` (the measured
SM-share table), ``static`` (``plan.static_share``), ``time-slice`` (both on
plain full-device streams) and ``none`` (Encode alone: the latency floor).
A split lasts while the encode micro-batch runs; then the prefill's remaining
passes run on the whole device. ``static-held`` and ``dynamic-held`` keep the
split to the end of the prefill (how the first H200 run measured, which left
SMs idle once the short encode ended: bench/gpu/RESULTS.md).
Both lanes are launched from one host thread, encode first.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch

from easerve_core.sm_share import SMShareTable
from live.gpu.green import GreenContextBackend
from live.gpu.lanes import LanePool
from live.gpu.realsize import EncoderStage
from live.gpu.realsize_lm import LMStage
from live.gpu.timing import Clock, Deadline, percentile
from live.partition import DynamicPartitioner, ExclusivePartitioner, StaticPartitioner, TimeSlicePartitioner

from .plan import Plan, Sink

#: a mode name's suffix: the prefill keeps its partition after the encode ends (the first H200 run's way)
HELD = "-held"


def _policy(mode: str, backend: GreenContextBackend, table: SMShareTable, plan: Plan) -> Any:
    mode = mode.removesuffix(HELD)
    if mode == "dynamic":
        return DynamicPartitioner(backend, table=table)
    if mode == "static":
        return StaticPartitioner(backend, encode_share=plan.static_share)
    if mode == "time-slice":
        return TimeSlicePartitioner(backend)
    if mode == "none":
        return ExclusivePartitioner(backend)
    raise ValueError(f"unknown ablation mode {mode!r}; known: dynamic, none, static, time-slice")


def _encode_done(mark: Any, clock: Clock) -> bool:
    """Whether the encode lane has reached ``mark`` (on the CPU, work is done when launched)."""
    return bool(mark.query()) if clock.cuda else True


def _micro_batch(policy: Any, backend: GreenContextBackend, enc: EncoderStage, lm: LMStage, b: int,
                 inputs: dict[str, torch.Tensor], ids: torch.Tensor | None, passes: int,
                 clock: Clock, *, rejoin: bool) -> dict[str, Any]:
    """One encode micro-batch and one full-depth local prefill, both drained.

    With ``rejoin`` the split lasts only while the encode runs: the prefill's
    passes go to its partition lane until the encode lane's end mark is
    reached, the rest to the full-device lane (the paper's per-micro-batch
    partition, which fills encode gaps with prefill). Without it the prefill
    keeps its partition to the end (``-held`` modes). The host stays at most
    two passes ahead of the device, so it sees the encode finish in time.
    """
    t0 = time.perf_counter()
    done = 0
    with policy.encode_slot(b) as enc_share:  # slot sets this thread's stream to the encode lane
        e0 = clock.mark()
        enc.run(inputs)
        e1 = clock.mark()
        p0 = None
        pre_share: float | str = ""
        if ids is not None:
            with policy.prefill_slot() as pre_share:  # encode still running: the complementary lane
                p0 = clock.mark()
                ends: list[Any] = []
                while done < passes and not (rejoin and _encode_done(e1, clock)):
                    lm.model(input_ids=ids, logits_to_keep=1, use_cache=False)
                    ends.append(clock.mark())
                    done += 1
                    if clock.cuda and len(ends) >= 2:
                        ends[-2].synchronize()
    partition_lane = backend.last["prefill"].name if ids is not None else ""
    if ids is not None and done < passes:  # the encode is over: the rest on the whole device
        previous = torch.cuda.current_stream() if clock.cuda else None
        backend.apply("prefill", 1.0)
        if previous is not None:
            torch.cuda.current_stream().wait_stream(previous)
        for _ in range(passes - done):
            lm.model(input_ids=ids, logits_to_keep=1, use_cache=False)
    p1 = clock.mark() if ids is not None else None
    if clock.cuda:
        torch.cuda.set_stream(torch.cuda.default_stream())
    clock.sync()
    wall = time.perf_counter() - t0
    return {"encode_share": enc_share, "prefill_share": pre_share, "encode_lane": backend.last["encode"].name,
            "prefill_lane": partition_lane, "partition_passes": done if ids is not None else "",
            "encode_ms": clock.between_s(e0, e1) * 1e3,
            "prefill_ms": clock.between_s(p0, p1) * 1e3 if p0 is not None else "", "wall_ms": wall * 1e3}


def run(plan: Plan, enc: EncoderStage, lm: LMStage, lanes: LanePool, table: SMShareTable, sink: Sink,
        deadline: Deadline) -> dict[str, dict[str, float]]:
    """Per mode: makespan, request throughput, encode and prefill P50/P99 (also in summary.json)."""
    rng = np.random.default_rng(plan.seed)
    sizes = [int(x) for x in rng.choice(plan.batch_sizes, size=plan.ablation_batches)]
    inputs = {b: enc.make_inputs(b) for b in sorted(set(sizes))}
    device = next(lm.model.parameters()).device
    ids = torch.randint(3, lm.dims.vocab, (1, plan.ablation_prefill_len), device=device)
    passes = math.ceil(lm.dims.num_layers / len(lm.built_types))
    clock = Clock(plan.device)
    clock.sync()
    out: dict[str, dict[str, float]] = {}
    per_mode_s = max(1.0, deadline.left_s() / max(1, len(plan.ablation_modes)))
    for mode in plan.ablation_modes:
        mode_deadline = deadline.within(per_mode_s)
        backend = GreenContextBackend(lanes)
        policy = _policy(mode, backend, table, plan)
        enc_ms, pre_ms, walls, done = [], [], [], 0
        prefill_ids = None if mode == "none" else ids
        rejoin = not mode.endswith(HELD)
        # one untimed micro-batch per mode: the rerun of 2026-11-30 had none, and the first micro-batch
        # of a process paid one-off costs (892 ms encode, 2.1 s prefill) that RESULTS.md had to drop
        _micro_batch(policy, backend, enc, lm, sizes[0], inputs[sizes[0]], prefill_ids, passes, clock,
                     rejoin=rejoin)
        for i, b in enumerate(sizes):
            if mode_deadline.expired():
                break
            row = _micro_batch(policy, backend, enc, lm, b, inputs[b], prefill_ids, passes, clock,
                               rejoin=rejoin)
            sink.row("ablation.csv", {"model": plan.ablation_model, "mode": mode, "index": i,
                                      "batch_size": b, **row})
            enc_ms.append(row["encode_ms"])
            walls.append(row["wall_ms"])
            if row["prefill_ms"] != "":
                pre_ms.append(row["prefill_ms"])
            done += b
        makespan_s = sum(walls) / 1e3
        out[mode] = {"micro_batches": len(walls), "requests": done, "makespan_s": makespan_s,
                     "requests_per_s": done / makespan_s if makespan_s else float("nan"),
                     "prefills_per_s": len(pre_ms) / makespan_s if makespan_s else float("nan"),
                     "encode_p50_ms": percentile(enc_ms, 50), "encode_p99_ms": percentile(enc_ms, 99),
                     "prefill_p50_ms": percentile(pre_ms, 50), "prefill_p99_ms": percentile(pre_ms, 99)}
    return out
