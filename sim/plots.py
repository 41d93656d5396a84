"""PNG plots of one simulated run: latency distributions and encoder utilisation.

* ``latency.png``: TTFT and TPOT histograms of the requests that finished
  ``ok``, with the SLO limits when given.
* ``encoder_utilization.png``: busy SM fraction of the encode GPUs over time
  (the paper's "<10% vs ~80%" picture), one step line per GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from easerve_core.request import tpot_s, ttft_s
from easerve_core.slo import SLO

#: histogram bins of the latency plots
NUM_BINS = 50
#: figure size in inches (width, height)
FIGSIZE_IN = (10.0, 3.6)
DPI = 110


def latency_plot(records: pd.DataFrame, path: Path, *, slo: SLO | None = None,
                 title: str = "") -> Path:
    ok = records[records["status"] == "ok"]
    fig, axes = plt.subplots(1, 2, figsize=FIGSIZE_IN)
    for ax, values, limit, name in ((axes[0], ttft_s(ok), slo.ttft_s if slo else None, "TTFT (s)"),
                                    (axes[1], tpot_s(ok) * 1e3, slo.tpot_s * 1e3 if slo else None,
                                     "TPOT (ms)")):
        clean = values.dropna()
        if len(clean):
            ax.hist(clean, bins=NUM_BINS, color="tab:blue", alpha=0.8)
        if limit is not None:
            ax.axvline(limit, color="tab:red", linestyle="--", label=f"SLO {limit:.3g}")
            ax.legend()
        ax.set_xlabel(name)
        ax.set_ylabel("requests")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def utilization_plot(utilization: pd.DataFrame, gpus: Sequence[int], path: Path, *,
                     end_s: float, title: str = "") -> Path:
    fig, ax = plt.subplots(figsize=FIGSIZE_IN)
    for gpu in gpus:
        rows = utilization[utilization["gpu"] == gpu]
        if rows.empty:
            continue
        times = [*rows["time_s"], end_s]
        fracs = [*rows["busy_frac"], float(rows["busy_frac"].iloc[-1])]
        ax.step(times, fracs, where="post", label=f"GPU {gpu}", linewidth=0.8)
        mean = _time_mean(rows, end_s)
        ax.axhline(mean, linestyle=":", linewidth=0.8, color="gray")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("busy SM fraction")
    ax.set_title(title)
    if len(gpus):
        ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _time_mean(rows: pd.DataFrame, end_s: float) -> float:
    times = rows["time_s"].to_numpy()
    fracs = rows["busy_frac"].to_numpy()
    if end_s <= times[0]:
        return 0.0
    widths = [min(b, end_s) - a for a, b in zip(times, [*times[1:], end_s], strict=True)]
    return float(sum(f * w for f, w in zip(fracs, widths, strict=True)) / (end_s - times[0]))
