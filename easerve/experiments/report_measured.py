"""The report's section on measured hardware: the headline on 8 x H100 and 8 x H200.

:func:`measured_sections` prints ``headline_measured`` (written by
:func:`~easerve.experiments.measured_study.measured_headline`) beside the RTX
6000 Ada roofline's tuned peaks (``peak_goodput``), the order of the systems
under each (GPU, profile kind), and, computed per modality, where that order
differs from the RTX 6000 Ada roofline's and, on the same GPU, between the
measured and the roofline profile. Empty when the run has no such table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from easerve.experiments.markdown import md_table
from easerve.experiments.measured_study import (
    HAS_REQUESTS,
    HAS_SAMPLES,
    HAS_TRIALS,
    REFERENCE,
    SCALE,
    TIE_FRAC,
    ranking_changes,
    rankings,
    reference_peaks,
)

#: the study's systems in the headline's order
_SYSTEMS = ("easerve", "dynamo", "vllm", "fixed-batch")


def measured_sections(t: Mapping[str, pd.DataFrame]) -> list[str]:
    """The section (a list of Markdown paragraphs), or none without ``headline_measured``."""
    if "headline_measured" not in t:
        return []
    peaks = all_peaks(t["headline_measured"], t.get("peak_goodput"))
    grid = ", ".join(f"{r:g}" for r in SCALE.rates_hz)
    return [
        "## The headline on measured hardware (8 x H100 SXM, 8 x H200)",
        "The tuned headline (every system at its own HAS choice per rate) on the same models, "
        "mixes and number of GPUs, on two other servers, each priced two ways: `measured`, a "
        "profile built from aiconfigurator-core's vLLM kernel tables for `h100_sxm` / `h200_sxm` "
        "(the roofline with the GPU's fitted constants for the ops they lack; docs/profiles.md "
        "§3b), and `roofline`, the hand-set roofline every RTX 6000 Ada result uses. Both keep "
        "the paper-anchored per-call encoder cost and the measured host preprocessing; each "
        "server's SLO tiers are its own (multiples of its unloaded latency). A smaller sweep "
        f"than the RTX 6000 Ada headline's: rates {grid} req/s, extended "
        f"{SCALE.extend_factor:g}x at most {SCALE.max_extensions} times, refined "
        f"{SCALE.refine_levels} times around each peak, seeds per point: {SCALE.num_seeds}, "
        f"points of at least {SCALE.min_duration_s:g} s; HAS per choice: {HAS_TRIALS} trials, "
        f"{HAS_REQUESTS} requests, streams: {HAS_SAMPLES} (`easerve.experiments.measured_study`; "
        "the RTX 6000 Ada headline: 9 rates to 5 req/s, 3 seeds, 250 s, 30 trials of 500 "
        "requests on 2 streams). Peak goodput at the "
        "moderate tier, req/s; '>= x': still rising at the sweep's top.",
        md_table(wide_table(peaks)),
        "### The order of the systems",
        f"Highest peak first; '=' marks peaks within {TIE_FRAC:.0%} of each other.",
        md_table(rankings(peaks), ["modality", "gpu", "profile_kind", "ranking"]),
        "### Where the ranking changes",
        f"Against the committed headline ({REFERENCE[0]}, {REFERENCE[1]}), per modality, every "
        "pair of systems whose order differs: flipped ('b above a'), separated ('a above b, tied "
        f"before') or merged into a tie ('a = b, a above before'); peaks within {TIE_FRAC:.0%} "
        "are tied:",
        _bullets(ranking_changes(peaks)),
        "Between the profile kinds on the same GPU (measured against roofline):",
        _bullets([line for gpu in dict.fromkeys(peaks["gpu"]) if gpu != REFERENCE[0]
                  for line in ranking_changes(peaks, (gpu, "roofline"), [(gpu, "measured")])]),
    ]


def all_peaks(measured: pd.DataFrame, peak_goodput: pd.DataFrame | None) -> pd.DataFrame:
    """``measured`` below the committed headline's tuned peaks (when the run has them)."""
    frames = [] if peak_goodput is None else [reference_peaks(peak_goodput)]
    return pd.concat([*frames, measured], ignore_index=True)


def wide_table(peaks: pd.DataFrame) -> pd.DataFrame:
    """One row per (modality, system), one column per (gpu, profile kind): the peak goodput."""
    wheres = list(dict.fromkeys(zip(peaks["gpu"], peaks["profile_kind"], strict=True)))
    cols = ["gpu", "profile_kind", "modality", "system", "peak_goodput_rps", "censored"]
    cell = {(g, k, m, s): (v, c) for g, k, m, s, v, c in peaks[cols].itertuples(index=False)}
    rows = []
    for modality in dict.fromkeys(peaks["modality"]):
        present = set(peaks.loc[peaks["modality"] == modality, "system"])
        for system in [s for s in _SYSTEMS if s in present] + sorted(present - set(_SYSTEMS)):
            row = {"modality": modality, "system": system}
            for gpu, kind in wheres:
                value, censored = cell.get((gpu, kind, modality, system), (math.nan, False))
                row[f"{gpu} {kind}"] = "—" if math.isnan(value) else \
                    f"{'>= ' if bool(censored) else ''}{value:.3g}"
            rows.append(row)
    return pd.DataFrame(rows)


def _bullets(lines: list[str]) -> str:
    return "\n".join(f"- {line}" for line in lines) if lines else "- (nothing to compare)"
