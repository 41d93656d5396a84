"""``python -m easerve.experiments.controller_eval [--quick]``: the controller study alone, printed.

The online-controller section of ``easerve reproduce``
(:func:`easerve.experiments.reproduce._controller_shift`'s study) without the
rest of the evaluation: HAS at 1, 2 and 3 req/s with the run's settings
(full or ``--quick``: trials, requests and streams per trial, seed 0, as the
reproduce chooser makes them), cross-checked (each band keeps the best of
the table at its rate on fresh one-segment streams; the scores are printed),
then the four systems on the rate shift
(:mod:`easerve.experiments.shift_control`), printed as the systems table, the
attainment per segment and the decisions. The numbers in docs/controller.md
come from this command.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from easerve.experiments.choose import choose
from easerve.experiments.reproduce import FULL, QUICK, SHIFT_SHAPE
from easerve.experiments.setup import load_setup
from easerve.experiments.shift_control import controller_shift, cross_checked_table, throughput_ceiling
from easerve_core.controller import Band, PlanTable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the quick run's sizes")
    parser.add_argument("--ceiling", action="store_true",
                        help="only the throughput ceiling: HAS's grid at 4 req/s (docs/controller.md)")
    parser.add_argument("--phase-streams", action="store_true",
                        help="search each band on streams one segment long (rate x segment), "
                             "not on the run's HAS streams")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    image = load_setup("image", anchored=True)
    if args.ceiling:
        ceiling = throughput_ceiling(image, need_rps=2.77, rate_hz=4.0)
        print(f"{len(ceiling)} deployments; the best ten:")
        print(ceiling.head(10).round(3).to_string(index=False))
        return 0
    nominal, timeline_s = plan.nominal_rate_hz, plan.scale.timeline_s
    rates = sorted({nominal * f for f in SHIFT_SHAPE} | {nominal})
    segment_s = timeline_s / 4
    table = PlanTable(tuple(
        Band(rate_hz=r, deployment=choose(
            image, rate_hz=r, trials=plan.has_trials, num_samples=plan.has_samples,
            num_requests=round(r * segment_s) if args.phase_streams else plan.has_requests).deployment)
        for r in rates))
    for band in table.bands:
        print(f"HAS band {band.rate_hz:g} req/s: {band.deployment.label()}")
    table, scores = cross_checked_table(image, table, segment_s=segment_s)
    with pd.option_context("display.width", 250):
        print(scores.pivot(index="deployment", columns="rate_hz", values="score").round(3).to_string())
    for band in table.bands:
        print(f"band {band.rate_hz:g} req/s: {band.deployment.label()}")
    out = controller_shift(image, table, mean_rate_hz=nominal, num_requests=int(nominal * timeline_s),
                           segment_s=segment_s, bin_s=segment_s / 6, shape=SHIFT_SHAPE)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(out["systems"].drop(columns=["start"]).round(3).to_string(index=False))
        print(out["phases"].pivot(index="system", columns="segment", values="attainment")
              .reindex(out["systems"]["system"]).round(3).to_string())
        print(out["decisions"].round(2).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
