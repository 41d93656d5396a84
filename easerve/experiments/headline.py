"""The headline of ``easerve reproduce``: every system tuned per rate, in two readings.

:class:`Chooser` makes HAS's choices per (modality, system, rate): EAServe's
(:func:`~easerve.experiments.choose.choose`) and each baseline's under the
same budget (:func:`~easerve.experiments.choose.choose_baseline`, docs/has.md
§8), one study per task on the backend. :func:`headline_sweep` runs the
goodput sweep in both readings of the baselines (``tuned``, ``config``);
:func:`peaks_by_slo` reads its peaks under every SLO; :func:`clip_length_whatif`
is the video clip-length what-if on the same machinery.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

import pandas as pd

from easerve.experiments.choose import Choice, choose, choose_baseline, planned_rate
from easerve.experiments.setup import Setup, with_item_scale, with_mix
from easerve.experiments.sweep import SYSTEMS, Scale, goodput_sweep, peak_goodput
from easerve_core import Deployment, checks
from easerve_core.slo import SLO_TIERS
from easerve_core.workload import mixes
from runtime.parallel import IN_PROCESS, Backend, run_tasks

if TYPE_CHECKING:
    from easerve.experiments.eval_size import EvalSize


#: the headline's readings of the baselines: equally tuned per rate, or the example config's
TUNINGS = ("tuned", "config")


class Chooser:
    """HAS per (modality, system, rate), cached: EAServe's deployment at every swept rate, and
    each baseline's under the same budget (:func:`~easerve.experiments.choose.choose_baseline`).

    :meth:`prepare` makes a sweep round's missing choices at once, one study
    per task on the backend; :meth:`table` lists the choices modality by
    modality (the setups' order), each in the order its (system, rate) was
    first asked for, which is the order a sweep asks in.
    """

    def __init__(self, setups: dict[str, Setup], plan: EvalSize, backend: Backend = IN_PROCESS) -> None:
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


def headline_sweep(setups: dict[str, Setup], chooser: Chooser, scale: Scale, *,
                   systems: Sequence[str] = SYSTEMS,
                   backend: Backend = IN_PROCESS) -> pd.DataFrame:
    """The goodput sweep in both readings, one ``tuning`` column telling them apart.

    ``tuned``: every system at its own choice per rate (the baselines' made
    in parallel with EAServe's, through ``chooser.prepare``); ``config``: the
    baselines of ``systems`` at the example config's allocation. EAServe is
    HAS-tuned in both readings, so it is swept once, under ``tuned``.
    """
    tuned = goodput_sweep(setups, chooser.deployment_for("tuned"), scale, systems=systems,
                                  backend=backend, prepare=chooser.prepare)
    frames = [tuned.assign(tuning="tuned")]
    baselines = [s for s in systems if s != "easerve"]
    if baselines:
        config = goodput_sweep(setups, chooser.deployment_for("config"), scale,
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
    return pd.concat([peak_goodput(sweep, tier, keys=PEAK_KEYS).assign(slo=tier)
                      for tier in PEAK_SLOS], ignore_index=True)


#: the systems of the clip-length what-if (fixed-batch EPD adds nothing to the question)
CLIP_SYSTEMS = ("dynamo", "vllm", "easerve")


def clip_length_whatif(video: Setup, headline_peak: pd.DataFrame, plan: EvalSize,
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
    chooser = Chooser(setups, plan, backend)
    sweep = goodput_sweep(setups, chooser.deployment_for(), plan.scale, systems=CLIP_SYSTEMS,
                                  backend=backend, prepare=chooser.prepare)
    peak = peak_goodput(sweep).rename(columns={"modality": "mix"})
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
