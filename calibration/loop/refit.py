"""Refit from live traces: stage-log rows of finished runs -> samples -> a fitted profile.

Every live run writes ``stage_log.parquet`` (one row per executed batch:
stage, worker, group, start, end, batch size, tokens, share). Those batches
ran next to each other on one host, so their wall times hold the contention
the simulator models separately (:mod:`sim.host`). :func:`exclusive_times`
takes it out again with the same model: a row's exclusive time is the
integral over its interval of ``min(1, cores / (busy + background))``
(times the co-location speed while its encode worker runs both lanes), where
``busy`` counts the rows running at that moment. Without a host model the
wall times are used as they are.

:func:`samples_from_runs` makes the ``easerve.samples`` rows (encode items
split evenly from the logged tokens; prefill one sequence; decode the
logged context sum) and :func:`step_gap_s` the decode loop's overhead: the
median gap between consecutive steps of one worker whose batch did not
change. Rows that hold a worker's one-off pause (:mod:`calibration.loop.stalls`)
can be left out of the samples: the simulator models the pause separately.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from calibration.loop.host import HostModel

#: stage-log columns a run directory must have
LOG_COLUMNS = ("stage", "worker", "group", "start_s", "end_s", "batch_size", "tokens", "sm_share")


def exclusive_times(log: pd.DataFrame, host: HostModel | None) -> np.ndarray:
    """Per row, the exclusive seconds its batch would have taken alone (see the module docstring)."""
    start = log["start_s"].to_numpy(float)
    end = log["end_s"].to_numpy(float)
    if host is None or not host.effects.shares_cores:
        return end - start
    group = log["group"].astype(str).to_numpy()
    worker = log["worker"].to_numpy(int)
    enc_key = np.where(group == "encode", worker, -1)
    times = np.unique(np.concatenate([start, end]))
    out = np.zeros(len(log))
    order_start = np.argsort(start, kind="stable")
    active: set[int] = set()
    k = 0
    for t0, t1 in itertools.pairwise(times):
        while k < len(order_start) and start[order_start[k]] <= t0:
            active.add(int(order_start[k]))
            k += 1
        active = {i for i in active if end[i] > t0}
        if not active:
            continue
        demand = len(active) + host.effects.background_cores
        factor = min(1.0, host.effects.num_host_cores / demand)
        per_worker: dict[int, int] = {}
        for i in active:
            if enc_key[i] >= 0:
                per_worker[int(enc_key[i])] = per_worker.get(int(enc_key[i]), 0) + 1
        for i in active:
            both = enc_key[i] >= 0 and per_worker[int(enc_key[i])] > 1
            out[i] += (t1 - t0) * factor * (host.effects.colocated_speed_frac if both else 1.0)
    return out


def step_gap_s(log: pd.DataFrame) -> float:
    """Median gap between consecutive decode steps of one worker at an unchanged batch size."""
    gaps: list[float] = []
    for _, rows in log[log["stage"] == "decode"].groupby("worker"):
        rows = rows.sort_values("start_s")
        same = rows["batch_size"].to_numpy()[1:] == rows["batch_size"].to_numpy()[:-1]
        gap = rows["start_s"].to_numpy()[1:] - rows["end_s"].to_numpy()[:-1]
        gaps += [float(g) for g, s in zip(gap, same, strict=True) if s and g >= 0]
    return statistics.median(gaps) if gaps else 0.0


def split_items(tokens: int, batch: int) -> list[int]:
    """An encode batch's logged tokens split evenly over its items."""
    base, extra = divmod(int(tokens), int(batch))
    return [base + (1 if i < extra else 0) for i in range(int(batch))]


def samples_from_log(log: pd.DataFrame, host: HostModel | None,
                     drop: Sequence[int] = ()) -> dict[str, list[dict[str, Any]]]:
    """Samples rows per stage from one run's stage log, leaving out the rows at positions ``drop``."""
    missing = [c for c in LOG_COLUMNS if c not in log.columns]
    if missing:
        raise ValueError(f"stage log lacks column(s) {', '.join(missing)}")
    latency = exclusive_times(log, host)
    latency[np.asarray(drop, dtype=int)] = 0.0  # left out below
    out: dict[str, list[dict[str, Any]]] = {"encode": [], "prefill": [], "decode": []}
    for row, lat in zip(log.itertuples(index=False), latency, strict=True):
        if lat <= 0:
            continue
        share = float(row.sm_share) if 0 < float(row.sm_share) <= 1 else 1.0
        if row.stage == "encode":
            out["encode"].append({"mm_tokens_per_item": split_items(row.tokens, row.batch_size),
                                  "sm_share": share, "latency_s": float(lat)})
        elif row.stage == "prefill":
            out["prefill"].append({"seq_lens": [int(row.tokens)], "sm_share": share, "latency_s": float(lat)})
        elif row.stage == "decode":
            out["decode"].append({"batch_size": int(row.batch_size), "context_tokens": int(row.tokens),
                                  "latency_s": float(lat)})
    return out


def samples_from_runs(logs: Sequence[pd.DataFrame], *, host: HostModel | None, model: str, gpu: str,
                      embed_bytes_per_token: int, kv_bytes_per_token: int,
                      share_steps: int, drop: Sequence[Sequence[int]] | None = None) -> dict[str, Any]:
    """One samples mapping from several runs' stage logs (``drop``: per log, rows to leave out)."""
    out: dict[str, Any] = {"format": "easerve.samples", "version": 1, "model": model, "gpu": gpu, "tp": 1,
                           "embed_bytes_per_token": embed_bytes_per_token,
                           "kv_bytes_per_token": kv_bytes_per_token, "share_steps": share_steps,
                           "source": f"refit from {len(logs)} live run(s) (calibration.loop.refit)",
                           "encode": [], "prefill": [], "decode": []}
    for i, log in enumerate(logs):
        for stage, rows in samples_from_log(log, host, () if drop is None else drop[i]).items():
            out[stage] += rows
    return out
