"""``easerve search``: Hybrid Auto Selection from a config file, on the simulator.

Screens the config's cluster at the target rate, then runs an Optuna study
per sampler (``--sampler``, or tpe, random and grid with ``--compare``) in an
Optuna storage (default ``OUT/study.db``; rerunning the same command resumes
it), as ``--workers`` jobs: processes on this machine, or Ray tasks with
``--backend ray`` (docs/scaling.md). Writes into ``--out``:
``trials.parquet`` and ``trials.csv`` (every trial of every sampler run),
``best.toml`` (the config with the pick, ready for ``easerve
sim``/``easerve live``), ``recheck.csv`` (the top ``--recheck-top`` re-run on
streams four times a trial's, over ``--recheck-seeds`` new seeds: the pick
is the best there), ``convergence.png`` (best goodput vs trial) and
``search.json`` (screen, per-sampler summary, and the pick's goodput with
its 95% interval over the seeds). Trials are sized in time (``--trial-s``,
:mod:`easerve_core.trial_length`) and climb from short streams to full ones
(:mod:`easerve_core.has.ladder`). See docs/has.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from tqdm import tqdm

from calibration.session import Overrides, Session
from easerve.cli import confirm_step
from easerve.cli.common import add_backend, add_config, add_out, backend_settings, given, open_session
from easerve.cli.outputs import check_study_folder
from easerve.cli.search_outputs import dump_toml, write_outputs
from easerve.recipes import ENGINES
from easerve.resources import load_config
from easerve_core import checks, limits
from easerve_core.config import ExperimentConfig
from easerve_core.has import Ladder, ScreenReport, SearchSpace, ranked, recheck, screen, trials_frame
from easerve_core.slo import TIER_NAMES
from easerve_core.trial_length import (
    DEFAULT_MAX_REQUESTS,
    DEFAULT_MIN_REQUESTS,
    DEFAULT_TRIAL_LENGTH,
    DEFAULT_TRIAL_S,
    TrialLength,
)
from runtime.has import SAMPLERS, SearchSettings, normalize_url, open_storage, run_search
from runtime.parallel import Backend, LocalPool, open_backend
from sim.evaluate import SimEvaluator, make_evaluator


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("search", help="HAS: screen and search deployments on the simulator",
                              description=__doc__.split("\n\n")[0])
    add_config(p, "experiment TOML (model, cluster, workload, deployment knobs)")
    p.add_argument("--rate", type=float, required=True, help="target arrival rate, req/s")
    p.add_argument("--tier", default="moderate", help=f"SLO tier: {', '.join(TIER_NAMES)} "
                   "(the config's absolute [slo] limits win)")
    p.add_argument("--trials", type=int, default=30, help="trials per sampler (not for grid)")
    p.add_argument("--sampler", default=None,
                   help=f"{' | '.join(SAMPLERS)} (default tpe; not with --compare)")
    p.add_argument("--compare", action="store_true", help="run tpe, random and grid")
    p.add_argument("--storage", help="Optuna storage URL or path (default OUT/study.db)")
    p.add_argument("--workers", type=int, default=1,
                   help="jobs: processes on this machine, or Ray tasks with --backend ray")
    add_backend(p, jobs=False)
    p.add_argument("--join", action="store_true",
                   help="add workers to a study another machine runs (shared --storage)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--top", type=int, default=5, help="print the K best distinct deployments")
    p.add_argument("--trial-s", type=float, default=DEFAULT_TRIAL_S,
                   help=f"seconds of arrivals a trial's full stream covers at least (default "
                        f"{DEFAULT_TRIAL_S:g}; longer where the SLO's growth horizon asks: docs/has.md)")
    p.add_argument("--min-requests", type=int, default=DEFAULT_MIN_REQUESTS,
                   help=f"requests a trial's full stream holds at least (default {DEFAULT_MIN_REQUESTS})")
    p.add_argument("--num-requests", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--recheck-top", type=int, default=Ladder().recheck_top,
                   help=f"re-run the K best on streams {Ladder().recheck_factor:g}x a trial's before the "
                        f"pick (default {Ladder().recheck_top}; 0: pick from the trials)")
    p.add_argument("--recheck-seeds", type=int, default=None,
                   help=f"new streams per rechecked deployment (default {Ladder().recheck_seeds})")
    p.add_argument("--recheck-jobs", type=int, default=None,
                   help=f"processes for the recheck's long runs (default: the --workers, at least "
                        f"{DEFAULT_RECHECK_JOBS} where the machine has the cores; forked local processes, "
                        "or the Ray tasks of --backend ray)")
    p.add_argument("--emit", default=None, metavar="ENGINE",
                   help=f"also write the pick as a serving engine's recipe into OUT/recipe-ENGINE/: "
                        f"{', '.join(sorted(ENGINES))} (docs/recipes.md)")
    add_out(p, "output folder")
    confirm_step.add_arguments(p)
    p.set_defaults(func=run)


#: the recheck's processes unless told otherwise (at most the machine's cores)
DEFAULT_RECHECK_JOBS = 2


def recheck_jobs(args: argparse.Namespace) -> int:
    """``--recheck-jobs``, or the --workers, at least two where the machine has the cores."""
    if args.recheck_jobs is not None:
        return checks.integer("recheck-jobs", args.recheck_jobs, minimum=1)
    return max(args.workers, min(DEFAULT_RECHECK_JOBS, os.cpu_count() or 1))


def recheck_seeds(args: argparse.Namespace) -> int:
    """``--recheck-seeds``, or the ladder's default."""
    return Ladder().recheck_seeds if args.recheck_seeds is None else args.recheck_seeds


def _validate(args: argparse.Namespace) -> list[str]:
    """The samplers to run; bad input (or a flag nothing would read) is a ``ValueError`` naming it."""
    limits.rate("rate", args.rate)
    checks.one_of("tier", args.tier, TIER_NAMES)
    checks.integer("trials", args.trials, minimum=1)
    if args.compare and args.sampler is not None:
        raise ValueError("--sampler: not with --compare, which runs tpe, random and grid")
    checks.one_of("sampler", ("tpe" if args.sampler is None else args.sampler), SAMPLERS)
    confirm_step.refuse_strays(args)
    if args.recheck_top == 0:
        for flag, yes in given(args, ("--recheck-seeds", "--recheck-jobs")).items():
            if yes:
                raise ValueError(f"{flag}: --recheck-top 0 runs no recheck to read it")
    checks.integer("workers", args.workers, minimum=1)
    checks.integer("seed", args.seed, minimum=0)
    checks.integer("top", args.top, minimum=1)
    if args.num_requests is not None:
        raise ValueError("--num-requests: trials are sized in time now; give --trial-s SECONDS (seconds "
                         "of arrivals per trial; docs/has.md)")
    trial_length(args)
    ladder(args, "tpe")
    recheck_jobs(args)
    if args.emit is not None:
        checks.one_of("--emit", args.emit, sorted(ENGINES))
    samplers = list(SAMPLERS) if args.compare else [("tpe" if args.sampler is None else args.sampler)]
    if args.join and "grid" in samplers:
        raise ValueError("--join: the grid is enqueued by one process; join tpe or random studies")
    return samplers


def _study_name(config: ExperimentConfig, args: argparse.Namespace, sampler: str) -> str:
    """Same command -> same name (so a rerun resumes); another input -> another study."""
    ident = json.dumps([config.to_dict(), args.rate, args.tier, args.trial_s, args.min_requests, sampler,
                        args.seed, args.trials if sampler != "grid" else 0, ladder(args, sampler).rungs],
                       sort_keys=True, default=str)
    digest = hashlib.sha1(ident.encode()).hexdigest()[:10]
    stem = config.source.stem if config.source else config.model
    return f"{stem}-{args.tier}-r{args.rate:g}-{sampler}-seed{args.seed}-{digest}"


def trial_length(args: argparse.Namespace) -> TrialLength:
    """The length rule of ``--trial-s`` (one line naming the flag when it is bad)."""
    return TrialLength(trial_s=args.trial_s, min_requests=args.min_requests,
                       max_requests=max(args.min_requests, DEFAULT_MAX_REQUESTS)
                       if isinstance(args.min_requests, int) else DEFAULT_MAX_REQUESTS)


def ladder(args: argparse.Namespace, sampler: str) -> Ladder:
    """The ladder a sampler's trials climb: the grid, exhaustive, runs every point on the full stream."""
    rungs = (1.0,) if sampler == "grid" else Ladder().rungs
    return Ladder(rungs=rungs, recheck_top=args.recheck_top, recheck_seeds=recheck_seeds(args))


def _print_screen(report: ScreenReport) -> None:
    print(f"screen: {len(report.candidates)} allocations fit in memory, "
          f"{len(report.survivors)} carry {report.rate_hz:g} req/s", file=sys.stderr)
    for c in report.candidates:
        cap = c.capacity
        mark = "keep" if c in report.survivors else "drop"
        net = "" if math.isinf(cap.network_rps) else f"  network {cap.network_rps:6.2f}"
        print(f"  {mark} {c.allocation.label:<16} encode {cap.encode_rps:8.2f}  prefill "
              f"{cap.prefill_rps:6.2f}  decode {cap.decode_rps:6.2f}{net} req/s", file=sys.stderr)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSetup:
    """What a search needs: the config, the screen, the space and the evaluator."""

    config: ExperimentConfig
    report: ScreenReport
    space: SearchSpace
    evaluator: SimEvaluator
    session: Session


def plan_search(config_path: str | Path, *, rate_hz: float, tier: str, num_requests: int | None = None,
                length: TrialLength = DEFAULT_TRIAL_LENGTH, num_samples: int = 1) -> SearchSetup:
    """Load the config, screen its cluster at ``rate_hz`` and build the sim evaluator.

    A trial's stream holds ``num_requests`` requests if given, else as many
    as ``length`` asks at the rate and the SLO (:mod:`easerve_core.trial_length`).

    The search space's base is the config's EAServe deployment (a
    ``[deployment] preset`` other than ``easerve`` does not apply: HAS
    searches EAServe's knobs), its batcher's rate hint at the target rate.
    """
    config = load_config(config_path)
    session = open_session(config, Overrides(preset="easerve", rate_hz=rate_hz, tier=tier))
    plan, profile = session.plan, session.sim_profile()
    # a live-capable config's plan holds the items its live model gets ([live] mm_token_scale)
    assert plan.slo is not None and plan.workload is not None
    report = screen(profile, plan.cluster, plan.workload.mix, rate_hz=rate_hz, slo=plan.slo)
    space = SearchSpace(allocations=report.survivor_allocations, base=plan.deployment)
    evaluator = make_evaluator(plan, profile, num_requests=num_requests, length=length,
                               options=session.sim_options(), num_samples=num_samples)
    return SearchSetup(config=config, report=report, space=space, evaluator=evaluator, session=session)


class _Bar:
    """A tqdm bar on stderr, opened once the study's planned size is known."""

    def __init__(self, desc: str) -> None:
        self.desc = desc
        self.bar: tqdm[Any] | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = tqdm(total=total, initial=done, desc=self.desc, unit="trial", file=sys.stderr)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run(args: argparse.Namespace) -> int:
    samplers = _validate(args)
    backend = backend_settings(args, num_jobs=args.workers)
    plan = plan_search(args.config, rate_hz=args.rate, tier=args.tier, length=trial_length(args))
    if (args.recheck_seeds or 1) > 1 and plan.evaluator.distinct_long_streams == 1:
        raise ValueError(f"--recheck-seeds {args.recheck_seeds}: the workload is a trace, one stream, which "
                         "the recheck replays once; drop the flag")
    out = Path(args.out)
    check_study_folder(out)  # the study's home: a rerun resumes the study kept there
    confirm_step.check(args, plan.session, out)  # before the search: a confirmation it cannot run
    if args.storage:
        open_storage(args.storage)  # fail on an unreachable URL before any work
    storage = args.storage or str(out / "study.db")
    if backend.address is not None and normalize_url(storage).startswith("sqlite"):
        raise ValueError("--backend ray --address: every node opens the study, so its storage must be "
                         "shared: a database server (--storage postgresql+psycopg://...) or a journal "
                         "on a shared path (--storage journal:/shared/has.journal), not an SQLite file")
    out.mkdir(parents=True, exist_ok=True)
    _print_screen(plan.report)
    _print_length(plan)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    frames, walls, rechecked = [], {}, []
    # local jobs keep the search's own path (this process, or a pool of --workers processes)
    with open_backend(backend) if backend.name == "ray" else nullcontext(None) as pool:
        for sampler in samplers:
            steps = ladder(args, sampler)
            settings = SearchSettings(sampler=sampler, num_trials=args.trials, seed=args.seed,
                                      storage=storage,
                                      study_name=_study_name(plan.config, args, sampler),
                                      num_workers=args.workers, join=args.join, ladder=steps)
            start = time.perf_counter()
            bar = _Bar(sampler)
            try:
                study = run_search(plan.space, plan.evaluator, settings, progress=bar, backend=pool)
            finally:
                bar.close()
            frame = trials_frame(study)
            with _recheck_pool(args, pool) as runs_on:
                rechecked += recheck(study, plan.evaluator, steps, trials=frame, backend=runs_on)
            walls[sampler] = time.perf_counter() - start
            frames.append(frame)
    rechecked = ranked(rechecked)  # --compare: each sampler's recheck, merged
    write_outputs(out, plan.config, args, plan.report, frames, walls, rechecked)
    if args.confirm:
        return confirm_step.run(args, plan.config, plan.session, pd.concat(frames, ignore_index=True), out)
    return 0


def _recheck_pool(args: argparse.Namespace,
                  ray_pool: Backend | None) -> AbstractContextManager[Backend | None]:
    """Where the recheck's long runs go: the Ray pool, forked local processes, or this process."""
    if ray_pool is not None:
        return nullcontext(ray_pool)
    jobs = recheck_jobs(args)
    return LocalPool(jobs, start_method="fork") if jobs > 1 else nullcontext(None)


def _print_length(plan: SearchSetup) -> None:
    ev = plan.evaluator
    n = len(ev.plan.requests)
    span = ev.plan.requests[-1].arrival_s - ev.plan.requests[0].arrival_s
    print(f"trials: {n} requests ({span:.0f} s of arrivals) on the full rung", file=sys.stderr)


__all__ = ["SearchSetup", "dump_toml", "plan_search", "register", "run"]
