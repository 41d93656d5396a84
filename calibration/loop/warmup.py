"""Warm-up in live traces: how much slower a fresh worker process's first batches of each lane run.

A live worker process runs one small warm-up request before it reports
ready, yet its first real batches of each kind are slower than the rest once
the host contention is taken out (docs/calibration.md, "Warm-up"; the
simulator's side is :mod:`sim.warmup`). :func:`lane_excess` gives every
stage-log row its lane (an encode worker's ``encode`` and ``local_prefill``
batches, a remote ``prefill`` worker's batches, a ``decode`` worker's steps),
its batch number within its process's lane (in start order, from 0) and its
excess over the profile's prediction (:func:`~calibration.loop.stalls.predicted_times`
against :func:`~calibration.loop.refit.exclusive_times`). :func:`fit_warmup`
turns the rows of several runs into the host model's ``warmup_<lane>_s``: per
lane and batch number ``i`` below :data:`WARMUP_MAX_BATCHES`, the median
excess of batch ``i`` over the processes, less the lane's steady excess (the
median from batch :data:`WARMUP_STEADY_FROM` on), kept for the leading batch
numbers where it is at least ``min_excess_s``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from calibration.loop.host import HostModel
from calibration.loop.refit import exclusive_times
from calibration.loop.stalls import predicted_times
from sim.options import WARMUP_LANES

#: batch numbers a warm-up may span (the traces show 1-3; the rest is contention noise)
WARMUP_MAX_BATCHES = 8
#: first batch number of a lane's steady state, against which the warm-up is measured
WARMUP_STEADY_FROM = 10
#: median excess over the steady state from which a batch number counts as warming up:
#: a decode step is ~2-4 ms and its steady excess varies by ~0.1 ms between processes
WARMUP_MIN_EXCESS_S = 5e-4
#: columns of :func:`lane_excess`'s answer
EXCESS_COLUMNS = ("lane", "group", "worker", "index", "excess_s", "row")


def lane_of(group: str, stage: str) -> str:
    """The warm-up lane of a stage-log row (its worker group and stage)."""
    if group == "encode":
        return "encode" if stage == "encode" else "local_prefill"
    return str(stage)


def lane_excess(log: pd.DataFrame, host: HostModel | None, profile: Any,
                drop: Sequence[int] = ()) -> pd.DataFrame:
    """One row per stage-log row not in ``drop`` (see the module docstring); ``row``: its position in ``log``.

    Rows in ``drop`` (a process's one-off pause) keep their place in the
    batch numbering but are left out of the answer.
    """
    excess = exclusive_times(log, host) - predicted_times(log, profile)
    frame = pd.DataFrame({
        "lane": [lane_of(g, s) for g, s in zip(log["group"].astype(str), log["stage"].astype(str),
                                                  strict=True)],
        "group": log["group"].astype(str).to_numpy(), "worker": log["worker"].to_numpy(int),
        "excess_s": excess, "row": np.arange(len(log)), "start": log["start_s"].to_numpy(float)})
    frame = frame.sort_values(["start", "row"], kind="stable")
    frame["index"] = frame.groupby(["group", "worker", "lane"], sort=False).cumcount()
    frame = frame[~frame["row"].isin(list(drop))].sort_values("row")
    return frame[list(EXCESS_COLUMNS)].reset_index(drop=True)


def fit_warmup(excess: pd.DataFrame, *, min_excess_s: float = WARMUP_MIN_EXCESS_S) -> dict[str, list[float]]:
    """The host model's ``warmup_<lane>_s`` from :func:`lane_excess` rows of one or more runs.

    A lane without a warm-up (its batch 0 under ``min_excess_s``, or too
    few batches to see a steady state) is left out.
    """
    if not min_excess_s > 0:
        raise ValueError(f"min_excess_s must be > 0, got {min_excess_s!r}")
    out: dict[str, list[float]] = {}
    for lane in WARMUP_LANES:
        part = excess[excess["lane"] == lane]
        steady = part.loc[part["index"] >= WARMUP_STEADY_FROM, "excess_s"]
        if steady.empty:
            continue
        base = float(steady.median())
        extra: list[float] = []
        for i in range(WARMUP_MAX_BATCHES):
            at = part.loc[part["index"] == i, "excess_s"]
            value = float(statistics.median(at)) - base if len(at) else 0.0
            if value < min_excess_s:
                break
            extra.append(round(value, 6))
        if extra:
            out[f"warmup_{lane}_s"] = extra
    return out


def warmup_rows(excess: pd.DataFrame, fitted: Mapping[str, Sequence[float]]) -> list[int]:
    """Stage-log positions of the rows that the fitted warm-up covers (left out of the stage fit)."""
    hit = np.zeros(len(excess), dtype=bool)
    for lane in WARMUP_LANES:
        n = len(fitted.get(f"warmup_{lane}_s", ()))
        hit |= ((excess["lane"] == lane) & (excess["index"] < n)).to_numpy()
    return [int(r) for r in excess.loc[hit, "row"]]


def warmup_summary(excess: pd.DataFrame) -> Mapping[str, Any]:
    """What the profile keeps about the warm-up it was fitted from (``params.measured.warmup``).

    Per lane: processes seen, the steady median excess and the median excess
    of batches 0..:data:`WARMUP_MAX_BATCHES`-1 (milliseconds).
    """
    out: dict[str, Any] = {}
    for lane in WARMUP_LANES:
        part = excess[excess["lane"] == lane]
        if part.empty:
            continue
        steady = part.loc[part["index"] >= WARMUP_STEADY_FROM, "excess_s"]
        first = [part.loc[part["index"] == i, "excess_s"] for i in range(WARMUP_MAX_BATCHES)]
        out[lane] = {"processes": int((part["index"] == 0).sum()),
                     "steady_excess_ms": round(1e3 * float(steady.median()), 3) if len(steady) else None,
                     "first_excess_ms": [round(1e3 * float(x.median()), 3) for x in first if len(x)]}
    return out
