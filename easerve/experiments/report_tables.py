"""The report's headline tables beside the paper's: peaks per reading, ratios, p99s, clip lengths.

Pure frame-to-frame functions over the study frames (no Markdown, no files);
:mod:`easerve.experiments.report` lays them out in ``report.md``, and the
notebooks read the same tables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set

import pandas as pd

from easerve.experiments import paper


def _ratio(ours: float, theirs: float) -> str:
    return "—" if not theirs or math.isnan(ours) or math.isnan(theirs) else f"{ours / theirs:.2f}"


def reading(peak: pd.DataFrame, tuning: str) -> pd.DataFrame:
    """The peaks of one reading of the baselines (``tuned`` or ``config``) beside EAServe's
    (HAS-tuned in both); a frame without a ``tuning`` column is one reading already."""
    if "tuning" not in peak:
        return peak
    return peak[(peak["tuning"] == tuning) | (peak["system"] == "easerve")]


def goodput_vs_paper(peak: pd.DataFrame, free: pd.DataFrame,
                     clips: pd.DataFrame | None = None, *, tuning: str = "tuned") -> pd.DataFrame:
    """The headline table of one reading of the baselines (:func:`reading`); ``clips`` (the
    video what-if) adds a row for our own clips."""
    peak, free = reading(peak, tuning), reading(free, tuning)
    rows = []
    for modality, systems in paper.GOODPUT_MODERATE.items():
        sub = peak[peak["modality"] == modality].set_index("system")["goodput_rps"]
        alt = free[free["modality"] == modality]["goodput_rps"]
        ours = {s: float(sub.get(s, math.nan)) for s in ("dynamo", "vllm", "easerve", "fixed-batch")}
        label = f"video, `{paper.MODALITIES[modality][1]}`" if modality == "video" else modality
        censored = set(peak[(peak["modality"] == modality) & peak.get("censored", False)]["system"])
        rows.append(_paper_row(label, ours, systems, free=float(alt.iloc[0]) if len(alt) else math.nan,
                               censored=censored))
        if modality == "video" and clips is not None:
            for mix, sub in clips[clips["mix"].str.endswith(" x1")].groupby("mix"):
                ours = dict(zip(sub["system"], sub["goodput_rps"], strict=True))
                rows.append(_paper_row(f"video, `{mix.removesuffix(' x1')}` (what-if)",
                                       ours, systems))
    return pd.DataFrame(rows)


def _paper_row(label: str, ours: Mapping[str, float], paper_: Mapping[str, float], *,
               free: float = math.nan, censored: Set[str] = frozenset()) -> dict[str, str]:
    """One headline row; a peak in ``censored`` (still rising at the sweep's top) reads ">= x"."""
    def of(system: str) -> float:
        return float(ours.get(system, math.nan))

    def num(x: float, system: str = "") -> str:
        return "—" if math.isnan(x) else f"{'>= ' if system in censored else ''}{x:.3g}"

    return {
        "modality": label,
        "Dynamo-like ours / paper": f"{num(of('dynamo'), 'dynamo')} / {paper_['dynamo']:.2f}",
        "vLLM-like ours / paper": f"{num(of('vllm'), 'vllm')} / {paper_['vllm']:.2f}",
        "vLLM-like, free in-step encoder": num(free),
        "fixed-batch ours": num(of("fixed-batch"), "fixed-batch"),
        "EAServe ours / paper": f"{num(of('easerve'), 'easerve')} / {paper_['easerve']:.2f}",
        "EAServe/Dynamo ours / paper": f"{_ratio(of('easerve'), of('dynamo'))} / "
                                       f"{paper_['easerve'] / paper_['dynamo']:.2f}",
        "EAServe/vLLM ours / paper": f"{_ratio(of('easerve'), of('vllm'))} / "
                                     f"{paper_['easerve'] / paper_['vllm']:.2f}",
        "EAServe/fixed-batch ours": _ratio(of("easerve"), of("fixed-batch")),
    }


#: the baselines a headline ratio divides by (the best of them at each reading)
BASELINES = ("dynamo", "fixed-batch", "vllm")


def _paper_best_ratio(modality: str) -> float:
    """The paper's EAServe bar over the better of its Dynamo and vLLM bars (moderate tier)."""
    bars = paper.GOODPUT_MODERATE[modality]
    return bars["easerve"] / max(bars["dynamo"], bars["vllm"])


def _best_ratio(peak: pd.DataFrame, modality: str, tuning: str) -> str:
    """EAServe's peak over the best baseline's, "ratio (baseline)", in one reading."""
    sub = reading(peak, tuning)
    sub = sub[sub["modality"] == modality].set_index("system")["goodput_rps"]
    base = sub.reindex([b for b in BASELINES if b in sub.index]).dropna()
    if "easerve" not in sub or base.empty:
        return "—"
    best = str(base.idxmax())
    return f"{_ratio(float(sub['easerve']), float(base[best]))} ({best})"


def headline(t: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per modality, EAServe's peak goodput over the best baseline's in every reading: tuned and
    config baselines at the moderate tier, the five tiers and the absolute SLO (tuned), and
    without the residual encoder-call cost (tuned, moderate) when the run has it."""
    rows = []
    by_slo = t.get("peak_goodput_by_slo")
    bare = t.get("peak_goodput_no_residual")
    for modality in paper.GOODPUT_MODERATE:
        row = {"modality": modality, "paper (Dynamo, vLLM)": f"{_paper_best_ratio(modality):.2f}",
               "tuned": _best_ratio(t["peak_goodput"], modality, "tuned"),
               "config": _best_ratio(t["peak_goodput"], modality, "config")}
        if by_slo is not None:
            for slo, frame in by_slo.groupby("slo", sort=False):
                row[f"tuned, {slo}"] = _best_ratio(frame, modality, "tuned")
        if bare is not None:
            row["tuned, no residual"] = _best_ratio(bare, modality, "tuned")
        rows.append(row)
    return pd.DataFrame(rows)


def by_slo_table(by_slo: pd.DataFrame) -> pd.DataFrame:
    """Every system's tuned peak goodput under each SLO, one column per SLO."""
    tuned = reading(by_slo, "tuned")
    wide = tuned.pivot_table(index=["modality", "system"], columns="slo", values="goodput_rps",
                             sort=False).reset_index()
    wide.columns.name = None
    return wide


def p99_at_2(sweep: pd.DataFrame) -> pd.DataFrame:
    """Each system's median p99 TTFT and TPOT and throughput at 2 req/s, beside the paper's p99 TTFT."""
    keys = ["modality", "system", "tuning"] if "tuning" in sweep else ["modality", "system"]
    at = sweep[sweep["rate_hz"] == 2.0].groupby(keys, as_index=False)[
        ["ttft_p99_s", "tpot_p99_s", "throughput_rps"]].median()
    at["paper_ttft_p99_s"] = [paper.P99_TTFT_AT_2RPS.get(m, {}).get(s, math.nan)
                              for m, s in zip(at["modality"], at["system"], strict=True)]
    return at


def clip_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per video mix: each system's peak goodput and EAServe over each baseline."""
    wide = frame.pivot_table(index=["mix", "mean_item_tokens"], columns="system",
                             values="goodput_rps").reset_index().sort_values("mean_item_tokens")
    wide.columns.name = None
    wide["mean_item_tokens"] = wide["mean_item_tokens"].round().astype(int)
    for base in ("dynamo", "vllm"):
        if base in wide and "easerve" in wide:
            wide[f"easerve/{base}"] = wide["easerve"] / wide[base]
    return wide
