"""``easerve plan-table CONFIG --rates 1,2,3 --out DIR``: the online controller's plans, one HAS per band.

For every rate it screens and searches exactly as ``easerve search`` does
(TPE on the simulator, ``--trials`` each), in one Optuna storage in DIR
(``study.db``: rerunning the same command reuses every finished study, so
the table is computed once and cached). Writes ``DIR/plan_table.json`` (the
bands, rate and deployment each, and the controller's settings; read by
``easerve sim --controller``; in code, ``live.trial.Trial(plan, controller=...)``) and
``DIR/plan_table.csv``. A rate no allocation can carry is refused with the
screen's reason. See docs/controller.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import optuna
import pandas as pd

from easerve.cli.common import add_config, add_out, command_parser
from easerve.cli.outputs import check_study_folder
from easerve.cli.search_cmd import plan_search
from easerve_core import checks
from easerve_core.controller import Band, ControllerSettings, PlanTable
from easerve_core.has import SearchSettings, best_deployment, run_search, trials_frame
from easerve_core.slo import TIER_NAMES
from sim.evaluate import DEFAULT_NUM_REQUESTS


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "plan-table", doc=__doc__, func=run,
                       help="HAS per rate band: the online controller's plan table")
    add_config(p)
    p.add_argument("--rates", required=True, help="comma-separated rates (req/s), one band each")
    p.add_argument("--tier", default="moderate", help=f"SLO tier: {', '.join(TIER_NAMES)}")
    p.add_argument("--trials", type=int, default=30, help="TPE trials per band")
    p.add_argument("--num-requests", type=int, default=DEFAULT_NUM_REQUESTS, help="requests per trial")
    p.add_argument("--seed", type=int, default=0)
    add_out(p, "folder for plan_table.json and the cached studies")


def parse_rates(text: str) -> list[float]:
    try:
        rates = sorted({float(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise ValueError(f"--rates must be comma-separated numbers, got {text!r}") from None
    if not rates:
        raise ValueError("--rates must name at least one rate")
    return [checks.positive("--rates", r) for r in rates]


def run(args: argparse.Namespace) -> int:
    rates = parse_rates(args.rates)
    checks.one_of("tier", args.tier, TIER_NAMES)
    checks.integer("trials", args.trials, minimum=1)
    checks.integer("num-requests", args.num_requests, minimum=1)
    out = Path(args.out)
    plans = [plan_search(args.config, rate_hz=r, tier=args.tier,
                         num_requests=args.num_requests) for r in rates]
    check_study_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    bands, rows = [], []
    for rate, plan in zip(rates, plans, strict=True):
        name = f"{Path(args.config).stem}-{args.tier}-r{rate:g}-tpe-seed{args.seed}-n{args.num_requests}"
        settings = SearchSettings(sampler="tpe", num_trials=args.trials, seed=args.seed,
                                  storage=str(out / "study.db"), study_name=name)
        frame = trials_frame(run_search(plan.space, plan.evaluator, settings))
        best = best_deployment(frame)
        bands.append(Band(rate_hz=rate, deployment=best))
        rows.append({"rate_hz": rate, "deployment": best.label(),
                     "goodput_rps": float(frame["goodput_rps"].max()), "trials": len(frame)})
        print(f"band {rate:g} req/s: {best.label()}  goodput {rows[-1]['goodput_rps']:.3f} req/s")
    table = PlanTable(tuple(bands))
    data = {**table.to_dict(), "settings": ControllerSettings().to_dict(), "tier": args.tier,
            "config": str(args.config)}
    (out / "plan_table.json").write_text(json.dumps(data, indent=2) + "\n")
    pd.DataFrame(rows).to_csv(out / "plan_table.csv", index=False)
    print(f"wrote {out}/plan_table.json and plan_table.csv")
    return 0
