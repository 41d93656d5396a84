"""The report's sections on the online controller: the rate shift, the four traffic shapes, the mix shifts.

Each section is a list of Markdown paragraphs, empty when the run has no
such study (``reproduce`` sections can be cut); :func:`controller_sections`
gives both in the report's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from easerve.experiments.markdown import md_table
from easerve.experiments.mix_bars import BARS, misses, verdicts


def controller_sections(t: Mapping[str, pd.DataFrame]) -> list[str]:
    """The rate-shift section, the traffic-shapes section, the mix shifts (each present when it ran)."""
    return [*_controller_section(t), *_controller_shapes_section(t), *_mix_shifts_section(t)]


def _mix_shifts_section(t: Mapping[str, pd.DataFrame]) -> list[str]:
    """The controller on the shifts where the best deployment moves (full run only)."""
    if "controller_mix_shifts" not in t:
        return []
    lines = [
        "## Online controller on shifts where the optimum moves",
        "Two phases of 300 s alternating twice (docs/controller.md, \"Shifts where the optimum "
        "moves\"): output length (captioning / chat, LLaVA-34B), image chat -> 16-frame video captions"
        " (Qwen2.5-VL-32B) and one-tile chat -> anyres short answers (LLaVA-34B), each phase at 0.85 "
        "of its capacity measured in the simulator on 3,600 s streams, and a trace's rate (a seeded, "
        "bursty synthetic stream in place of a public trace, which the tree does not hold). HAS plans"
        " each phase; the plan table (one band per phase along the shift's signal) is cross-checked: "
        "each phase keeps the best of the table's deployments judged on its own workload, a tie going"
        " first to a deployment tied with the best in every phase (no move). Static-low/high run "
        "HAS's own picks; the oracle (make-before-break, moving at each phase's start), the reactive "
        "and the predictive (Holt) controller run the checked table; a leaving decoder hands its "
        "sequences at once to one at least its size, which recomputes them, a staged move's disjoint "
        "steps run side by side, while part of the target serves its encoders route at the share "
        "that keeps each serving Prefill worker's load, and a re-roled GPU wakes a standby engine "
        "(its weights copied back, a 1 s re-warm in place of a cold start's 25 s); every system's "
        "encoders run each phase's SM-share table (docs/controller.md, \"Moves that pay\"); the "
        "controllers skip the settle once the window's signal is three standard errors past the "
        "move's threshold (\"Settled by the evidence\"), and their window starts after a step once its "
        "two sides differ by four (\"A window that cuts at a step\"). High phases: the top band's.",
    ]
    plans = t.get("controller_mix_shifts_plans")
    if plans is not None and not plans.empty:
        lines.append(md_table(plans, ["shift", "mix", "rate_hz", "band", "deployment", "table_deployment"]))
    lines.append(md_table(t["controller_mix_shifts"],
                          ["shift", "system", "attainment_high", "attainment_low", "goodput_rps",
                           "ttft_p99_s", "tpot_p99_s", "decisions", "gpus_moved", "held_gpu_s"]))
    if {"controller_mix_shifts_phases", "controller_mix_shifts_plans"} <= t.keys():
        bars = verdicts(t, seed=0)
        bars["misses"] = bars.apply(misses, axis=1)
        lines += [
            "The evaluation's bars (`easerve.experiments.mix_bars`), and which each shift misses: "
            "HAS's per-phase picks differ and the better controller (the higher goodput of the "
            f"reactive and the predictive) decides; it reaches at least {BARS.high_attainment:g} "
            f"high-phase attainment, {BARS.over_static:g}x the better static system's goodput and "
            f"{BARS.of_oracle:g} of the oracle's; the oracle is at or above the worse static system in "
            "every phase. One seed; `easerve controller-eval --mix-shifts --seeds 0,1,2` gives the "
            "spread over seeds.",
            md_table(bars, ["shift", "controller", "decisions", "attainment_high", "over_static",
                            "of_oracle", "misses"]),
        ]
    return lines


def _controller_section(t: Mapping[str, pd.DataFrame]) -> list[str]:
    """The online controller on the rate shift: four systems, then attainment per segment."""
    if "controller_shift" not in t:
        return []
    phases = t["controller_shift_phases"].pivot(index="system", columns="segment", values="attainment")
    phases.columns = [f"segment {c} attainment" for c in phases.columns]
    phases = phases.reindex(t["controller_shift"]["system"]).reset_index()
    return [
        "## Online controller on the rate shift (LLaVA-34B, 1 and 3 req/s alternating)",
        "Static HAS at the mean and at the peak rate (HAS's own choices), an oracle that moves to "
        "each segment's band at its first instant (paying drain and reconfiguration), and the "
        "online controller on the same plan table (docs/controller.md): HAS at each band's rate, "
        "searched on streams one segment long, then cross-checked (each band keeps the best of "
        "the table's deployments, each told each band's rate, at its rate on fresh streams one "
        "segment long; a tie within 2% keeps the band above's choice, then its allocation, then "
        "goes to the one with more headroom). A move to a band that holds the current deployment "
        "is no decision.",
        *_plan_table_lines(t),
        *_frugal_lines(t),
        md_table(t["controller_shift"], ["system", "attainment_high", "attainment_low", "goodput_rps",
                                         "ttft_p99_s", "tpot_p99_s", "gpu_s_per_request",
                                         "busy_gpu_s_per_request", "decisions", "gpus_moved"]),
        md_table(phases),
        "![controller shift](controller_shift.png)",
    ]


def _controller_shapes_section(t: Mapping[str, pd.DataFrame]) -> list[str]:
    """The controller on four traffic shapes, for each model: four systems per shape."""
    if "controller_shapes" not in t:
        return []
    systems, scores = t["controller_shapes"], t.get("controller_shapes_plan_tables")
    lines = [
        "## Online controller on four traffic shapes",
        "Each model's cluster offered a step, a spike, a diurnal sine and a slow drift between half "
        "and 1.5 times a mean rate m, two thirds of what the screen says the model's best allocation "
        "carries (docs/controller.md, \"Evaluation: four traffic shapes\"). The plan table is HAS "
        "at 0.5 m, m and 1.5 m, searched and cross-checked as the rate shift's; static systems run "
        "HAS's own choices at m and 1.5 m; the oracle moves at each phase (a run of 5 s grid times "
        "the table plans for with one band). High phases: the offered rate above m.",
    ]
    if scores is not None and not scores.empty:
        lines.append(f"Bands after the cross-check: {_chosen_bands(scores)}.")
    lines += [
        md_table(systems, ["modality", "mean_rate_hz", "shape", "system", "attainment_high",
                           "attainment_low", "goodput_rps", "ttft_p99_s", "tpot_p99_s",
                           "gpu_s_per_request", "busy_gpu_s_per_request", "decisions", "gpus_moved"]),
        "![controller shapes](controller_shapes.png)",
    ]
    return lines


def _frugal_lines(t: Mapping[str, pd.DataFrame]) -> list[str]:
    """The GPU-frugal planner's bands (each on the fewest GPUs that serve it), when it ran."""
    scores = t.get("controller_frugal_plan_table")
    if scores is None or scores.empty:
        return []
    return ["The GPU-frugal planner (rows `oracle/frugal`, `controller/frugal`): HAS on every GPU "
            "count of the cluster at each band's rate, each band on the fewest GPUs within 2% of the "
            "best count's goodput (`controller_frugal_counts.csv`), cross-checked with the fewest "
            f"GPUs first among ties; the other GPUs are released. Bands: {_chosen_bands(scores, gpus=True)}."]


def _plan_table_lines(t: Mapping[str, pd.DataFrame]) -> list[str]:
    """The cross-check's goodput of each candidate at each band's rate, and the choices."""
    scores = t.get("controller_plan_table")
    if scores is None or scores.empty:
        return []
    told = [_told(v) for v in scores["told_hz"]] if "told_hz" in scores else "—"
    grid = scores.assign(told=told).pivot(index=["deployment", "told"], columns="rate_hz", values="score")
    grid.columns = [f"goodput at {c:g} req/s" for c in grid.columns]
    return [md_table(grid.reset_index()), f"Bands after the cross-check: {_chosen_bands(scores)}."]


def _told(hint: Any) -> str:
    """A candidate's rate hint as the report prints it (a fixed batcher has none)."""
    return "—" if hint is None or hint != hint else f"{float(hint):g} req/s"


def _chosen_bands(scores: pd.DataFrame, *, gpus: bool = False) -> str:
    """A cross-check's choice per band, in band order (the model first when the scores name one)."""
    chosen = scores[scores["chosen"].astype(bool)]  # rows come band by band (model by model)
    parts = []
    for _, row in chosen.iterrows():
        model = f"{row['modality']} " if "modality" in row else ""
        told = _told(row["told_hz"]) if "told_hz" in row else "—"
        count = f" ({int(row['num_gpus'])} GPUs)" if gpus else ""
        parts.append(f"{model}{row['rate_hz']:g} req/s: {row['deployment']} told {told}{count}")
    return "; ".join(parts)

