"""``easerve reproduce``: the paper's evaluation in the simulator, as CSV, PNG and Markdown.

:func:`reproduce` runs every study of :mod:`easerve.experiments.studies` on
the paper-anchored analytic profiles of 8x RTX 6000 Ada (docs/results
explains the anchor), writes each study's table as CSV and figure as PNG,
and :mod:`easerve.experiments.report` writes ``report.md`` beside them.
``quick`` shrinks every study (fewer requests, rates, trials and seeds;
:func:`~easerve.experiments.eval_size.cuts` lists them, and the quick report repeats the list) to finish in
about a minute and a half on two cores; the committed report is the full run.

The headline goodput sweep runs two readings (docs/has.md §8): ``tuned``,
where every baseline gets its own best deployment per rate under
EAServe's HAS budget (:func:`~easerve.experiments.choose.choose_baseline`),
and ``config``, where the baselines run the example config's static
allocation at every rate, as the paper's do. EAServe is HAS-tuned in both
and swept once (its rows read ``tuned``).

Every study's simulations, and HAS's choices and convergence studies, are
independent tasks on one backend (:mod:`runtime.parallel`): by default
this process for the full run and two local workers for ``quick``, or more
workers, or Ray. The tables do not depend on it (docs/scaling.md).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pandas as pd

from easerve.experiments import figures, mix_control, report, shape_control, shift_control, studies
from easerve.experiments.choose import BASELINES, convergence
from easerve.experiments.eval_size import FULL, QUICK, SHIFT_SHAPE, EvalSize, cuts
from easerve.experiments.has_regret import REGRET_COLUMNS, regret_study
from easerve.experiments.headline import PEAK_KEYS, Chooser, clip_length_whatif, headline_sweep, peaks_by_slo
from easerve.experiments.measured_setup import have_database
from easerve.experiments.measured_study import measured_headline, measured_plan
from easerve.experiments.paper import MODALITIES
from easerve.experiments.setup import Setup, load_setup
from easerve.experiments.shifts import SHIFTS
from easerve.experiments.sweep import goodput_sweep, peak_goodput
from runtime.parallel import Backend, BackendSettings, open_backend


class _Log:
    def __init__(self, quiet: bool) -> None:
        self.quiet, self.start = quiet, time.perf_counter()

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            print(f"[{time.perf_counter() - self.start:6.1f} s] {msg}", file=sys.stderr, flush=True)


#: ``quick``'s default workers on the local backend (``make run`` on a 2-core machine), at most the cores
QUICK_JOBS = 2


def resolve_backend(settings: BackendSettings | None, *, quick: bool) -> BackendSettings:
    """``settings`` with its jobs filled in: unset on ``local``, :data:`QUICK_JOBS` (capped at
    the cores) for ``quick`` and 1 (this process, the serial path) for the full run."""
    settings = settings or BackendSettings()
    if settings.name != "local" or settings.num_jobs is not None:
        return settings
    return replace(settings, num_jobs=min(QUICK_JOBS, os.cpu_count() or 1) if quick else 1)


def reproduce(out: Path, *, quick: bool = False, quiet: bool = False,
              backend: BackendSettings | None = None, residual: bool = True) -> Path:
    """Run the evaluation into ``out`` on ``backend`` (:func:`resolve_backend`); return the report's path.

    ``residual=False`` runs it without the residual per-call encoder cost (measured host
    preprocessing only; easerve.experiments.anchor.paper_anchored_efficiency).
    """
    plan = QUICK if quick else FULL
    settings = resolve_backend(backend, quick=quick)
    log = _Log(quiet)
    setups = {m: load_setup(m, anchored=True, residual=residual) for m in MODALITIES}
    eff = setups["image"].efficiency
    log(f"backend: {settings.describe()}")
    with open_backend(settings) as pool:
        out.mkdir(parents=True, exist_ok=True)  # once the backend is up: a refused one writes nothing
        tables = _studies(out, setups, plan, pool, log)
    for name, frame in tables.items():
        frame.to_csv(out / f"{name}.csv", index=False)
    meta: dict[str, Any] = {"quick": quick, "plan": asdict(plan),
                            # LLaVA's per-call cost beyond its kernels: measured host part + residual
                            "encode_call_overhead_s": eff.encode_call_residual_s
                            + eff.host_preprocess_s_per_item,
                            "encode_call_residual_s": eff.encode_call_residual_s,
                            "slos": {m: {t: asdict(s) for t, s in st.slos.items()}
                                     for m, st in setups.items()},
                            "backend": settings.describe(), "cuts": cuts(plan) if quick else [],
                            "wall_s": time.perf_counter() - log.start}
    (out / "meta.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    # no "report: PATH" line here: ``out`` may be a staging folder renamed after we return
    # (easerve reproduce prints the final path)
    return report.write_report(out, tables, meta)


def _studies(out: Path, setups: dict[str, Setup], plan: EvalSize, backend: Backend,
             log: _Log) -> dict[str, pd.DataFrame]:
    """Every study's tables (and figures into ``out``), each study's tasks on ``backend``."""
    chooser = Chooser(setups, plan, backend)
    tables = _goodput_studies(out, setups, chooser, plan, backend, log)
    tables.update(_image_studies(out, setups["image"], chooser, plan, backend, log))

    log("online controller on the rate shift (LLaVA-34B)")
    tables.update(_controller_shift(setups["image"], plan, backend, out))

    log(f"online controller on four traffic shapes ({', '.join(plan.shape_models)})")
    tables.update(_controller_shapes(setups, plan, backend, out))

    if plan.mix_shifts:
        log("online controller on the shifts where the optimum moves (mix shifts)")
        shifts = [*SHIFTS.values(), mix_control.synthetic_trace_shift()]
        tables.update(mix_control.mix_shift_tables(shifts, trials=plan.has_trials,
                                                   num_samples=plan.has_samples, backend=backend)[0])

    log("SM-sharing ablation (audio)")
    # the paper's ablation fixes s = 0.55 on one deployment; ours is the example config's
    tables["sm_ablation"] = studies.sm_ablation(
        setups["audio"], setups["audio"].deployment, rate_hz=plan.ablation_rate_hz,
        num_requests=plan.scale.num_requests * 4, remote_fraction=plan.ablation_remote_fraction,
        num_seeds=plan.scale.num_seeds, backend=backend)

    log("HAS convergence: TPE vs random vs grid")
    tables.update(_convergence(setups, chooser, plan, backend, out))
    tables["has_choices"] = chooser.table()
    tables["baseline_choices"] = chooser.table(BASELINES)
    if plan.measured_headline and have_database():
        log("headline on 8 x H100 and 8 x H200, measured (vLLM) and roofline profiles")
        tables["headline_measured"] = measured_headline(measured_plan(plan), backend=backend, log=log)
    elif plan.measured_headline:
        log("headline on measured hardware skipped: it needs easerve[measured] (aiconfigurator-core)")
    if plan.has_regret:
        log("HAS regret: its pick against a 5x longer search, both judged on 4x streams (12 scenarios)")
        tables["has_regret"] = pd.DataFrame(regret_study(log=log), columns=list(REGRET_COLUMNS))
    return tables


def _goodput_studies(out: Path, setups: dict[str, Setup], chooser: Chooser, plan: EvalSize,
                     backend: Backend, log: _Log) -> dict[str, pd.DataFrame]:
    """The headline sweep, its peaks under each SLO, without the residual, with a free
    in-step encoder, and the video clip-length what-if."""
    tables: dict[str, pd.DataFrame] = {}
    log("goodput vs arrival rate (HAS per rate for EAServe and each tuned baseline; config baselines)")
    sweep = headline_sweep(setups, chooser, plan.scale, backend=backend)
    tables["goodput_sweep"] = sweep
    tables["peak_goodput"] = peak_goodput(sweep, keys=PEAK_KEYS)
    tables["peak_goodput_by_slo"] = peaks_by_slo(sweep)
    figures.goodput_curves(sweep, out / "goodput_curves.png")

    if plan.residual_variant and setups["image"].efficiency.encode_call_residual_s > 0:
        log("same, tuned, without the residual encoder-call cost (measured host preprocessing only)")
        bare = {m: load_setup(m, anchored=True, residual=False) for m in MODALITIES}
        bare_chooser = Chooser(bare, plan, backend)
        bare_sweep = goodput_sweep(bare, bare_chooser.deployment_for("tuned"), plan.scale,
                                           backend=backend, prepare=bare_chooser.prepare)
        tables["peak_goodput_no_residual"] = peak_goodput(bare_sweep.assign(tuning="tuned"),
                                                                  keys=PEAK_KEYS)

    log("same, vLLM-like with a free in-step encoder (sensitivity)")
    free = {m: load_setup(m, efficiency=setups[m].efficiency, free_in_step_encoder=True)
            for m in MODALITIES}
    free_chooser = Chooser(free, plan, backend) if plan.free_encoder_own_choices else chooser
    tables["vllm_free_encoder"] = peak_goodput(headline_sweep(
        free, free_chooser, plan.scale, systems=("vllm",), backend=backend), keys=PEAK_KEYS)

    log("what-if: video clip length")
    tables["video_clip_length"], tables["video_clip_length_sweep"] = clip_length_whatif(
        setups["video"], tables["peak_goodput"], plan, backend)
    figures.clip_length_plot(tables["video_clip_length"], out / "video_clip_length.png")
    return tables


def _image_studies(out: Path, image: Setup, chooser: Chooser, plan: EvalSize, backend: Backend,
                   log: _Log) -> dict[str, pd.DataFrame]:
    """LLaVA-34B at the nominal rate: fixed batch, burstiness, rate shifts, encoder utilisation."""
    tables: dict[str, pd.DataFrame] = {}
    nominal = plan.nominal_rate_hz
    log("fixed-batch trade-off (LLaVA-34B)")
    dep_image = chooser("image", nominal).deployment
    tables["fixed_batch"] = studies.fixed_batch_tradeoff(
        image, image.deployment, rate_hz=nominal, num_requests=plan.scale.num_requests * 2, backend=backend)

    log("burstiness")
    tables["burstiness"] = studies.burstiness(
        image, dep_image, rate_hz=nominal, num_requests=plan.scale.num_requests * 2,
        num_seeds=plan.scale.num_seeds, backend=backend)
    figures.burst_plot(tables["burstiness"], out / "burstiness.png")

    log("rate shifts")
    segment_s = plan.scale.timeline_s / 4
    segs, bins = studies.rate_shift(image, dep_image, mean_rate_hz=nominal,
                                    num_requests=int(nominal * plan.scale.timeline_s),
                                    segment_s=segment_s, bin_s=segment_s / 6)
    tables["rate_shift"], tables["rate_shift_bins"] = segs, bins
    figures.rate_shift_plot(bins, out / "rate_shift.png")

    log("encoder utilisation traces")
    util = studies.encoder_utilization(image, image.deployment, rate_hz=nominal,
                                       num_requests=plan.scale.num_requests * 2, bin_s=5.0,
                                       easerve=dep_image, backend=backend)
    tables["encoder_utilization"] = util
    figures.utilization_traces(util, out / "encoder_utilization.png")
    return tables


def _controller_shift(image: Setup, plan: EvalSize, backend: Backend, out: Path) -> dict[str, pd.DataFrame]:
    """The rate-shift study run by static, oracle and controller (docs/controller.md;
    :func:`~easerve.experiments.shift_control.rate_shift_study` under the run's HAS budget; the
    cross-check's scores: ``controller_plan_table``)."""
    study = shift_control.rate_shift_study(image, mean_rate_hz=plan.nominal_rate_hz,
                                           timeline_s=plan.scale.timeline_s, trials=plan.has_trials,
                                           num_samples=plan.has_samples, shape=SHIFT_SHAPE,
                                           frugal=plan.controller_frugal, backend=backend)
    shift = study.frames
    figures.controller_shift_plot(shift["bins"], shift["decisions"], out / "controller_shift.png")
    tables = {"controller_shift": shift["systems"], "controller_shift_phases": shift["phases"],
              "controller_shift_decisions": shift["decisions"], "controller_plan_table": study.scores}
    if study.frugal_counts is not None and study.frugal_scores is not None:
        tables.update(controller_frugal_counts=study.frugal_counts,
                      controller_frugal_plan_table=study.frugal_scores)
    return tables


def _controller_shapes(setups: dict[str, Setup], plan: EvalSize, backend: Backend,
                       out: Path) -> dict[str, pd.DataFrame]:
    """The controller against static and oracle on step, spike, diurnal and drift traffic
    (docs/controller.md, "Evaluation: four traffic shapes"), each model's plan table searched as
    the rate shift's."""
    shapes = shape_control.controller_shapes({m: setups[m] for m in plan.shape_models},
                                             timeline_s=plan.scale.timeline_s, trials=plan.has_trials,
                                             num_samples=plan.has_samples, backend=backend)
    figures.controller_shapes_plot(shapes["bins"], out / "controller_shapes.png")
    return {"controller_shapes": shapes["systems"], "controller_shapes_phases": shapes["phases"],
            "controller_shapes_decisions": shapes["decisions"],
            "controller_shapes_plan_tables": shapes["plan_tables"]}


def _convergence(setups: dict[str, Setup], chooser: Chooser, plan: EvalSize, backend: Backend,
                 out: Path) -> dict[str, pd.DataFrame]:
    conv_frames, grid_best = [], {}
    for modality, setup in setups.items():
        rate = chooser(modality, plan.nominal_rate_hz).planned_rate_hz
        frame, best = convergence(setup, rate_hz=rate, trials=plan.has_trials,
                                  seeds=plan.convergence_seeds, num_requests=plan.has_requests,
                                  num_samples=plan.has_samples, backend=backend,
                                  grid_batches=plan.grid_batches)
        conv_frames.append(frame.assign(rate_hz=rate))
        grid_best[modality] = best
    tables = {"has_convergence": pd.concat(conv_frames, ignore_index=True),
              "has_grid_best": pd.DataFrame([{"modality": m, "grid_best_goodput_rps": v}
                                             for m, v in grid_best.items()])}
    figures.convergence_plot(tables["has_convergence"], out / "has_convergence.png", grid_best=grid_best)
    return tables
