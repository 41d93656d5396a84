"""``easerve controller-eval [--quick]``: the controller study alone, printed.

The online-controller section of ``easerve reproduce``
(:func:`easerve.experiments.reproduce._controller_shift`'s study) without the
rest of the evaluation: HAS at 1, 2 and 3 req/s with the run's settings
(full or ``--quick``: trials and streams per trial, seed 0), each band
searched on streams one segment long (``--sweep-streams``: on the goodput
sweep's, the run's requests per trial), cross-checked (each band keeps the
best of the table's deployments, each told each band's rate, at its rate on
fresh one-segment streams; the scores are printed),
then the four systems on the rate shift (:mod:`easerve.experiments.plan_tables`,
:mod:`easerve.experiments.shift_control`), printed as the systems table, the
attainment per segment and the decisions. ``--frugal`` adds the GPU-frugal
planner's oracle and controller, ``--shapes [MODELS]`` runs the four traffic
shapes instead (:mod:`easerve.experiments.shape_control`), ``--ceiling`` the
throughput ceiling, ``--replan [STEP_HZ]`` adds the what-if controller that
plans its bands with the simulator in the loop, every STEP_HZ req/s (default
0.5), without and with the cross-check run online
(:mod:`easerve.experiments.replan_study`). ``--mix-shifts [NAMES]`` runs the
shifts where the best deployment moves instead (:mod:`easerve.experiments.shifts`,
:mod:`easerve.experiments.mix_control`: HAS per phase, static-low/high, the
make-before-break oracle, the reactive and the predictive controller);
the name ``trace-rate`` among them is the trace-rate shift on the built-in
synthetic stream; ``--shift FILE`` one shift from a TOML file; ``--trace FILE
[--trace-format burstgpt] [--trace-load F]`` the trace-rate shift from a public
trace's arrivals, its mean rate F of the mix's screened capacity
(:mod:`easerve.experiments.trace_shift`); ``--forecaster`` names the
predictive system's forecaster (default ``holt``); the mix shifts' plan
tables are cross-checked (each phase keeps the best of the table's
deployments judged on its own workload) unless ``--no-cross-check``,
``--drain-deadline S`` (``none``: until done), ``--[no-]concurrent-steps``,
``--[no-]serve-first``, ``--[no-]linger``, ``--[no-]interim-share`` and ``--[no-]standby`` set how the
controlled systems' moves run (:class:`~easerve.experiments.shift_control.MoveMechanisms`; default
:data:`~easerve.experiments.mix_control.MOVES`), ``--[no-]phase-tables``
whether every system runs each phase's SM-share table, ``--settle-z Z|none``
when the controllers may skip the settle and ``--cut-z Z|none`` when their
window cuts at a step (defaults :data:`~easerve.experiments.mix_control.SETTLE_Z`,
:data:`~easerve.experiments.mix_control.CUT_Z`), ``--oracle-lead S`` how long
before each phase the oracle moves (default
:data:`~easerve.experiments.mix_control.ORACLE_LEAD_S`), ``--rate-scale X``
runs every phase at X times its rate (a what-if on load), ``--seed N`` draws
the streams, searches and simulations from another seed, ``--seeds N,M,...``
runs them once per seed and says on how many seeds each bar holds
(:mod:`easerve.experiments.mix_bars`; every run prints its bar table), and
``--out DIR`` writes their tables as CSV (with ``--seeds``: each seed's under
``DIR/seed-N``, the bar rows in ``DIR/controller_mix_shifts_seeds.csv``);
``--jobs N`` runs their searches and simulations N at once on a local pool
(with ``--seeds``, each (seed, shift) study one task: :mod:`easerve.experiments.mix_seeds`;
the same bytes as in this process). The numbers in
docs/controller.md come from this command. ``python -m
easerve.experiments.controller_eval`` is the same command under its old name
(:func:`main`: the same flags, the same code).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from easerve.cli.outputs import check_study_folder, write_tables
from easerve.experiments.eval_size import FULL, QUICK, SHIFT_SHAPE, EvalSize
from easerve.experiments.mix_bars import spread, verdicts
from easerve.experiments.mix_control import PHASE_TABLES, RULES, mix_shift_tables
from easerve.experiments.mix_flags import (
    add_mix_flags,
    cut_z_of,
    jobs_of,
    move_mechanisms,
    oracle_lead_of,
    rate_scale_of,
    seed_of,
    seeds_of,
    settle_z_of,
    shifts_of,
    study_of,
    trace_load_of,
)
from easerve.experiments.mix_seeds import seeds_tables
from easerve.experiments.paper import MODALITIES
from easerve.experiments.plan_tables import throughput_ceiling
from easerve.experiments.replan_study import replan_shift
from easerve.experiments.setup import load_setup
from easerve.experiments.shape_control import controller_shapes
from easerve.experiments.shift_control import rate_shift_study
from easerve.experiments.shifts import SHIFTS, Shift, at_rate_scale
from easerve.experiments.trace_shift import TRACE_PLANNING, TRACE_RATE
from easerve_core.controller import ControllerSettings
from runtime.parallel import BackendSettings, open_backend


def main(argv: list[str] | None = None) -> int:
    """``python -m easerve.experiments.controller_eval``: ``easerve controller-eval`` by its old name."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.set_defaults(error_prefix="controller_eval")
    return run(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's flags (``easerve controller-eval`` and :func:`main` share them)."""
    parser.add_argument("--quick", action="store_true", help="the quick run's sizes")
    parser.add_argument("--ceiling", action="store_true",
                        help="only the throughput ceiling: HAS's grid at 4 req/s (docs/controller.md)")
    parser.add_argument("--sweep-streams", action="store_true",
                        help="search each band on the goodput sweep's HAS streams (the run's "
                             "requests per trial), not on streams one segment long")
    parser.add_argument("--frugal", action="store_true",
                        help="also the GPU-frugal planner's oracle and controller (each band on the "
                             "fewest GPUs that serve it)")
    parser.add_argument("--replan", metavar="STEP_HZ", nargs="?", type=float, const=0.5,
                        help="also the controller that plans bands every STEP_HZ req/s with the "
                             "simulator in the loop (default 0.5; a what-if)")
    parser.add_argument("--shapes", metavar="MODELS", nargs="?", const="image,audio,video",
                        help="the four traffic shapes instead, on these paper models "
                             "(default image,audio,video; docs/controller.md)")
    parser.add_argument("--mix-shifts", metavar="NAMES", nargs="?", const=",".join([*SHIFTS, TRACE_RATE]),
                        help="the shifts where the best deployment moves instead (default "
                             f"{','.join([*SHIFTS, TRACE_RATE])}; {TRACE_RATE}: the synthetic stream)")
    parser.add_argument("--shift", metavar="FILE", type=Path,
                        help="one shift from a TOML file (easerve/experiments/shifts.py says its form)")
    parser.add_argument("--trace", metavar="FILE", type=Path,
                        help="a trace-rate shift from this public trace's arrivals, scaled to the "
                             "cluster (easerve.experiments.trace_shift; with --trace-format)")
    parser.add_argument("--trace-format",
                        help="azure, burstgpt or mooncake (default burstgpt)")
    parser.add_argument("--no-cross-check", action="store_true",
                        help="mix shifts: the controllers run HAS's per-phase picks as they are")
    parser.add_argument("--out", metavar="DIR", type=Path,
                        help="mix shifts: also write their tables as CSV into DIR "
                             "(controller_mix_shifts*.csv, as the full reproduce does)")
    add_mix_flags(parser)
    parser.add_argument("--forecaster",
                        help="the predictive system's forecaster (none, ewma, holt; default holt)")


def run(args: argparse.Namespace) -> int:
    """Run what ``args`` asks; bad input: one line on stderr (``args.error_prefix: error: ...``), exit 2.
    A flag the chosen study does not read is bad input (:func:`~easerve.experiments.mix_flags.study_of`)."""
    try:
        study = study_of(args)
    except ValueError as exc:
        print(f"{args.error_prefix}: error: {exc}", file=sys.stderr)
        return 2
    if study == "mix shifts":
        return _mix_shifts(QUICK if args.quick else FULL, args)
    if args.replan is not None and not args.replan > 0:
        print(f"{args.error_prefix}: error: --replan: STEP_HZ must be > 0, got {args.replan:g}",
              file=sys.stderr)
        return 2
    plan = QUICK if args.quick else FULL
    if args.shapes is not None:
        return _shapes(plan, args.shapes.split(","), args.error_prefix)
    image = load_setup("image", anchored=True)
    if args.ceiling:
        ceiling = throughput_ceiling(image, need_rps=2.77, rate_hz=4.0)
        print(f"{len(ceiling)} deployments; the best ten:")
        print(ceiling.head(10).round(3).to_string(index=False))
        return 0
    study = rate_shift_study(image, mean_rate_hz=plan.nominal_rate_hz, timeline_s=plan.scale.timeline_s,
                             trials=plan.has_trials, num_samples=plan.has_samples, shape=SHIFT_SHAPE,
                             frugal=args.frugal,
                             search_requests=plan.has_requests if args.sweep_streams else None)
    for band in study.has_table.bands:
        print(f"HAS band {band.rate_hz:g} req/s: {band.deployment.label()}")
    with pd.option_context("display.width", 250):
        pivot = study.scores.pivot(index=["deployment", "told_hz"], columns="rate_hz", values="score")
        print(pivot.round(3).to_string())
    for band in study.table.bands:
        print(f"band {band.rate_hz:g} req/s: {band.deployment.label()} told {band.deployment.rate_hint_hz}")
    if study.frugal_table is not None and study.frugal_counts is not None:
        print(study.frugal_counts.round(3).to_string(index=False))
        for band in study.frugal_table.bands:
            print(f"frugal band {band.rate_hz:g} req/s: {band.deployment.label()} told "
                  f"{band.deployment.rate_hint_hz} ({band.deployment.num_gpus} GPUs)")
    out = study.frames
    if args.replan is not None:
        whatifs = [replan_shift(image, mean_rate_hz=plan.nominal_rate_hz, timeline_s=plan.scale.timeline_s,
                                trials=plan.has_trials, num_samples=plan.has_samples, shape=SHIFT_SHAPE,
                                step_hz=args.replan, cross_check=check) for check in (False, True)]
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            print(pd.concat([w["planned"] for w in whatifs]).round(3).to_string(index=False))
        out = {key: pd.concat([out[key], *(w[key] for w in whatifs if not w[key].empty)], ignore_index=True)
               for key in ("systems", "phases", "decisions")}
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(out["systems"].drop(columns=["start"]).round(3).to_string(index=False))
        print(out["phases"].pivot(index="system", columns="segment", values="attainment")
              .reindex(out["systems"]["system"]).round(3).to_string())
        print(_decisions(out["decisions"]))
    return 0


def _shapes(plan: EvalSize, modalities: list[str], error_prefix: str) -> int:
    unknown = sorted(set(modalities) - set(MODALITIES))
    if unknown:
        print(f"{error_prefix}: error: --shapes: unknown model(s) {', '.join(unknown)}; "
              f"known: {', '.join(MODALITIES)}", file=sys.stderr)
        return 2
    setups = {m: load_setup(m, anchored=True) for m in modalities}
    out = controller_shapes(setups, timeline_s=plan.scale.timeline_s, trials=plan.has_trials,
                            num_samples=plan.has_samples)
    cols = ["modality", "mean_rate_hz", "shape", "system", "attainment_high", "attainment_low",
            "attainment", "goodput_rps", "ttft_p99_s", "tpot_p99_s", "gpu_s_per_request",
            "busy_gpu_s_per_request", "decisions", "gpus_moved"]
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_rows", 200):
        chosen = out["plan_tables"][out["plan_tables"]["chosen"].astype(bool)]
        print(chosen[["modality", "rate_hz", "deployment", "told_hz", "score"]].round(3)
              .to_string(index=False))
        print(out["systems"][cols].round(3).to_string(index=False))
        print(_decisions(out["decisions"]))
    return 0


def _mix_shifts(plan: EvalSize, args: argparse.Namespace) -> int:
    """The shifts where the best deployment moves; bad input: one line, exit 2, nothing run."""
    forecaster = "holt" if args.forecaster is None else args.forecaster
    try:
        ControllerSettings(forecaster=forecaster)
        moves = move_mechanisms(args.drain_deadline, args.concurrent_steps, args.serve_first, args.linger,
                                args.interim_share, args.standby)
        phase_tables = PHASE_TABLES if args.phase_tables is None else args.phase_tables
        trace_planning = TRACE_PLANNING if args.trace_planning is None else args.trace_planning
        rules = replace(RULES, settle_z=settle_z_of(args.settle_z), cut_z=cut_z_of(args.cut_z))
        oracle_lead_s = oracle_lead_of(args.oracle_lead)
        shifts = shifts_of(args.mix_shifts, args.shift, args.trace, args.trace_format,
                           trace_load_of(args.trace_load))
        seed = seed_of(args.seed)
        jobs = jobs_of(args.jobs)
        seeds = seeds_of(args.seeds)
        if seeds is not None and args.seed is not None:
            raise ValueError("--seeds: not with --seed (name every seed in --seeds)")
        scale = rate_scale_of(args.rate_scale)
        if scale != 1.0:
            shifts = [at_rate_scale(shift, scale) for shift in shifts]
        if args.out is not None:
            check_study_folder(args.out)
    except (ValueError, OSError) as exc:
        print(f"{args.error_prefix}: error: {exc}", file=sys.stderr)
        return 2
    settings = {"trials": plan.has_trials, "num_samples": plan.has_samples, "forecaster": forecaster,
                "cross_check": not args.no_cross_check, "moves": moves, "phase_tables": phase_tables,
                "rules": rules, "oracle_lead_s": oracle_lead_s, "trace_planning": trace_planning}
    rows = []
    with open_backend(BackendSettings(name="local", num_jobs=jobs)) as pool:
        runs = ([mix_shift_tables(shifts, backend=pool, seed=seed, **settings)] if seeds is None
                else seeds_tables(shifts, seeds, backend=pool, **settings))  # (seed, shift) tasks
    for run_seed, (frames, studies) in zip(seeds or (seed,), runs, strict=True):
        if seeds is not None:
            print(f"== seed {run_seed} ==")
        _print_mix_run(shifts, frames, studies)
        rows.append(verdicts(frames, seed=run_seed))
        if args.out is not None:
            write_tables(args.out if seeds is None else args.out / f"seed-{run_seed}", frames)
    bars = pd.concat(rows, ignore_index=True)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(bars.round(3).to_string(index=False))
        if seeds is not None:
            print(spread(bars).to_string(index=False))
    if seeds is not None and args.out is not None:
        write_tables(args.out, {"controller_mix_shifts_seeds": bars})
    return 0


def _print_mix_run(shifts: list[Shift], frames: dict[str, pd.DataFrame],
                   studies: list[dict[str, Any]]) -> None:
    """One seed's mix-shift run: each shift's rates and why, the plans, the systems, the phases."""
    for shift, out in zip(shifts, studies, strict=True):
        print(f"{shift.name} ({shift.model}, signal {shift.signal}): phase rates {out['rates']} req/s, "
              f"bands {[b.rate_hz for b in out['table'].bands]}, lead {out['lead_s']:.1f} s; {shift.why}")
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_rows", 200):
        print(frames["controller_mix_shifts_plans"].round(3).to_string(index=False))
        scores = frames["controller_mix_shifts_plan_table"]
        if not scores.empty:
            print(scores.pivot_table(index=["shift", "deployment", "told_hz"], columns="band", values="score")
                  .round(3).to_string())
        print(frames["controller_mix_shifts"].round(3).to_string(index=False))
        pivot = frames["controller_mix_shifts_phases"].pivot(index=["shift", "system"], columns="phase",
                                                             values="attainment")
        print(pivot.round(3).to_string())
        print(_decisions(frames["controller_mix_shifts_decisions"]))


def _decisions(frame: pd.DataFrame) -> str:
    return "no decisions" if frame.empty else frame.round(2).to_string(index=False)


if __name__ == "__main__":
    sys.exit(main())
