"""The confirmation's report: a Markdown page with a figure, and a machine-readable summary.

Reads what :func:`calibration.loop.confirm.summarize` returns (before and,
with ``--refit``, after the refit) and writes ``report.md``,
``confirm.png`` (sim vs live goodput per candidate, the live spread as a
bar) and ``summary.json`` into the confirmation folder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from calibration.loop.fidelity import markdown_table


def _frame_rows(summary: Mapping[str, Any]) -> str:
    import pandas as pd

    cols = ["name", "origin", "deployment", "search_goodput_rps", "sim_goodput_rps", "live_goodput_rps",
            "live_min_rps", "live_max_rps", "sim_ttft_p99_s", "live_ttft_p99_s", "sim_tpot_p99_s",
            "live_tpot_p99_s"]
    return markdown_table(pd.DataFrame(summary["candidates"])[cols])


def _ranking_lines(summary: Mapping[str, Any]) -> list[str]:
    rank = summary.get("ranking")
    if rank is None:
        return ["(one candidate: no ranking)"]
    return [f"- live best: `{rank['live_best']}`; the simulator's pick: `{rank['sim_pick']}` "
            f"(the live best is the simulator's #{rank['live_best_sim_rank']})",
            f"- regret of the simulator's pick: {rank['regret']:.1%} of the live best's goodput",
            f"- Kendall tau (sim vs live goodput, {len(rank['sim_order'])} candidates): "
            f"{rank['kendall_tau']:.3f}",
            f"- simulator order: {rank['sim_order']}", f"- live order: {rank['live_order']}",
            f"- (orders by goodput; goodputs within {rank['tie_frac']:.0%} of the best of their run tie, "
            "and a tie goes to the more SLO headroom: the lower of max(P99 TTFT / limit, P99 TPOT / limit))",
            f"- plain goodput order, no ties: Kendall tau {rank['plain']['kendall_tau']:.3f}, "
            f"simulator {rank['plain']['sim_order']}, live {rank['plain']['live_order']}"]


def plot(summary: Mapping[str, Any], path: Path, *, refit: Mapping[str, Any] | None = None) -> Path:
    rows = summary["candidates"]
    names = [r["name"] for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(1.4 * len(rows) + 2, 3.4))
    width = 0.27 if refit else 0.4
    ax.bar([i - width for i in x] if refit else [i - width / 2 for i in x],
           [r["sim_goodput_rps"] for r in rows],
           width, label="sim")
    live = [r["live_goodput_rps"] for r in rows]
    err = [[v - r["live_min_rps"] for v, r in zip(live, rows, strict=True)],
           [r["live_max_rps"] - v for v, r in zip(live, rows, strict=True)]]
    ax.bar(list(x) if refit else [i + width / 2 for i in x], live, width, yerr=err, capsize=3, label="live")
    if refit:
        ax.bar([i + width for i in x], [r["sim_goodput_rps"] for r in refit["candidates"]], width,
               label="sim, refit")
    ax.set_xticks(list(x), names)
    ax.set_ylabel("goodput (req/s)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(out: Path, summary: Mapping[str, Any], *, meta: Mapping[str, Any],
          refit: Mapping[str, Any] | None = None) -> Path:
    """``report.md``, ``confirm.png`` and ``summary.json`` into ``out``; the report's path."""
    plot(summary, out / "confirm.png", refit=refit)
    lines = [f"# Confirmation: HAS's candidates live ({meta['config']})", "",
             f"Command: `{meta['command']}`", "",
             f"Profile: `{meta['profile']}`; {meta['repeats']} live runs per candidate (median, and "
             f"min-max); SLO ({meta['slo']['tier']}): TTFT {meta['slo']['ttft_s']:.4g} s, TPOT "
             f"{meta['slo']['tpot_s']:.4g} s; wall time {meta['wall_s']:.0f} s.", "",
             "## Candidates", "", _frame_rows(summary), "", "![sim vs live goodput](confirm.png)", "",
             "## Agreement", "", *_ranking_lines(summary), "",
             "Median |relative error| (sim - live) / live across candidates: "
             + ", ".join(f"{k} {v:.1%}" for k, v in summary["errors"].items()), ""]
    if refit is not None:
        lines += ["## After the refit", "",
                  f"Refit profile: `{meta['refit_profile']}` (from these live runs)",
                  "", _frame_rows(refit), "", *_ranking_lines(refit), "",
                  "Median |relative error| after the refit: "
                  + ", ".join(f"{k} {v:.1%}" for k, v in refit["errors"].items()), ""]
    if meta.get("interrupted"):
        lines += ["**Interrupted**: the candidates above are those whose live runs finished.", ""]
    (out / "report.md").write_text("\n".join(lines))
    data = {**meta, "before_refit": summary, "after_refit": refit}
    (out / "summary.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    return out / "report.md"
