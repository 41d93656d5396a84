"""``easerve capacity CONFIG.toml --out DIR``: the highest arrival rate a deployment sustains.

Simulates the config's deployment (after ``--preset``) at one arrival rate
after another, chosen by bisection (easerve_core.rate_search): it starts at
the config's rate, doubles or halves it until one run sustains the SLO and
another fails, then bisects until the two are within ``--tolerance`` of
each other. A run sustains the SLO (easerve_core.slo.sustains) when its P99
TTFT and P99 TPOT are within the limits, or, with ``[slo] attainment``,
when at least that fraction of its requests meet both limits. The SLO is
the config's ``[slo]`` (a tier, or absolute ``ttft_s`` / ``tpot_s``);
``--tier`` replaces the tier. A run whose queue is still growing at the
end of its stream (:mod:`easerve_core.stability`) does not sustain the SLO
either, however its percentiles read. Every run draws the config's workload
with the config's seed at its rate, as many requests as the trial-length
rule asks at that rate (:mod:`easerve_core.trial_length`: at least
``--trial-s`` seconds of arrivals and the SLO's growth horizon; at least
the config's ``num_requests``), so the answer is deterministic.

One stream's answer can be far from another's where a P99 sits near its
limit over a range of rates, so ``--seeds N`` runs the whole search on N
streams: the config's seed, then seeds derived from it
(:func:`stream_seed`). Each stream's search is its own; the answer is the
lowest of their capacities (the worst stream's), and every stream's is
reported beside it.

Writes into DIR: ``capacity.csv`` (one row per run, by stream and rate:
goodput, attainment, throughput, P99 TTFT and TPOT, sustained, the step and
phase that ran it, the stream's seed), ``capacity.json`` (the answer, each
stream's, the SLO and the search settings), ``config.json`` (the resolved
config) and ``capacity.png``; prints the curve and the answer.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from calibration.session import Overrides, Session
from easerve.cli.common import add_config, add_force, add_out, command_parser, open_session
from easerve.cli.outputs import RunFolder
from easerve.experiments.sweep import HorizonLength, StreamLength
from easerve.resources import load_config
from easerve_core import checks, limits
from easerve_core.config import ExperimentConfig, model_label
from easerve_core.presets import PRESETS
from easerve_core.rate_search import Capacity, RateBisection
from easerve_core.slo import SLO, TIER_NAMES, sustains
from easerve_core.stability import assess
from easerve_core.trial_length import DEFAULT_TRIAL_S, TrialLength
from sim.plots import capacity_plot

#: the search's highest rate is this multiple of the start rate unless --max-rate is given
DEFAULT_MAX_RATE_FACTOR = 64.0
#: columns of capacity.csv (and of the printed curve)
CURVE_COLUMNS = ("rate_hz", "sustained", "unstable", "goodput_rps", "attainment", "throughput_rps",
                 "ttft_p99_s", "tpot_p99_s", "num_ok", "num_requests", "step", "phase", "seed")
#: the most streams ``--seeds`` runs (each is a whole search)
MAX_SEEDS = 100


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "capacity",
                       help="the highest arrival rate a deployment sustains within its SLO (bisection)",
                       doc=__doc__, func=run)
    add_config(p, "experiment TOML (see configs/)")
    add_out(p, "folder to write the curve and the answer into")
    p.add_argument("--preset", default=None, help=f"baseline preset: {', '.join(sorted(PRESETS))}")
    p.add_argument("--tier", default=None, help=f"SLO tier instead of [slo] tier: {', '.join(TIER_NAMES)}")
    p.add_argument("--start-rate", type=float, default=None,
                   help="first rate tried, req/s (default: the config's workload rate)")
    p.add_argument("--max-rate", type=float, default=None,
                   help=f"highest rate tried, req/s (default {DEFAULT_MAX_RATE_FACTOR:g} x the start rate)")
    p.add_argument("--tolerance", type=float, default=0.02,
                   help="stop when the sustained and the failing rate are within this fraction "
                        "(default 0.02)")
    p.add_argument("--max-steps", type=int, default=30, help="at most this many runs (default 30)")
    p.add_argument("--trial-s", type=float, default=DEFAULT_TRIAL_S,
                   help=f"seconds of arrivals each run covers at least (default {DEFAULT_TRIAL_S:g}; "
                        "longer where the SLO's growth horizon asks)")
    p.add_argument("--seeds", type=int, default=1,
                   help="run the search on this many streams (the config's seed, then derived ones) and "
                        "answer with the worst stream's capacity (default 1)")
    p.add_argument("--no-plots", action="store_true", help="skip capacity.png")
    add_force(p)


def _search(args: argparse.Namespace, config: ExperimentConfig) -> RateBisection:
    start = config.workload.mean_rate_hz if args.start_rate is None else args.start_rate
    TrialLength(trial_s=args.trial_s)  # a bad --trial-s fails before any run
    settings = {"start_hz": start, "max_rate_hz": args.max_rate if args.max_rate is not None
                else DEFAULT_MAX_RATE_FACTOR * start, "rel_tol_frac": args.tolerance,
                "max_steps": args.max_steps}
    flags = {"start_hz": "start-rate", "max_rate_hz": "max-rate", "rel_tol_frac": "tolerance",
             "max_steps": "max-steps"}
    try:
        return RateBisection(**settings)
    except ValueError as exc:
        message = str(exc)
        for name, flag in flags.items():
            message = message.replace(name, f"--{flag}")
        raise ValueError(message) from None


def stream_seed(seed: int, k: int) -> int:
    """The seed of the ``k``-th stream of ``--seeds``: the config's own first, then derived."""
    if k == 0:
        return seed
    return int(np.random.SeedSequence([seed, 0xCA9, k]).generate_state(1)[0])


def run(args: argparse.Namespace) -> int:
    if args.tier is not None:
        checks.one_of("--tier", args.tier, TIER_NAMES)
    num_seeds = limits.at_most("--seeds", checks.integer("--seeds", args.seeds, minimum=1), MAX_SEEDS,
                               "each stream is a whole search")
    config = load_config(args.config, runs_deployment=True)
    if num_seeds > 1 and config.workload.trace is not None:
        raise ValueError(f"--seeds {num_seeds}: the workload is a trace, one stream; drop the flag")
    length = TrialLength(trial_s=args.trial_s, min_requests=config.workload.num_requests)
    settings = _search(args, config)  # bad search flags fail before any run; each stream gets its own
    base = open_session(config, Overrides(preset=args.preset, tier=args.tier))
    slo = base.plan.slo
    if slo is None:
        raise ValueError("capacity needs an SLO: give the model a latency profile or set "
                         "[slo] ttft_s and tpot_s")
    folder = RunFolder(args.out, force=args.force)  # checked before the runs, written whole after them
    stream = HorizonLength(length=length, ttft_limit_s=slo.ttft_s)
    rows: list[dict[str, Any]] = []
    streams: list[tuple[int, Capacity]] = []
    for k in range(num_seeds):
        seed = stream_seed(config.seed, k)
        search = _search(args, config)
        seeded = replace(config, seed=seed)
        curve_rows = []
        while (probe := search.next_probe()) is not None:
            row = _run_at(seeded, base, probe.rate_hz, slo, length=stream)
            search.observe(probe.rate_hz, bool(row["sustained"]))
            curve_rows.append({**row, "step": probe.step, "phase": str(probe.phase), "seed": seed})
        rows += sorted(curve_rows, key=lambda r: r["rate_hz"])
        streams.append((seed, search.result()))
    answer = min((c for _, c in streams), key=lambda c: c.capacity_hz)  # the worst stream's
    curve = pd.DataFrame(rows, columns=list(CURVE_COLUMNS))
    plan = base.plan
    title = f"{model_label(plan.model)} {plan.preset} {plan.deployment.label()}, SLO {_slo_words(slo)}"
    with folder as staging:
        curve.to_csv(staging / "capacity.csv", index=False)
        doc = _answer_doc(answer, slo, settings, plan.preset, streams)
        (staging / "capacity.json").write_text(json.dumps(doc, indent=2) + "\n")
        (staging / "config.json").write_text(json.dumps(plan.config, indent=2, default=str) + "\n")
        if not args.no_plots:
            capacity_plot(curve, staging / "capacity.png", capacity_hz=answer.capacity_hz,
                          attainment_target=slo.attainment, title=title)
    print(curve.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(_answer_line(answer, slo, plan.preset, args.out, streams))
    return 0


def _run_at(config: ExperimentConfig, base: Session, rate_hz: float, slo: SLO, *,
            length: StreamLength) -> dict[str, Any]:
    """One simulation at ``rate_hz``, judged by ``slo``: a row of the curve."""
    if config.workload.trace is None:  # a trace keeps its own requests
        n = length.requests_at(rate_hz)
        config = replace(config, workload=replace(config.workload, num_requests=n))
    result = base.recompose(config=config, rate_hz=rate_hz, slo=slo).sim().run()
    s = result.summary(slo)
    unstable = assess(result.records, slo).unstable
    return {"rate_hz": rate_hz, "sustained": sustains(result.records, slo) and not unstable,
            "unstable": unstable, "goodput_rps": s.goodput_rps,
            "attainment": s.attainment, "throughput_rps": s.throughput_rps, "ttft_p99_s": s.ttft_p99_s,
            "tpot_p99_s": s.tpot_p99_s, "num_ok": s.num_ok, "num_requests": s.num_requests}


def _slo_words(slo: SLO) -> str:
    rule = f"attainment >= {slo.attainment:g}" if slo.attainment is not None else "P99"
    return f"{slo.tier} (TTFT {slo.ttft_s:.4g} s, TPOT {slo.tpot_s * 1e3:.4g} ms, {rule})"


def _answer_doc(answer: Capacity, slo: SLO, search: RateBisection, preset: str,
                streams: list[tuple[int, Capacity]]) -> dict[str, Any]:
    return {
        "capacity_rps": answer.capacity_hz, "failed_rps": answer.failed_hz, "outcome": str(answer.outcome),
        "num_runs": sum(c.num_steps for _, c in streams), "preset": preset,
        "streams": [{"seed": seed, "capacity_rps": c.capacity_hz, "failed_rps": c.failed_hz,
                     "outcome": str(c.outcome), "num_runs": c.num_steps} for seed, c in streams],
        "slo": {"tier": slo.tier, "ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s, "attainment": slo.attainment,
                "rule": "attainment" if slo.attainment is not None else "p99"},
        "search": {"start_rate_hz": search.start_hz, "max_rate_hz": search.max_rate_hz,
                   "min_rate_hz": search.min_rate_hz, "growth": search.growth,
                   "rel_tol_frac": search.rel_tol_frac, "max_steps": search.max_steps},
    }


def _answer_line(answer: Capacity, slo: SLO, preset: str, out: Path,
                 streams: list[tuple[int, Capacity]]) -> str:
    what = {"found": f"sustains {answer.capacity_hz:.4g} req/s (fails at {answer.failed_hz or 0:.4g})",
            "censored": f"sustains at least {answer.capacity_hz:.4g} req/s (the --max-rate)",
            "none": f"sustains none of the rates tried (down to {answer.failed_hz or 0:.4g} req/s)",
            "steps": f"sustains {answer.capacity_hz:.4g} req/s; --max-steps ran out before the bracket "
                     "closed"}[str(answer.outcome)]
    runs = sum(c.num_steps for _, c in streams)
    if len(streams) == 1:
        return (f"{preset}: {what} within SLO {_slo_words(slo)}, {runs} runs on one stream "
                f"(--seeds N: on several) -> {out}")
    worst = next(seed for seed, c in streams if c is answer)
    each = ", ".join(f"{c.capacity_hz:.4g}" for _, c in streams)
    return (f"{preset}: on the worst of {len(streams)} streams (seed {worst}) {what}; per stream {each} "
            f"req/s; within SLO {_slo_words(slo)}, {runs} runs -> {out}")
