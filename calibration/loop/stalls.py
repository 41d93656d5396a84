"""Stalls in live traces: each worker process's one-off pause, and the simulator's stall model fitted to it.

Every live worker process pauses once, for about a quarter of a second, at a
nearly fixed batch number (its first full garbage collection after start;
docs/calibration.md, "Stalls"; the simulator's side is :mod:`sim.stalls`).
:func:`find_pauses` finds it in one run's stage log: a process's batches (an
encode worker's encode and local Prefill batches together, in start order)
are compared with the profile's prediction after the host contention is
taken out (:func:`~calibration.loop.refit.exclusive_times`), and the batch
with the largest excess counts as the pause when that excess is at least
``min_excess_s``. :func:`fit_stalls` turns the pauses of several runs into
the host model's stall fields: the median excess as ``stall_s`` and, per
stage, the range of batch numbers the pause hit and the fraction of its
processes that paused.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from calibration.loop.host import STALL_GROUPS, HostModel
from calibration.loop.refit import exclusive_times, split_items

#: excess over the prediction (exclusive seconds) from which a batch counts as a pause;
#: the pauses measured on the 2-core host are 0.22-0.32 s, contention noise stays under 0.05 s
STALL_MIN_EXCESS_S = 0.1
#: columns of :func:`find_pauses`'s answer
PAUSE_COLUMNS = ("group", "worker", "num_batches", "index", "excess_s", "row")


def predicted_times(log: pd.DataFrame, profile: Any) -> np.ndarray:
    """Per stage-log row, the profile's latency of that batch alone."""
    out = np.zeros(len(log))
    for i, row in enumerate(log.itertuples(index=False)):
        share = float(row.sm_share) if 0 < float(row.sm_share) <= 1 else 1.0
        if row.stage == "encode":
            out[i] = profile.encode_s(split_items(row.tokens, row.batch_size), share)
        elif row.stage == "prefill":
            out[i] = profile.prefill_s([int(row.tokens)], share)
        else:
            out[i] = profile.decode_step_s(int(row.batch_size), int(row.tokens))
    return out


def find_pauses(log: pd.DataFrame, host: HostModel | None, profile: Any, *,
                min_excess_s: float = STALL_MIN_EXCESS_S) -> pd.DataFrame:
    """One row per worker process of the run (see the module docstring).

    ``index`` is the pause's batch number within its process (from 0) and
    ``row`` its position in ``log``; both -1 when no batch reaches ``min_excess_s``.
    """
    if not min_excess_s > 0:
        raise ValueError(f"min_excess_s must be > 0, got {min_excess_s!r}")
    excess = exclusive_times(log, host) - predicted_times(log, profile)
    start = log["start_s"].to_numpy(float)
    keys = pd.DataFrame({"group": log["group"].astype(str).to_numpy(),
                         "worker": log["worker"].to_numpy(int)})
    rows = []
    for (group, worker), part in keys.groupby(["group", "worker"], sort=True):
        pos = part.index.to_numpy()
        pos = pos[np.argsort(start[pos], kind="stable")]
        j = int(np.argmax(excess[pos]))
        hit = excess[pos[j]] >= min_excess_s
        rows.append((group, int(worker), len(pos), j if hit else -1,
                     float(excess[pos[j]]) if hit else 0.0, int(pos[j]) if hit else -1))
    return pd.DataFrame(rows, columns=list(PAUSE_COLUMNS))


def fit_stalls(pauses: pd.DataFrame) -> dict[str, float]:
    """The host model's stall fields from the pauses of one or more runs ({} when none was found).

    A stage whose processes never paused gets fraction 0 (and the range of
    all the stages); a stage without processes in the traces fraction 1.
    """
    hit = pauses[pauses["index"] >= 0]
    if hit.empty:
        return {}
    out: dict[str, float] = {"stall_s": float(statistics.median(hit["excess_s"]))}
    every = hit["index"].to_numpy(int)
    for group, unit in STALL_GROUPS:
        idx = hit.loc[hit["group"] == group, "index"].to_numpy(int)
        seen = int((pauses["group"] == group).sum())
        out[f"stall_{group}_frac"] = len(idx) / seen if seen else 1.0
        idx = idx if len(idx) else every
        out[f"stall_{group}_{unit}_min"] = int(idx.min())
        out[f"stall_{group}_{unit}_max"] = int(idx.max())
    return out


def pause_summary(pauses: pd.DataFrame) -> Mapping[str, Any]:
    """What the profile keeps about the pauses it was fitted from (``params.measured.stalls``)."""
    hit = pauses[pauses["index"] >= 0]
    return {"processes": len(pauses), "paused": len(hit),
            "excess_s": sorted(round(float(x), 4) for x in hit["excess_s"]),
            "index": {g: sorted(int(i) for i in hit.loc[hit["group"] == g, "index"])
                      for g, _ in STALL_GROUPS}}
