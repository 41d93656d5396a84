"""PNG plots of one simulated run: latency distributions and encoder utilisation.

* ``latency.png``: TTFT and TPOT histograms of the requests that finished
  ``ok``, with the SLO limits when given.
* ``encoder_utilization.png``: busy SM fraction of the encode GPUs over time
  (the paper's "<10% vs ~80%" picture), one step line per GPU.
* ``controller.png`` (a run with the online controller, :func:`controller_plot`):
  the controller's band over time with its decisions, and per GPU its
  drains (grey) and reconfigurations (orange) from ``meta["controller"]``.
* ``capacity.png``: goodput, throughput and attainment against the arrival
  rate of an ``easerve capacity`` search, sustained runs marked, the answer
  as a vertical line.
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
from sim.control import timeline

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


def controller_plot(meta: dict, path: Path, *, end_s: float, title: str = "") -> Path:
    """The controller's band over time and each GPU's drains and reconfigurations (see above)."""
    frames = timeline(meta)
    decisions, reroles = frames["decisions"], frames["reroles"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(FIGSIZE_IN[0], 5.0), sharex=True)
    start = int(decisions["from_band"].iloc[0]) if len(decisions) else 0
    times = [0.0, *decisions.get("at_s", pd.Series(dtype=float)).tolist(), end_s]
    bands = [start, *decisions.get("band", pd.Series(dtype=int)).tolist()]
    top.step(times, [*bands, bands[-1]], where="post", color="tab:red")
    for _, d in decisions.iterrows():
        top.annotate(d["reason"], (d["at_s"], d["band"]), fontsize=7, xytext=(3, 3),
                     textcoords="offset points")
    top.set_ylabel("band")
    top.set_yticks(range(len(meta.get("bands", [])) or 1))
    top.set_title(title or "online controller")
    for _, r in reroles.iterrows():
        gpu = int(r["gpu"])
        bottom.broken_barh([(r["drain_start_s"], max(0.0, r["drain_end_s"] - r["drain_start_s"]))],
                           (gpu - 0.4, 0.8), color="grey")
        if r["ready_s"] == r["ready_s"]:  # not cancelled
            bottom.broken_barh([(r["drain_end_s"], r["reconfig_s"])], (gpu - 0.4, 0.8), color="tab:orange")
            bottom.annotate(r["to"], (r["ready_s"], gpu), fontsize=7, va="center")
    bottom.set_ylabel("GPU")
    bottom.set_xlabel("time (s)")
    bottom.set_xlim(0, end_s)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


#: one colour per stream of a capacity search (green marks a sustained run, red the target)
_STREAM_COLORS = ("tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")


def capacity_plot(curve: pd.DataFrame, path: Path, *, capacity_hz: float,
                  attainment_target: float | None = None, title: str = "") -> Path:
    """The curve of a capacity search (columns of ``easerve.cli.capacity_cmd.CURVE_COLUMNS``): one
    line per stream where the search ran on several (``seed``), the capacity the worst one's."""
    streams = list(curve.groupby("seed", sort=False)) if "seed" in curve else [(None, curve)]
    fig, axes = plt.subplots(1, 2, figsize=FIGSIZE_IN)
    for i, (seed, one) in enumerate(streams):
        one = one.sort_values("rate_hz")
        rate = one["rate_hz"]
        good = one["sustained"].astype(bool)
        color = _STREAM_COLORS[i % len(_STREAM_COLORS)]
        tag = "" if len(streams) == 1 else f" (seed {seed})"
        if len(streams) == 1:
            axes[0].plot(rate, one["throughput_rps"], color="tab:gray", marker=".", label="throughput")
        axes[0].plot(rate, one["goodput_rps"], color=color, marker="o", label=f"goodput{tag}")
        axes[0].scatter(rate[good], one["goodput_rps"][good], color="tab:green", zorder=3,
                        label="sustained" if i == 0 else None)
        axes[1].plot(rate, one["attainment"], color=color, marker="o")
    axes[0].set_ylabel("req/s")
    axes[1].set_ylim(0, 1.05)
    axes[1].set_ylabel("attainment")
    if attainment_target is not None:
        axes[1].axhline(attainment_target, color="tab:red", linestyle="--", label="target")
        axes[1].legend(loc="lower left")
    for ax in axes:
        if capacity_hz > 0:
            ax.axvline(capacity_hz, color="tab:green", linestyle=":", label=f"capacity {capacity_hz:.3g}")
        ax.set_xlabel("arrival rate (req/s)")
    axes[0].legend(loc="upper left", fontsize="small")
    fig.suptitle(title, fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
