"""What a change of the running decode batch costs, measured from live traces.

A live Decode worker (``live.workers.llm.DecodeWorker``) changes its batch
between two steps: a request that leaves is emitted and its rows dropped; a
request that joins is taken off the worker's queue (its KV state rebuilt from
shared memory), acknowledged and concatenated onto the batch's cache. Every
running request waits for that work. The isolated measurement of a join
(``calibrate``: the cache concatenation alone, ~0.3 ms) misses most of it: in
the live traces the gap before a step that follows one join is ~2.4 ms longer
than the gap of an unchanged batch (docs/calibration.md §3.3).

:func:`boundaries` lists, per Decode worker, every boundary between two
consecutive steps with its gap, the requests that left (records whose
``finish_s`` is the earlier step's end) and joined (the batch size change plus
the leaves), and the gap's exclusive seconds: the host contention taken out
with the same processor-sharing model as the stage rows
(:func:`calibration.loop.refit.exclusive_times`, the gap counted as one busy
thread). :func:`fit_joins` turns them into the simulator's per-join and
per-leave work: the median exclusive gap at boundaries with exactly one join
(one leave), less the median exclusive gap of an unchanged batch (the loop's
own overhead, which the simulator adds to every step); and
``decode_join_more_s``, what every join beyond the first at one boundary
costs on top of that (median over such boundaries; in the traces two joins at
once cost ~2-4 ms more than two single joins). Boundaries where the batch ran
empty are idle time, not work, and are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from calibration.loop.host import HostModel
from calibration.loop.refit import exclusive_times

#: boundary-table columns
COLUMNS = ("run", "worker", "batch_before", "joins", "leaves", "gap_s", "exclusive_s")
#: a record's finish_s is its last step's end, up to this
_TOL_S = 1e-9


def boundaries(log: pd.DataFrame, records: pd.DataFrame, host: HostModel | None, *,
               run: int = 0) -> pd.DataFrame:
    """One row per boundary between consecutive decode steps of a worker (see the module docstring)."""
    decode = log[log["stage"] == "decode"]
    if decode.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    parts, gap_rows = [], []
    for worker, steps in decode.groupby("worker"):
        steps = steps.sort_values("start_s")
        start, end = steps["start_s"].to_numpy(float), steps["end_s"].to_numpy(float)
        size = steps["batch_size"].to_numpy(int)
        done = np.sort(records.loc[records["decode_worker"] == worker, "finish_s"].dropna().to_numpy(float))
        # a request leaves after the step whose end is its finish_s
        left = np.searchsorted(done, end[:-1] + _TOL_S, "right") - np.searchsorted(done, end[:-1] - _TOL_S)
        joins = size[1:] - size[:-1] + left
        parts.append(pd.DataFrame({"run": run, "worker": int(worker), "batch_before": size[:-1],
                                   "joins": joins, "leaves": left, "gap_s": start[1:] - end[:-1]}))
        gap_rows.append(pd.DataFrame({"stage": "decode_gap", "worker": int(worker), "group": "decode",
                                      "start_s": end[:-1], "end_s": start[1:]}))
    table = pd.concat(parts, ignore_index=True)
    # the gaps are busy threads too: time them with every stage row around them
    rows = pd.concat([log[["stage", "worker", "group", "start_s", "end_s"]], *gap_rows], ignore_index=True)
    excl = exclusive_times(rows, host)[len(log):]
    table["exclusive_s"] = np.where(table["gap_s"] > 0, excl, 0.0)
    return table[list(COLUMNS)]


def fit_joins(table: pd.DataFrame) -> dict[str, float]:
    """``decode_join_s`` and ``decode_leave_s`` from a boundary table (see the module docstring).

    A kind of boundary that never occurs gives 0; a negative median excess is
    clamped to 0.
    """
    if table.empty:
        return {"decode_join_s": 0.0, "decode_leave_s": 0.0, "decode_join_more_s": 0.0}
    kept = _busy(table)
    base = _median(kept, 0, 0)
    out = {}
    for name, joins, leaves in (("decode_join_s", 1, 0), ("decode_leave_s", 0, 1)):
        one = _median(kept, joins, leaves)
        out[name] = max(0.0, one - base) if np.isfinite(one) and np.isfinite(base) else 0.0
    # several joins at one boundary: what each beyond the first costs on top of a single join
    many = kept[(kept["joins"] >= 2) & (kept["leaves"] == 0)]
    more = (many["exclusive_s"] - base - many["joins"] * out["decode_join_s"]) / (many["joins"] - 1)
    out["decode_join_more_s"] = max(0.0, float(more.median())) if len(more) and np.isfinite(base) else 0.0
    return out


def _busy(table: pd.DataFrame) -> pd.DataFrame:
    """The boundaries where the batch did not run empty (those are idle time)."""
    return table[~((table["leaves"] >= table["batch_before"]) & (table["joins"] > 0))]


def _median(table: pd.DataFrame, joins: int, leaves: int) -> float:
    x = table.loc[(table["joins"] == joins) & (table["leaves"] == leaves), "exclusive_s"]
    return float(x.median()) if len(x) else float("nan")


def join_summary(table: pd.DataFrame, fitted: dict[str, float]) -> dict[str, Any]:
    """What the profile keeps of the boundaries: counts and median excess per kind (seconds)."""
    if table.empty:
        return {"boundaries": 0, **fitted}
    kept = _busy(table)
    base = _median(kept, 0, 0)
    kinds: dict[str, dict[str, float]] = {}
    for (joins, leaves), rows in kept.groupby(["joins", "leaves"]):
        if joins > 3 or leaves > 3 or len(rows) < 3:
            continue
        excess = float(rows["exclusive_s"].median()) - base
        kinds[f"{joins}j{leaves}l"] = {"count": len(rows), "median_excess_s": round(excess, 6)}
    return {"boundaries": len(table), "unchanged_gap_s": round(base, 6), "kinds": kinds, **fitted}


def boundaries_of_runs(logs: Sequence[pd.DataFrame], records: Sequence[pd.DataFrame],
                       host: HostModel | None) -> pd.DataFrame:
    """:func:`boundaries` of several runs, one table."""
    tables = [boundaries(log, rec, host, run=i)
              for i, (log, rec) in enumerate(zip(logs, records, strict=True))]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=list(COLUMNS))
