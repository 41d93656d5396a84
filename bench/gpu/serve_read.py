"""Read what the serving check's ``easerve validate`` steps wrote: fidelity rows, bars, modes, splits.

A validate folder holds ``fidelity.csv``, ``summary.json`` (with the bars)
and ``runs/<deployment>/{sim,live-<i>}/`` (each a ``summary.json`` of its
metrics, ``records.parquet`` and ``stage_log.parquet``). This module turns
them into the check's own rows: ``fidelity.csv`` with a ``round`` column,
one metrics row per serving mode, and ``serve.csv``: per encode micro-batch
and per local prefill of the encode worker, the share the partitioner gave
and the lane (SMs) that share maps to on the levels the device built
(:meth:`live.gpu.lanes.LanePool.lane_for`, the lookup the live backend makes).
"""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from live.gpu.lanes import LanePool

#: a live run's metrics the serving table reports (each the median over the mode's repeats)
MODE_METRICS = ("throughput_rps", "goodput_rps", "attainment", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s",
                "tpot_p99_s", "num_ok", "num_requests", "makespan_s")


def fidelity_rows(folder: Path, round_name: str) -> list[dict[str, Any]]:
    """``folder/fidelity.csv``'s rows, each tagged with ``round``."""
    with open(folder / "fidelity.csv", newline="") as fh:
        return [{"round": round_name, **row} for row in csv.DictReader(fh)]


def bars(folder: Path) -> list[dict[str, Any]]:
    """The bar checks ``easerve validate`` wrote (metric, median |rel error|, bar, passes)."""
    return list(json.loads((folder / "summary.json").read_text()).get("bars", []))


def bars_met(checks: Sequence[dict[str, Any]]) -> bool:
    return bool(checks) and all(bool(c.get("passes")) for c in checks)


def _runs(folder: Path, deployment: str) -> list[Path]:
    return sorted(p for p in (folder / "runs" / deployment).glob("live-*") if p.is_dir())


def mode_metrics(folder: Path, deployment: str) -> dict[str, Any]:
    """Median live metrics of ``deployment``'s trials, with the simulator's beside them."""
    live = [json.loads((p / "summary.json").read_text()) for p in _runs(folder, deployment)]
    out: dict[str, Any] = {"live_runs": len(live)}
    for key in MODE_METRICS:
        values = [float(s[key]) for s in live if s.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    sim_path = folder / "runs" / deployment / "sim" / "summary.json"
    if sim_path.exists():
        sim = json.loads(sim_path.read_text())
        out["sim"] = {k: sim.get(k) for k in MODE_METRICS}
    if live:
        out["sm_share_table"] = live[0].get("sm_share_table")
        out["sm_share_table_source"] = live[0].get("sm_share_table_source")
    return out


def split_rows(folder: Path, deployment: str, mode: str, lanes: LanePool) -> list[dict[str, Any]]:
    """Per encode micro-batch and local prefill on the encode worker: its share and lane.

    ``overlaps_encode`` marks a local prefill that started while an encode
    micro-batch ran: the case where the partitioner splits the SMs.
    """
    rows: list[dict[str, Any]] = []
    for repeat, run in enumerate(_runs(folder, deployment)):
        log = pd.read_parquet(run / "stage_log.parquet")
        mine = log[log["group"] == "encode"].sort_values("start_s")
        encodes = mine[mine["stage"] == "encode"][["start_s", "end_s"]].to_numpy()
        for index, r in enumerate(mine.itertuples(index=False)):
            role = "encode" if r.stage == "encode" else "prefill"
            lane = lanes.lane_for(role, float(r.sm_share))
            overlaps = False
            if role == "prefill" and len(encodes):
                overlaps = bool(((encodes[:, 0] <= r.start_s) & (r.start_s < encodes[:, 1])).any())
            rows.append({"mode": mode, "repeat": repeat, "index": index, "stage": r.stage,
                         "start_s": round(float(r.start_s), 6), "end_s": round(float(r.end_s), 6),
                         "batch_size": int(r.batch_size), "tokens": int(r.tokens),
                         "sm_share": float(r.sm_share), "lane": lane.name, "lane_sms": lane.sms,
                         "total_sms": lanes.total_sms, "overlaps_encode": overlaps})
    return rows


def split_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What the partitioner applied in one mode: encode SMs per batch size, local prefills' lanes."""
    enc = [r for r in rows if r["stage"] == "encode"]
    pre = [r for r in rows if r["stage"] == "prefill"]
    by_batch: dict[str, dict[str, int]] = {}
    for r in enc:
        counts = by_batch.setdefault(str(r["batch_size"]), {})
        counts[str(r["lane_sms"])] = counts.get(str(r["lane_sms"]), 0) + 1
    lanes: dict[str, int] = {}
    for r in pre:
        lanes[str(r["lane_sms"])] = lanes.get(str(r["lane_sms"]), 0) + 1
    return {"encode_batches": len(enc), "encode_sms_by_batch_size": by_batch,
            "local_prefills": len(pre),
            "local_prefills_during_encode": sum(r["overlaps_encode"] for r in pre),
            "local_prefill_sms": lanes}
