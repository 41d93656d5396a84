"""HAS's regret over twelve scenarios, and each search's wall time (easerve.experiments.has_regret).

Prints one line per scenario as it finishes, then the table and the bars:
the median regret over the scenarios (target: at most 2%) and the worst
(target: at most 5%), beside the same figures for the old HAS (250-request
trials, no ladder, no recheck). ``--only image/h200/90%`` runs the scenarios
whose names contain the text; ``--extra`` adds the three large-image,
absolute-SLO scenarios on H200 (not in the bars); ``--csv PATH`` writes the
table.

Run: ``.venv/bin/python bench/has_regret.py [--only TEXT] [--csv PATH]`` (about 20 min on 2 cores)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from easerve.experiments.has_regret import (  # noqa: E402
    extra_scenarios,
    regret_study,
    scenarios,
    summary,
)

PRINTED = ["scenario", "rate_rps", "trial_requests", "long_requests", "has_pick", "has_goodput_rps",
           "has_attainment", "has_regret", "best", "best_goodput_rps", "old_pick", "old_goodput_rps",
           "old_attainment", "old_regret", "has_wall_s", "old_wall_s", "reference_wall_s"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="run the scenarios whose names contain this text")
    parser.add_argument("--csv", default=None, help="write the table here")
    parser.add_argument("--extra", action="store_true", help="add the large-image scenarios on H200")
    args = parser.parse_args()
    chosen = [s for s in scenarios() + (extra_scenarios() if args.extra else []) if args.only in s.name]
    if not chosen:
        parser.error(f"--only: no scenario name contains {args.only!r}")
    rows = regret_study(chosen, log=lambda line: print(line, flush=True))
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_columns", None):
        print(table[PRINTED].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    bars = [r for r in rows if not r["scenario"].startswith("large-image")]
    extra = [r for r in rows if r["scenario"].startswith("large-image")]
    for name, part in (("the bars' scenarios", bars), ("large-image scenarios", extra)):
        if part:
            s = summary(part)
            print(f"{name}: HAS regret median {s['median_regret']:.2%} (bar 2%), worst "
                  f"{s['worst_regret']:.2%} (bar 5%) over {int(s['scenarios'])}; old HAS median "
                  f"{s['old_median_regret']:.2%}, worst {s['old_worst_regret']:.2%}")
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
