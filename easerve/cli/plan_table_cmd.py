"""``easerve plan-table CONFIG --rates 1,2,3 --out DIR``: the online controller's plans, one HAS per band.

For every rate it screens and searches exactly as ``easerve search`` does
(TPE on the simulator, ``--trials`` each), in one Optuna storage in DIR
(``study.db``: rerunning the same command reuses every finished study, so
the table is computed once and cached). Writes ``DIR/plan_table.json`` (the
bands, rate and deployment each, and the controller's settings; read by
``easerve sim --controller``; in code, ``live.trial.Trial(plan, controller=...)``) and
``DIR/plan_table.csv`` (HAS's choice per band, and the table's). A rate no
allocation can carry is refused with the screen's reason.

Trials are sized in time as ``easerve search`` sizes them (``--trial-s``,
:mod:`easerve_core.trial_length`), climb the same ladder and the band's pick
is the best of its top three re-run on longer streams (docs/has.md).
``--horizon-s H`` instead searches each band on streams ``rate x H``
requests long (the evaluation's phase-long streams: a band serves a phase,
and an overload's queue grows over all of it); ``--samples`` streams per
trial. ``--cross-check`` then lets every band keep
the best of the table's deployments, each told every band's rate, judged at
the band's rate on two fresh streams (the config's seed + 2000 and + 2001,
as long as the search's) by the simulator
(:func:`easerve_core.plan_check.cross_check`); the scores go to
``DIR/cross_check.csv``. See docs/controller.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import optuna
import pandas as pd

from easerve.cli.common import add_config, add_out, command_parser
from easerve.cli.outputs import check_study_folder, write_tables
from easerve.cli.search_cmd import plan_search
from easerve_core import checks
from easerve_core.controller import Band, ControllerSettings, PlanTable
from easerve_core.has import Ladder, best_deployment, recheck, trials_frame
from easerve_core.plan import replan
from easerve_core.plan_check import cross_check
from easerve_core.slo import TIER_NAMES
from easerve_core.trial_length import DEFAULT_MAX_REQUESTS, DEFAULT_MIN_REQUESTS, DEFAULT_TRIAL_S, TrialLength
from runtime.files import write_text_atomic
from runtime.has import SearchSettings, run_search
from sim.evaluate import make_evaluator


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "plan-table", doc=__doc__, func=run,
                       help="HAS per rate band: the online controller's plan table")
    add_config(p)
    p.add_argument("--rates", required=True, help="comma-separated rates (req/s), one band each")
    p.add_argument("--tier", default="moderate", help=f"SLO tier: {', '.join(TIER_NAMES)}")
    p.add_argument("--trials", type=int, default=30, help="TPE trials per band")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--trial-s", type=float, default=DEFAULT_TRIAL_S,
                      help=f"seconds of arrivals a trial covers at least (default {DEFAULT_TRIAL_S:g}; "
                           "longer where the SLO's growth horizon asks)")
    size.add_argument("--num-requests", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--min-requests", type=int, default=None,
                   help=f"requests a trial's full stream holds at least (default {DEFAULT_MIN_REQUESTS}; "
                        "not with --horizon-s)")
    size.add_argument("--horizon-s", type=float, default=None,
                      help="search each band on streams rate x HORIZON_S requests long")
    p.add_argument("--samples", type=int, default=1, help="request streams per trial")
    p.add_argument("--cross-check", action="store_true",
                   help="each band keeps the best of the table's deployments (each told every band's rate)")
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
    checks.integer("samples", args.samples, minimum=1)
    if args.num_requests is not None:
        raise ValueError("--num-requests: trials are sized in time now; give --trial-s SECONDS "
                         "(docs/has.md), or --horizon-s for phase-long streams")
    if args.horizon_s is not None and args.min_requests is not None:
        raise ValueError("--min-requests: --horizon-s sets each band's stream length, so nothing reads it")
    least = checks.integer("min-requests", DEFAULT_MIN_REQUESTS if args.min_requests is None
                           else args.min_requests, minimum=1)
    length = TrialLength(trial_s=args.trial_s, min_requests=least,
                         max_requests=max(DEFAULT_MAX_REQUESTS, least))
    if args.horizon_s is not None:
        checks.positive("horizon-s", args.horizon_s)
    out = Path(args.out)
    plans = [plan_search(args.config, rate_hz=r, tier=args.tier, num_requests=_num_requests(args, r),
                         length=length, num_samples=args.samples) for r in rates]
    sizes = [len(plan.evaluator.plan.requests) for plan in plans]
    check_study_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    bands, rows = [], []
    for rate, plan, n in zip(rates, plans, sizes, strict=True):
        samples = "" if args.samples == 1 else f"x{args.samples}"
        name = f"{Path(args.config).stem}-{args.tier}-r{rate:g}-tpe-seed{args.seed}-n{n}{samples}"
        steps = Ladder()
        settings = SearchSettings(sampler="tpe", num_trials=args.trials, seed=args.seed,
                                  storage=str(out / "study.db"), study_name=name, ladder=steps)
        study = run_search(plan.space, plan.evaluator, settings)
        frame = trials_frame(study)
        rechecked = recheck(study, plan.evaluator, steps, trials=frame)
        best = rechecked[0].deployment if rechecked else best_deployment(frame)
        goodput = rechecked[0].merged.goodput_rps if rechecked else float(frame["best_so_far_rps"].iloc[-1])
        bands.append(Band(rate_hz=rate, deployment=best))
        rows.append({"rate_hz": rate, "deployment": best.label(), "goodput_rps": goodput,
                     "trials": len(frame)})
        print(f"band {rate:g} req/s: {best.label()}  goodput {rows[-1]['goodput_rps']:.3f} req/s")
    table = PlanTable(tuple(bands))
    scores = None
    if args.cross_check:
        table, scores = _cross_checked(table, plans, sizes)
    for row, band in zip(rows, table.bands, strict=True):  # HAS's choice, unless cross-checked
        row.update(table_deployment=band.deployment.label(), told_hz=band.deployment.rate_hint_hz)
    data = {**table.to_dict(), "settings": ControllerSettings().to_dict(), "tier": args.tier,
            "config": str(args.config)}
    tables = {"plan_table": pd.DataFrame(rows)} | ({} if scores is None else {"cross_check": scores})
    write_tables(out, tables)  # each whole; the JSON, which the controller reads, last
    write_text_atomic(out / "plan_table.json", json.dumps(data, indent=2) + "\n")
    print(f"wrote {out}/plan_table.json and plan_table.csv")
    return 0


def _num_requests(args: argparse.Namespace, rate_hz: float) -> int | None:
    """``--horizon-s``'s phase-long count, else None: the trial-length rule sizes the stream."""
    if args.horizon_s is not None:
        return max(20, round(rate_hz * args.horizon_s))
    return None


#: the cross-check's streams: the config's seed plus these (fresh: the search's start at the seed)
CROSS_CHECK_OFFSET = 2000


def _cross_checked(table: PlanTable, plans: list[Any], sizes: list[int]) -> tuple[PlanTable, pd.DataFrame]:
    """Every band keeps the best of the table (each deployment told every band's rate) at its rate;
    the checked table and the scores."""
    judges = {}
    for band, plan, n in zip(table.bands, plans, sizes, strict=True):
        ev = plan.evaluator
        fresh = replan(ev.plan, ev.profile, seed=ev.plan.seed + CROSS_CHECK_OFFSET)  # its config says so too
        judges[band.rate_hz] = make_evaluator(fresh, ev.profile, num_requests=n, num_samples=2,
                                              options=ev.options)
    checked, rows = cross_check(table, lambda d, rate: judges[rate](d))
    for band in checked.bands:
        print(f"cross-checked band {band.rate_hz:g} req/s: {band.deployment.label()} "
              f"told {band.deployment.rate_hint_hz} req/s")
    return checked, pd.DataFrame(rows)
