"""PNG figures of the evaluation, one function per figure, each from a study's frame."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

DPI = 110
SYSTEM_STYLE = {
    "easerve": ("EAServe", "tab:red"),
    "dynamo": ("request-at-a-time EPD (Dynamo-like)", "tab:blue"),
    "vllm": ("aggregated (vLLM-like)", "tab:green"),
    "fixed-batch": ("fixed-batch EPD", "tab:orange"),
}
#: the headline sweep's readings of the baselines (``tuning``): line style and label suffix
TUNING_STYLE = {"tuned": ("-", ""), "config": ("--", ", config allocation")}


def goodput_curves(sweep: pd.DataFrame, path: Path, *, tier: str = "moderate") -> Path:
    """Goodput against arrival rate per modality: tuned systems solid, config baselines dashed.

    Each panel has its own axes, scaled to its own modality's rates and
    goodputs (as the paper normalises within each modality): audio reaches
    tens of req/s where video stays near one.
    """
    fig = goodput_figure(sweep, tier=tier)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def goodput_figure(sweep: pd.DataFrame, *, tier: str = "moderate") -> plt.Figure:
    """:func:`goodput_curves`' figure, unsaved (one panel per modality, each scaled on its own)."""
    modalities = list(dict.fromkeys(sweep["modality"]))
    fig, axes = plt.subplots(1, len(modalities), figsize=(4.2 * len(modalities), 4.0), squeeze=False)
    col = f"goodput_{tier}_rps"
    sweep = sweep if "tuning" in sweep else sweep.assign(tuning="tuned")
    med = sweep.groupby(["modality", "system", "tuning", "rate_hz"], as_index=False)[col].median()
    for ax, modality in zip(axes[0], modalities, strict=True):
        own = med[med["modality"] == modality]
        for (system, (label, color)), (tuning, (ls, suffix)) in itertools.product(
                SYSTEM_STYLE.items(), TUNING_STYLE.items()):
            rows = own[(own["system"] == system) & (own["tuning"] == tuning)]
            if not rows.empty:
                ax.plot(rows["rate_hz"], rows[col], marker="o", ms=3 if suffix else 5, ls=ls,
                        color=color, alpha=0.55 if suffix else 1.0, label=label + suffix)
        rates = sorted(own["rate_hz"].unique())
        top = float(own[col].max()) if own[col].notna().any() else 0.0
        ax.plot(rates, rates, ls=":", color="grey", lw=0.8)  # goodput = rate: every request in SLO
        ax.set_ylim(0, 1.15 * top if top > 0 else 1.0)  # the curves, not the diagonal, set the scale
        ax.set(title=f"{modality}: goodput ({tier} SLO)", xlabel="arrival rate (req/s)",
               ylabel="goodput (req/s)")
        ax.grid(alpha=0.3)
    labels: dict[str, Any] = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            labels.setdefault(label, handle)
    fig.legend(list(labels.values()), list(labels), loc="lower center", ncol=3, fontsize=7)
    fig.tight_layout(rect=(0, 0.14, 1, 1))  # the legend below the panels, covering no curve
    return fig


def clip_length_plot(frame: pd.DataFrame, path: Path) -> Path:
    """Peak goodput per system against the mean video item's LM tokens (the what-if)."""
    fig, ax = plt.subplots(figsize=(5, 3.2))
    scaled = frame["mix"].str.contains(" x") if "mix" in frame else pd.Series(True, index=frame.index)
    for system, (label, color) in SYSTEM_STYLE.items():
        rows = frame[(frame["system"] == system) & scaled].sort_values("mean_item_tokens")
        if not rows.empty:
            ax.plot(rows["mean_item_tokens"], rows["goodput_rps"], marker="o", color=color, label=label)
        named = frame[(frame["system"] == system) & ~scaled]
        ax.scatter(named["mean_item_tokens"], named["goodput_rps"], marker="*", s=90, color=color)
    for mix, rows in frame[~scaled].groupby("mix"):
        ax.annotate(mix, (rows["mean_item_tokens"].iloc[0], rows["goodput_rps"].max()), fontsize=6,
                    textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel("mean LM tokens per video clip")
    ax.set_ylabel("peak goodput, moderate SLO (req/s)")
    ax.set_title("video: goodput vs clip length", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def utilization_traces(util: pd.DataFrame, path: Path) -> Path:
    systems = list(dict.fromkeys(util["system"]))
    fig, axes = plt.subplots(len(systems), 1, figsize=(9, 1.9 * len(systems)), sharex=True,
                             squeeze=False)
    for ax, system in zip(axes[:, 0], systems, strict=True):
        rows = util[util["system"] == system]
        label, color = SYSTEM_STYLE.get(system, (system, "black"))
        ax.fill_between(rows["bin_s"], rows["busy_frac"] * 100, step="post", color=color, alpha=0.6)
        ax.set_ylim(0, 100)
        ax.set_ylabel("busy SMs %")
        ax.set_title(f"{label}: mean {rows['busy_frac'].mean() * 100:.0f}%", fontsize=9)
    axes[-1][0].set_xlabel("time (s)")
    return _save(fig, path)


def burst_plot(burst: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(burst["cv"], burst["ttft_p99_s"], marker="o", color="tab:red", label="P99 TTFT")
    ax.set_xlabel("coefficient of variation of inter-arrival gaps")
    ax.set_ylabel("P99 TTFT (s)")
    ax2 = ax.twinx()
    ax2.plot(burst["cv"], burst["throughput_rps"], marker="s", color="tab:blue", label="throughput")
    ax2.set_ylabel("throughput (req/s)")
    ax.set_xscale("log", base=2)
    ax.set_title("Burstiness at one mean rate (EAServe)")
    fig.legend(loc="upper left", fontsize=7)
    return _save(fig, path)


def _shift_axes(bins: pd.DataFrame, title: str, height: float) -> tuple[Any, Any]:
    """A rate-shift figure: the offered rate per bin (left) and an attainment axis (right)."""
    fig, ax = plt.subplots(figsize=(8, height))
    ax.step(bins["bin_s"], bins["offered_rate_hz"], where="post", color="grey", label="offered rate")
    ax.set(ylabel="offered rate (req/s)", xlabel="arrival time (s)", title=title)
    right = ax.twinx()
    right.set(ylim=(0, 1.05), ylabel="attainment")
    return fig, right


def rate_shift_plot(bins: pd.DataFrame, path: Path) -> Path:
    fig, ax2 = _shift_axes(bins, "Rate shifts around the rate HAS chose for", 3.2)
    ax2.plot(bins["bin_s"], bins["attainment"], marker=".", color="tab:red", label="SLO attainment")
    fig.legend(loc="lower left", fontsize=7)
    return _save(fig, path)


#: the online-controller study's systems and their colours
SHIFT_COLOURS = {"static-mean": "tab:blue", "static-peak": "tab:green", "oracle": "tab:purple",
                 "controller": "tab:red", "oracle/frugal": "tab:pink", "controller/frugal": "tab:orange"}


def controller_shift_plot(bins: pd.DataFrame, decisions: pd.DataFrame, path: Path) -> Path:
    """SLO attainment per arrival-time bin for each system over the offered rate; the controller's
    and the oracle's decisions as ticks, their re-roles (decision to last GPU ready) as spans."""
    first = bins[bins["system"] == bins["system"].iloc[0]]
    fig, ax2 = _shift_axes(first, "Rate shifts: static, oracle and online controller (bars: re-roles)", 3.6)
    for system, rows in bins.groupby("system", sort=False):
        ax2.plot(rows["bin_s"], rows["attainment"], marker=".", color=SHIFT_COLOURS.get(str(system)),
                 label=f"{system} attainment")
    for k, (system, rows) in enumerate(decisions.groupby("system", sort=False) if len(decisions) else []):
        colour = SHIFT_COLOURS.get(str(system))
        for _, d in rows.iterrows():
            ax2.axvspan(d["at_s"], d["last_ready_s"], ymin=0.02 + 0.05 * k, ymax=0.06 + 0.05 * k,
                        color=colour, alpha=0.6)
    fig.legend(loc="lower left", fontsize=7)
    return _save(fig, path)


def controller_shapes_plot(bins: pd.DataFrame, path: Path) -> Path:
    """One panel per model (rows) and traffic shape (columns): the offered rate per arrival-time
    bin and each system's SLO attainment in it."""
    models, shapes = list(dict.fromkeys(bins["modality"])), list(dict.fromkeys(bins["shape"]))
    fig, axes = plt.subplots(len(models), len(shapes), figsize=(3.4 * len(shapes), 2.6 * len(models)),
                             squeeze=False)
    handles: list[Any] = []
    for (i, model), (j, shape) in itertools.product(enumerate(models), enumerate(shapes)):
        ax, rows = axes[i][j], bins[(bins["modality"] == model) & (bins["shape"] == shape)]
        first = rows[rows["system"] == rows["system"].iloc[0]]
        ax.step(first["bin_s"], first["offered_rate_hz"], where="post", color="grey", label="offered rate")
        ax.set(title=f"{model}: {shape}", xlabel="arrival time (s)", ylabel="req/s")
        right = ax.twinx()
        right.set(ylim=(0, 1.05))
        for system, g in rows.groupby("system", sort=False):
            right.plot(g["bin_s"], g["attainment"], marker=".", ms=3, color=SHIFT_COLOURS.get(str(system)),
                       label=f"{system} attainment")
        if not handles:
            handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def convergence_plot(conv: pd.DataFrame, path: Path, *, grid_best: dict[str, float]) -> Path:
    modalities = list(dict.fromkeys(conv["modality"]))
    fig, axes = plt.subplots(1, len(modalities), figsize=(4.2 * len(modalities), 3.2), squeeze=False)
    for ax, modality in zip(axes[0], modalities, strict=True):
        rows = conv[conv["modality"] == modality]
        for sampler, color in (("tpe", "tab:red"), ("random", "tab:blue")):
            med = rows[rows["sampler"] == sampler].groupby("trial")["best_goodput_rps"].median()
            ax.plot(med.index, med.values, color=color, label=f"{sampler} (median of seeds)")
        if modality in grid_best:
            ax.axhline(grid_best[modality], ls="--", color="black", label="grid best")
        ax.set(title=f"{modality}: HAS convergence", xlabel="trial", ylabel="best goodput so far (req/s)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    return _save(fig, path)


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
