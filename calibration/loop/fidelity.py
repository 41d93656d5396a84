"""Fidelity of the simulator against the live executor: tables, ranking agreement, plots.

Pure functions over record frames (DESIGN.md §4.1), so they work on results
of either engine. Each side may hold several repeats; a metric is the
median over its repeats. The relative error is ``(sim - live) / live``.

* :func:`side_metrics`: P50/P99 TTFT and TPOT, throughput, goodput of a side.
* :func:`fidelity_rows`: one row per metric, sim vs live.
* :func:`bar_check`: the issue's bars over several deployments (median
  |relative error| of P50 <= 15%, P99 <= 25%).
* :func:`ranking`: Kendall tau of one metric across deployments, and where
  the live best sits in the simulator's order.
* :func:`distribution_plot`: TTFT and TPOT CDFs of both sides.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from scipy.stats import kendalltau

from easerve_core.slo import SLO, summarize

METRICS = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "throughput_rps", "goodput_rps")
#: metric -> bar on the median |relative error| across deployments (CPU, small models)
BARS: Mapping[str, float] = {"ttft_p50_s": 0.15, "tpot_p50_s": 0.15, "ttft_p99_s": 0.25, "tpot_p99_s": 0.25}
#: the same on a GPU (issue 7: 5% at P50, 10% at P99)
CUDA_BARS: Mapping[str, float] = {"ttft_p50_s": 0.05, "tpot_p50_s": 0.05,
                                  "ttft_p99_s": 0.10, "tpot_p99_s": 0.10}
#: live device -> its bars
BARS_BY_DEVICE: Mapping[str, Mapping[str, float]] = {"cpu": BARS, "cuda": CUDA_BARS}
#: metrics where larger is better (the rest: smaller is better)
HIGHER_IS_BETTER = frozenset({"throughput_rps", "goodput_rps", "attainment"})
TABLE_COLUMNS = ["deployment", "metric", "sim", "live", "rel_error", "live_spread_frac", "repeats"]


def side_metrics(frames: Sequence[pd.DataFrame],
                 slo: SLO | None) -> tuple[dict[str, float], dict[str, float]]:
    """Median over repeats of each metric, and the spread (max-min over median) of each."""
    if not frames:
        raise ValueError("side_metrics: no repeats")
    per = [summarize(f, slo).to_dict() for f in frames]
    med, spread = {}, {}
    for m in (*METRICS, "attainment"):
        vals = [float(p[m]) for p in per if p.get(m) is not None and not math.isnan(float(p[m]))]
        med[m] = statistics.median(vals) if vals else math.nan
        spread[m] = (max(vals) - min(vals)) / med[m] if vals and med[m] else 0.0
    return med, spread


def rel_error(sim: float, live: float) -> float:
    if live == 0 or math.isnan(live) or math.isnan(sim):
        return 0.0 if sim == live else math.nan
    return (sim - live) / live


def fidelity_rows(name: str, sim: Mapping[str, float], live: Mapping[str, float],
                  live_spread: Mapping[str, float], repeats: int) -> list[dict[str, Any]]:
    return [{"deployment": name, "metric": m, "sim": sim[m], "live": live[m],
             "rel_error": rel_error(sim[m], live[m]), "live_spread_frac": live_spread.get(m, 0.0),
             "repeats": repeats} for m in METRICS]


def bar_check(table: pd.DataFrame, bars: Mapping[str, float] = BARS) -> pd.DataFrame:
    """Per barred metric: median |relative error| across deployments, its bar, and pass/fail."""
    rows = []
    for metric, bar in bars.items():
        errs = table.loc[table["metric"] == metric, "rel_error"].abs().dropna()
        med = float(errs.median()) if len(errs) else math.nan
        rows.append({"metric": metric, "median_abs_rel_error": med, "bar": bar,
                     "deployments": len(errs), "passes": bool(med <= bar)})
    return pd.DataFrame(rows)


def ranking(table: pd.DataFrame, metric: str) -> dict[str, Any]:
    """Kendall tau between sim and live on ``metric``; the live best's place in the sim order."""
    sub = table[table["metric"] == metric].set_index("deployment")
    if len(sub) < 2:
        raise ValueError("ranking needs at least two deployments")
    sign = -1.0 if metric in HIGHER_IS_BETTER else 1.0  # sort ascending = best first
    sim_order = list((sub["sim"] * sign).sort_values(kind="stable").index)
    live_order = list((sub["live"] * sign).sort_values(kind="stable").index)
    tau = kendalltau(sub["sim"].to_numpy(), sub["live"].to_numpy()).statistic
    best = live_order[0]
    place = sim_order.index(best) + 1
    return {"metric": metric, "kendall_tau": float(tau), "sim_order": sim_order, "live_order": live_order,
            "live_best": best, "live_best_sim_rank": place, "sim_best_is_live_best": place == 1,
            "live_best_in_sim_top2": place <= 2}


def _latencies(frames: Sequence[pd.DataFrame]) -> tuple[pd.Series, pd.Series]:
    rec = pd.concat(frames, ignore_index=True)
    ok = rec[rec["status"] == "ok"]
    ttft = ok["first_token_s"] - ok["arrival_s"]
    multi = ok[ok["output_tokens"] > 1]
    tpot = (multi["finish_s"] - multi["first_token_s"]) / (multi["output_tokens"] - 1)
    return ttft.dropna().sort_values(), tpot.dropna().sort_values()


def distribution_plot(sides: Sequence[tuple[str, Sequence[pd.DataFrame], Sequence[pd.DataFrame]]],
                      path: str | Path, *, title: str = "") -> Path:
    """TTFT and TPOT CDFs, sim vs live, one row per deployment ``(name, sim frames, live frames)``."""
    fig, axes = plt.subplots(len(sides), 2, figsize=(10, 2.6 * len(sides)), squeeze=False)
    for row, (name, sim, live) in zip(axes, sides, strict=True):
        for (label, frames, style) in (("sim", sim, "-"), ("live", live, "--")):
            for ax, values, unit in zip(row, _latencies(frames), ("TTFT", "TPOT"), strict=True):
                if len(values):
                    y = [(i + 1) / len(values) for i in range(len(values))]
                    ax.plot(values.to_numpy() * 1e3, y, style, label=label)
                ax.set_xlabel(f"{unit} (ms)")
                ax.set_ylabel(f"CDF  {name}", fontsize=8)
                ax.grid(alpha=0.3)
        row[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def markdown_table(frame: pd.DataFrame, *, digits: int = 4) -> str:
    """A plain markdown table (no tabulate dependency)."""
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        cells = [f"{v:.{digits}g}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
