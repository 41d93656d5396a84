"""``easerve reproduce``: the paper's evaluation in the simulator, as CSV, PNG and Markdown.

:func:`reproduce` runs every study of :mod:`easerve.experiments.studies` on
the paper-anchored analytic profiles of 8x RTX 6000 Ada (docs/results
explains the anchor), writes each study's table as CSV and figure as PNG,
and :mod:`easerve.experiments.report` writes ``report.md`` beside them.
``quick`` shrinks every study (fewer requests, rates, trials and seeds;
:func:`cuts` lists them, and the quick report repeats the list) to finish in
about a minute and a half on two cores; the committed report is the full run.

The headline goodput sweep runs two readings (docs/has.md §8): ``tuned``,
where every baseline gets its own best deployment per rate under
EAServe's HAS budget (:func:`~easerve.experiments.choose.choose_baseline`),
and ``config``, where the baselines run the example config's static
allocation at every rate, as the paper's do. EAServe is HAS-tuned in both
and swept once (its rows read ``tuned``).

Every study's simulations, and HAS's choices and convergence studies, are
independent tasks on one backend (:mod:`easerve_core.parallel`): by default
this process for the full run and two local workers for ``quick``, or more
workers, or Ray. The tables do not depend on it (docs/scaling.md).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from easerve.experiments import figures, report, shift_control, studies
from easerve.experiments.choose import (
    BASELINES,
    Choice,
    choose,
    choose_baseline,
    convergence,
    planned_rate,
)
from easerve.experiments.paper import MODALITIES
from easerve.experiments.setup import Setup, load_setup, with_item_scale, with_mix
from easerve_core import Deployment, checks
from easerve_core.controller import Band, PlanTable
from easerve_core.has.space import GRID_BATCHES
from easerve_core.parallel import IN_PROCESS, Backend, BackendSettings, open_backend, run_tasks
from easerve_core.slo import SLO_TIERS
from easerve_core.workload import mixes


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """How big the evaluation is."""

    scale: studies.Scale
    has_trials: int
    has_requests: int
    convergence_seeds: tuple[int, ...]
    has_samples: int = 1
    nominal_rate_hz: float = 2.0
    ablation_rate_hz: float = 10.0
    ablation_remote_fraction: float = 0.55
    #: B values of the HAS-convergence study's exhaustive grid baseline
    grid_batches: tuple[int, ...] = GRID_BATCHES
    #: the headline's tuned sweep again without the residual encoder-call cost
    residual_variant: bool = True
    #: what-if: other video mixes than the headline's (our documented 5-20 s 720p clips) ...
    clip_mixes: tuple[str, ...] = ("qwen-video",)
    #: ... each at these multiples of its LM tokens
    clip_scales: tuple[float, ...] = (1.0, 0.5, 0.25)


#: the quick run's convergence study: one seed, and a grid of every other B (2, 8, 32: half the
#: grid's points; at the quick settings its best is within 0.03% of the full grid's for all three
#: models, measured 2026-12-01; docs/scaling.md)
QUICK = Plan(scale=studies.QUICK, has_trials=12, has_requests=150, convergence_seeds=(0,),
             grid_batches=(2, 8, 32), clip_scales=(1.0,), residual_variant=False)
FULL = Plan(scale=studies.FULL, has_trials=30, has_requests=500, convergence_seeds=(0, 1, 2, 3, 4),
            has_samples=2)


class _Log:
    def __init__(self, quiet: bool) -> None:
        self.quiet, self.start = quiet, time.perf_counter()

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            print(f"[{time.perf_counter() - self.start:6.1f} s] {msg}", file=sys.stderr, flush=True)


#: the headline's readings of the baselines: equally tuned per rate, or the example config's
TUNINGS = ("tuned", "config")


class _Chooser:
    """HAS per (modality, system, rate), cached: EAServe's deployment at every swept rate, and
    each baseline's under the same budget (:func:`~easerve.experiments.choose.choose_baseline`).

    :meth:`prepare` makes a sweep round's missing choices at once, one study
    per task on the backend; :meth:`table` lists the choices modality by
    modality (the setups' order), each in the order its (system, rate) was
    first asked for, which is the order a sweep asks in.
    """

    def __init__(self, setups: dict[str, Setup], plan: Plan, backend: Backend = IN_PROCESS) -> None:
        self.setups, self.plan, self.backend = setups, plan, backend
        self.cache: dict[tuple[str, str, float], Choice] = {}

    def _task(self, modality: str, system: str, rate_hz: float) -> Callable[[], Choice]:
        budget: dict[str, Any] = {"rate_hz": rate_hz, "trials": self.plan.has_trials,
                                  "num_requests": self.plan.has_requests,
                                  "num_samples": self.plan.has_samples}
        if system == "easerve":
            return partial(choose, self.setups[modality], **budget)
        return partial(choose_baseline, self.setups[modality], system, **budget)

    def prepare(self, keys: Sequence[tuple[str, str, float]]) -> None:
        """Make every missing choice of ``keys`` (modality, system, rate), one task per rate
        planned for: rates that step down the ladder to the same planned rate
        (:func:`~easerve.experiments.choose.planned_rate`, a screen) share one study."""
        missing = list(dict.fromkeys(k for k in keys if k not in self.cache))
        planned = {key: self._planned(*key) for key in missing}
        studies_ = list(dict.fromkeys(planned.values()))
        done = dict(zip(studies_, run_tasks(self.backend, [self._task(*k) for k in studies_]),
                        strict=True))
        for (m, system, rate), key in planned.items():
            self.cache[(m, system, rate)] = replace(done[key], requested_rate_hz=rate)

    def _planned(self, modality: str, system: str, rate_hz: float) -> tuple[str, str, float]:
        rate = planned_rate(self.setups[modality], rate_hz, system=system)
        return (modality, system, rate)

    def __call__(self, modality: str, rate_hz: float, system: str = "easerve") -> Choice:
        key = (modality, system, rate_hz)
        if key not in self.cache:
            self.prepare([key])
        return self.cache[key]

    def deployment_for(self, tuning: str = "tuned") -> Callable[[str, str, float], Deployment]:
        """Each system's deployment per rate: EAServe's HAS choice; a baseline's own choice
        (``tuned``) or the example config's static allocation at every rate (``config``)."""
        checks.one_of("tuning", tuning, TUNINGS)
        nominal = self.plan.nominal_rate_hz

        def pick(modality: str, system: str, rate_hz: float) -> Deployment:
            if system == "easerve" or tuning == "tuned":
                return self(modality, rate_hz, system).deployment
            return self.setups[modality].deployment.with_(rate_hint_hz=nominal)

        return pick

    def table(self, systems: Sequence[str] = ("easerve",)) -> pd.DataFrame:
        """The choices of ``systems`` (EAServe's by default), one row each."""
        order = list(self.setups)
        picked = [c for (_m, system, _r), c in self.cache.items() if system in systems]
        ranked = sorted(picked, key=lambda c: order.index(c.modality))  # stable
        frame = pd.DataFrame([{
            "modality": c.modality, "system": c.system, "requested_rate_hz": c.requested_rate_hz,
            "planned_rate_hz": c.planned_rate_hz, "candidates": c.num_candidates,
            "survivors": c.num_survivors, "evaluated": c.trials["key"].nunique(),
            "exhaustive": c.exhaustive, "best_goodput_rps": c.best_goodput_rps,
            "deployment": c.deployment.label(), "encode_tp": c.deployment.encode.tp,
            "max_encode_batch": c.deployment.max_encode_batch,
            "batch_timeout_s": c.deployment.batch_timeout_s,
            "remote_fraction": c.deployment.remote_fraction,
        } for c in ranked])
        if tuple(systems) == ("easerve",):  # EAServe's own table, as before baselines were tuned
            frame = frame.drop(columns=["system", "evaluated", "exhaustive", "batch_timeout_s"],
                               errors="ignore")
        return frame


def headline_sweep(setups: dict[str, Setup], chooser: _Chooser, scale: studies.Scale, *,
                   systems: Sequence[str] = studies.SYSTEMS,
                   backend: Backend = IN_PROCESS) -> pd.DataFrame:
    """The goodput sweep in both readings, one ``tuning`` column telling them apart.

    ``tuned``: every system at its own choice per rate (the baselines' made
    in parallel with EAServe's, through ``chooser.prepare``); ``config``: the
    baselines of ``systems`` at the example config's allocation. EAServe is
    HAS-tuned in both readings, so it is swept once, under ``tuned``.
    """
    tuned = studies.goodput_sweep(setups, chooser.deployment_for("tuned"), scale, systems=systems,
                                  backend=backend, prepare=chooser.prepare)
    frames = [tuned.assign(tuning="tuned")]
    baselines = [s for s in systems if s != "easerve"]
    if baselines:
        config = studies.goodput_sweep(setups, chooser.deployment_for("config"), scale,
                                       systems=baselines, backend=backend)
        frames.append(config.assign(tuning="config"))
    sweep = pd.concat(frames, ignore_index=True)
    cols = list(tuned.columns)
    return sweep[[*cols[:cols.index("system") + 1], "tuning", *cols[cols.index("system") + 1:]]]


#: the peak table's keys for a :func:`headline_sweep`
PEAK_KEYS = ("modality", "system", "tuning")
#: the SLOs of :func:`peaks_by_slo`: the five tiers, strictest first, and the absolute one
PEAK_SLOS = (*SLO_TIERS, "absolute")


def peaks_by_slo(sweep: pd.DataFrame) -> pd.DataFrame:
    """Each curve's peak goodput under each of :data:`PEAK_SLOS` (one ``slo`` column), over the
    rates the sweep ran (chosen, extended and refined by the moderate tier's curve)."""
    return pd.concat([studies.peak_goodput(sweep, tier, keys=PEAK_KEYS).assign(slo=tier)
                      for tier in PEAK_SLOS], ignore_index=True)


#: the systems of the clip-length what-if (fixed-batch EPD adds nothing to the question)
CLIP_SYSTEMS = ("dynamo", "vllm", "easerve")


def clip_length_whatif(video: Setup, headline_peak: pd.DataFrame, plan: Plan,
                       backend: Backend = IN_PROCESS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Peak goodput per system for other video clips than the headline's, and the sweep.

    The clips: each mix of ``plan.clip_mixes`` at each of ``plan.clip_scales``
    times its tokens (labelled ``"<mix> x<scale>"``). Each workload gets its
    own SLOs and its own HAS choice per rate, swept exactly as the headline
    with every baseline equally tuned (the ``tuned`` reading alone); the
    headline's own rows (labelled with its mix's name) are copied from its
    table.
    """
    setups = {f"{name} x{k:g}": with_item_scale(with_mix(video, mixes.mix(name), name), k)
              for name in plan.clip_mixes for k in plan.clip_scales}
    chooser = _Chooser(setups, plan, backend)
    sweep = studies.goodput_sweep(setups, chooser.deployment_for(), plan.scale, systems=CLIP_SYSTEMS,
                                  backend=backend, prepare=chooser.prepare)
    peak = studies.peak_goodput(sweep).rename(columns={"modality": "mix"})
    headline = video.workload.mix_name
    head = headline_peak[(headline_peak["modality"] == "video") & (headline_peak["tuning"] == "tuned")
                         & headline_peak["system"].isin(CLIP_SYSTEMS)].assign(mix=headline)
    frame = pd.concat([peak, head.drop(columns=["modality", "tuning"])], ignore_index=True)
    setups[headline] = video
    frame["mean_item_tokens"] = [_mean_item_tokens(setups[k].mix) for k in frame["mix"]]
    frame["moderate_ttft_slo_s"] = [setups[k].slos["moderate"].ttft_s for k in frame["mix"]]
    cols = ["mix", "mean_item_tokens", "moderate_ttft_slo_s", "system", "goodput_rps", "at_rate_hz"]
    return (frame[cols].sort_values(["mean_item_tokens", "system"], ignore_index=True),
            sweep.rename(columns={"modality": "label"}))


def _mean_item_tokens(mix: Any) -> float:
    weights = mix.item_weights or (1.0,) * len(mix.item_tokens)
    return sum(t * w for t, w in zip(mix.item_tokens, weights, strict=True)) / sum(weights)


#: ``quick``'s default workers on the local backend (``make run`` on a 2-core machine), at most the cores
QUICK_JOBS = 2


def resolve_backend(settings: BackendSettings | None, *, quick: bool) -> BackendSettings:
    """``settings`` with its jobs filled in: unset on ``local``, :data:`QUICK_JOBS` (capped at
    the cores) for ``quick`` and 1 (this process, the serial path) for the full run."""
    settings = settings or BackendSettings()
    if settings.name != "local" or settings.num_jobs is not None:
        return settings
    return replace(settings, num_jobs=min(QUICK_JOBS, os.cpu_count() or 1) if quick else 1)


def cuts(plan: Plan, full: Plan = FULL) -> list[str]:
    """What ``plan`` runs smaller than ``full``, one line each (the quick report lists them)."""
    a, b = plan.scale, full.scale
    pairs = [
        ("requests per simulation", a.num_requests, b.num_requests),
        ("arrival rates swept", len(a.rates_hz), len(b.rates_hz)),
        ("refinement levels around each peak", a.refine_levels, b.refine_levels),
        ("seeds per point", a.num_seeds, b.num_seeds),
        ("rate-shift timeline (s)", a.timeline_s, b.timeline_s),
        ("HAS trials per choice (EAServe's and each tuned baseline's)", plan.has_trials,
         full.has_trials),
        ("requests per HAS trial", plan.has_requests, full.has_requests),
        ("request streams per HAS trial", plan.has_samples, full.has_samples),
        ("HAS-convergence seeds (TPE and random)", len(plan.convergence_seeds), len(full.convergence_seeds)),
        ("B values of the convergence study's grid baseline", len(plan.grid_batches),
         len(full.grid_batches)),
        ("clip lengths in the video what-if", len(plan.clip_scales), len(full.clip_scales)),
        ("headline sweeps without the residual encoder-call cost", int(plan.residual_variant),
         int(full.residual_variant)),
    ]
    return [f"{what}: {ours:g} (full run: {theirs:g})" for what, ours, theirs in pairs if ours != theirs]


def reproduce(out: Path, *, quick: bool = False, quiet: bool = False,
              backend: BackendSettings | None = None, residual: bool = True) -> Path:
    """Run the evaluation into ``out`` on ``backend`` (:func:`resolve_backend`); return the report's path.

    ``residual=False`` runs it without the residual per-call encoder cost (measured host
    preprocessing only; easerve.experiments.setup.paper_anchored_efficiency).
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
    path = report.write_report(out, tables, meta)
    log(f"report: {path}")
    return path


def _studies(out: Path, setups: dict[str, Setup], plan: Plan, backend: Backend,
             log: _Log) -> dict[str, pd.DataFrame]:
    """Every study's tables (and figures into ``out``), each study's tasks on ``backend``."""
    chooser = _Chooser(setups, plan, backend)
    tables: dict[str, pd.DataFrame] = {}

    log("goodput vs arrival rate (HAS per rate for EAServe and each tuned baseline; config baselines)")
    sweep = headline_sweep(setups, chooser, plan.scale, backend=backend)
    tables["goodput_sweep"] = sweep
    tables["peak_goodput"] = studies.peak_goodput(sweep, keys=PEAK_KEYS)
    tables["peak_goodput_by_slo"] = peaks_by_slo(sweep)
    figures.goodput_curves(sweep, out / "goodput_curves.png")

    if plan.residual_variant and setups["image"].efficiency.encode_call_residual_s > 0:
        log("same, tuned, without the residual encoder-call cost (measured host preprocessing only)")
        bare = {m: load_setup(m, anchored=True, residual=False) for m in MODALITIES}
        bare_chooser = _Chooser(bare, plan, backend)
        bare_sweep = studies.goodput_sweep(bare, bare_chooser.deployment_for("tuned"), plan.scale,
                                           backend=backend, prepare=bare_chooser.prepare)
        tables["peak_goodput_no_residual"] = studies.peak_goodput(bare_sweep.assign(tuning="tuned"),
                                                                  keys=PEAK_KEYS)

    log("same, vLLM-like with a free in-step encoder (sensitivity)")
    free = {m: load_setup(m, efficiency=setups[m].efficiency, free_in_step_encoder=True)
            for m in MODALITIES}
    tables["vllm_free_encoder"] = studies.peak_goodput(headline_sweep(
        free, _Chooser(free, plan, backend), plan.scale, systems=("vllm",), backend=backend),
        keys=PEAK_KEYS)

    log("what-if: video clip length")
    tables["video_clip_length"], tables["video_clip_length_sweep"] = clip_length_whatif(
        setups["video"], tables["peak_goodput"], plan, backend)
    figures.clip_length_plot(tables["video_clip_length"], out / "video_clip_length.png")

    image = setups["image"]
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

    log("online controller on the rate shift (LLaVA-34B)")
    tables.update(_controller_shift(image, chooser, plan, backend, out))

    log("SM-sharing ablation (audio)")
    # the paper's ablation fixes s = 0.55 on one deployment; ours is the example config's
    tables["sm_ablation"] = studies.sm_ablation(
        setups["audio"], setups["audio"].deployment, rate_hz=plan.ablation_rate_hz,
        num_requests=plan.scale.num_requests * 4, remote_fraction=plan.ablation_remote_fraction,
        num_seeds=plan.scale.num_seeds, backend=backend)

    log("encoder utilisation traces")
    util = studies.encoder_utilization(image, image.deployment, rate_hz=nominal,
                                       num_requests=plan.scale.num_requests * 2, bin_s=5.0,
                                       easerve=dep_image, backend=backend)
    tables["encoder_utilization"] = util
    figures.utilization_traces(util, out / "encoder_utilization.png")

    log("HAS convergence: TPE vs random vs grid")
    tables.update(_convergence(setups, chooser, plan, backend, out))
    tables["has_choices"] = chooser.table()
    tables["baseline_choices"] = chooser.table(BASELINES)
    return tables


def _controller_shift(image: Setup, chooser: _Chooser, plan: Plan, backend: Backend,
                      out: Path) -> dict[str, pd.DataFrame]:
    """The rate-shift study run by static, oracle and controller (docs/controller.md): the plan
    table is HAS at each segment's rate and the mean, the choices the goodput sweep made."""
    nominal, segment_s = plan.nominal_rate_hz, plan.scale.timeline_s / 4
    rates = sorted({nominal * f for f in SHIFT_SHAPE} | {nominal})
    table = PlanTable(tuple(Band(rate_hz=r, deployment=chooser("image", r).deployment) for r in rates))
    shift = shift_control.controller_shift(image, table, mean_rate_hz=nominal,
                                           num_requests=int(nominal * plan.scale.timeline_s),
                                           segment_s=segment_s, bin_s=segment_s / 6, shape=SHIFT_SHAPE,
                                           backend=backend)
    figures.controller_shift_plot(shift["bins"], shift["decisions"], out / "controller_shift.png")
    return {"controller_shift": shift["systems"], "controller_shift_phases": shift["phases"],
            "controller_shift_decisions": shift["decisions"]}


#: the rate-shift studies' multiples of the mean rate, one segment each (1 and 3 req/s at 2)
SHIFT_SHAPE = (0.5, 1.5, 0.5, 1.5)


def _convergence(setups: dict[str, Setup], chooser: _Chooser, plan: Plan, backend: Backend,
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
