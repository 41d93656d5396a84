"""What every experiment starts from: a modality's model, profile, cluster, mix and SLOs.

:func:`load_setup` reads a modality's example config (``configs/*.toml``),
builds the analytic profile of its model on its GPU (optionally with
changed :class:`calibration.Efficiency` factors, for what-if studies), the
cluster, and the absolute SLO of every tier. :func:`run` simulates one
deployment (after a baseline preset) at one arrival rate. The paper-anchored
efficiency (``anchored=True``) is :mod:`easerve.experiments.anchor`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from calibration import Efficiency, analytic_profile, sm_share_table
from calibration.session import Overrides, Session, compose
from easerve.experiments.anchor import paper_anchored_efficiency, typical_items
from easerve.experiments.paper import MODALITIES
from easerve.resources import config_path
from easerve_core import SLO, Deployment
from easerve_core.config import ExperimentConfig
from easerve_core.plan import RunPlan, replan
from easerve_core.reference import slo_for
from easerve_core.slo import SLO_TIERS
from easerve_core.workload import (
    GammaArrivals,
    RateSchedule,
    ReplayedGaps,
    RequestMix,
    WorkloadSpec,
    generate,
)
from runtime.configs import load_experiment
from sim import SimOptions
from sim.result import SimResult


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    """One modality's model on its cluster, ready to simulate: a plan, its profile and every tier's SLO."""

    modality: str
    plan: RunPlan
    profile: Any
    slos: Mapping[str, SLO]
    efficiency: Efficiency = field(default_factory=Efficiency)
    #: the profile of the aggregated (vLLM-like) baseline: the encoder runs inside
    #: the LM engine's step, so it pays no disaggregated encode-call cost
    aggregated_profile: Any = None

    @property
    def workload(self) -> WorkloadSpec:
        """The modality's workload (its mix and arrivals; the plan's, never None here)."""
        assert self.plan.workload is not None
        return self.plan.workload

    @property
    def deployment(self) -> Deployment:
        """The example config's EAServe deployment."""
        return self.plan.deployment

    @property
    def mix(self) -> Any:
        return self.workload.mix

    def session(self, preset: str = "easerve") -> Session:
        """A session on the setup's plan with the profile ``preset`` runs on (:meth:`profile_for`)."""
        return Session(plan=self.plan, profile=self.profile_for(preset))

    def profile_for(self, preset: str) -> Any:
        """The profile a deployment under ``preset`` runs on (the aggregated engine's own)."""
        if preset == "vllm" and self.aggregated_profile is not None:
            return self.aggregated_profile
        return self.profile


def load_setup(modality: str, *, efficiency: Efficiency | None = None,
               free_in_step_encoder: bool = False, anchored: bool = False,
               residual: bool = True) -> Setup:
    """The setup of ``modality`` (``image``, ``video`` or ``audio``).

    ``anchored`` takes the paper-anchored efficiency of the modality's model
    (:func:`paper_anchored_efficiency`: its measured host preprocessing plus the
    residual per-call cost) instead of ``efficiency``. ``residual=False`` drops
    the residual (``Efficiency.encode_call_residual_s``) from whichever efficiency,
    so a result can be shown with and without the one constant nothing measured
    explains. ``free_in_step_encoder`` spares the aggregated (vLLM-like) baseline
    the residual, on the view that it belongs to a separate encode service (its
    host preprocessing stays: vLLM's API server does it); by default every
    engine's encoder call pays the same.
    """
    if modality not in MODALITIES:
        raise ValueError(f"unknown modality {modality!r}; known: {', '.join(MODALITIES)}")
    _model, _mix, config_name = MODALITIES[modality]
    cfg = load_experiment(config_path(config_name))
    if anchored and efficiency is not None:
        raise ValueError("give efficiency or anchored=True, not both")
    eff = paper_anchored_efficiency(modality=modality) if anchored else efficiency or Efficiency()
    if not residual:
        eff = replace(eff, encode_call_residual_s=0.0)
    gpu = cfg.gpu
    profile = analytic_profile(cfg.model, gpu, efficiency=eff)
    in_step = profile
    if free_in_step_encoder:
        in_step = analytic_profile(cfg.model, gpu, efficiency=replace(eff, encode_call_residual_s=0.0))
    return _assemble(modality, cfg, profile, eff, in_step)


def setup_on(modality: str, profile: Any, *, efficiency: Efficiency, gpu: str | None = None,
             aggregated_profile: Any = None) -> Setup:
    """The setup of ``modality``'s example config on ``profile`` (of its model), on ``gpu``.

    ``gpu`` (a GPU spec name) replaces the config's GPU, keeping its number of
    GPUs and its deployment (easerve.experiments.measured_setup runs the paper's
    models on other servers); ``aggregated_profile`` is the vLLM-like baseline's
    (default: ``profile``). ``efficiency`` is what the setup records.
    """
    if modality not in MODALITIES:
        raise ValueError(f"unknown modality {modality!r}; known: {', '.join(MODALITIES)}")
    cfg = load_experiment(config_path(MODALITIES[modality][2]))
    if gpu is not None:
        cfg = replace(cfg, cluster={**cfg.cluster, "gpu": gpu})
    return _assemble(modality, cfg, profile, efficiency,
                     profile if aggregated_profile is None else aggregated_profile)


def _assemble(modality: str, cfg: ExperimentConfig, profile: Any, efficiency: Efficiency,
              in_step: Any) -> Setup:
    table = sm_share_table(profile, items=typical_items(cfg.workload))
    plan = compose(cfg, Overrides(profile=profile, sm_table=table)).plan
    slos = {tier: slo_for(tier, profile, cfg.workload.mix, plan.cluster) for tier in SLO_TIERS}
    return Setup(modality=modality, plan=plan, profile=profile, slos=slos, efficiency=efficiency,
                 aggregated_profile=in_step)


def with_item_scale(setup: Setup, scale: float) -> Setup:
    """``setup`` with every multimodal item ``scale`` times as many LM tokens (a what-if).

    The SLO tiers and the SM-share table are recomputed for the new mix, by
    the same definitions (a tier is a multiple of the new typical request's
    unloaded latency), so each workload is judged against its own promise.
    """
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")
    return with_mix(setup, setup.mix.with_item_scale(scale), name=f"{setup.workload.mix_name} x{scale:g}")


def with_gaps(setup: Setup, gaps_s: tuple[float, ...], rate_hz: float) -> Setup:
    """``setup`` with its workload's arrivals a trace's ``gaps_s`` replayed at ``rate_hz``
    (:class:`ReplayedGaps`): HAS's streams and :func:`requests_for`'s keep the trace's bursts."""
    workload = replace(setup.workload, arrivals=ReplayedGaps(gaps_s=gaps_s, rate_hz=rate_hz))
    return replace(setup, plan=replace(setup.plan, workload=workload))


def with_mix(setup: Setup, mix: RequestMix, name: str = "custom", *, same_encoder: bool = False) -> Setup:
    """``setup`` with its workload drawing from ``mix`` (named ``name``); SLO tiers and
    SM-share table recomputed.

    The mix must be of the setup's modality (the model's encoder is fixed), unless
    ``same_encoder`` says the model's encoder takes both (Qwen2.5-VL's vision tower encodes
    images and video frames alike).
    """
    if mix.modality is not setup.mix.modality and not same_encoder:
        raise ValueError(f"mix is {mix.modality.value}, the setup serves {setup.mix.modality.value}")
    workload = replace(setup.workload, mix=mix, mix_name=name)
    slos = {tier: slo_for(tier, setup.profile, mix, setup.plan.cluster) for tier in SLO_TIERS}
    table = sm_share_table(setup.profile, items=typical_items(workload))
    plan = replace(setup.plan, workload=workload, sm_table=table, slo=slos[_tier(setup)])
    return replace(setup, plan=plan, slos=slos)


def _tier(setup: Setup) -> str:
    return setup.plan.slo.tier if setup.plan.slo is not None else "moderate"


@dataclass(frozen=True, slots=True, kw_only=True)
class Arrivals:
    """How requests arrive in one run: Poisson by default, Gamma with ``cv``, or a schedule."""

    cv: float = 1.0
    schedule: tuple[tuple[float, float], ...] = ()


def requests_for(setup: Setup, rate_hz: float, num_requests: int, seed: int,
                 arrivals: Arrivals = Arrivals()) -> list[Any]:
    """``num_requests`` of ``setup``'s workload at ``rate_hz``: Poisson (Gamma with ``arrivals.cv``,
    or its schedule), unless the setup replays a trace's gaps (:class:`ReplayedGaps`, and no
    ``arrivals`` told otherwise): those, at that rate."""
    spec = replace(setup.workload, num_requests=num_requests)
    if isinstance(spec.arrivals, ReplayedGaps) and arrivals == Arrivals():
        spec = spec.with_rate(rate_hz)
    elif arrivals.schedule:
        sched = RateSchedule(segments=arrivals.schedule, cv=arrivals.cv)  # type: ignore[arg-type]
        spec = replace(spec, arrivals=sched).with_rate(rate_hz)
    else:
        spec = replace(spec, arrivals=GammaArrivals(rate_hz=rate_hz, cv=arrivals.cv))
    return generate(spec, np.random.default_rng(seed))


def plan_of(setup: Setup, deployment: Deployment, *, rate_hz: float, num_requests: int, seed: int = 0,
            preset: str = "easerve", arrivals: Arrivals = Arrivals(), keep_hint: bool = False) -> RunPlan:
    """The plan of ``deployment`` under ``preset`` at ``rate_hz``: EAServe's batcher is told the
    rate (``keep_hint``: the deployment's own rate hint, when it has one, is kept)."""
    if not (keep_hint and deployment.rate_hint_hz is not None) and (
            deployment.rate_hint_hz is not None or preset == "easerve"):
        deployment = deployment.with_(rate_hint_hz=rate_hz)
    requests = requests_for(setup, rate_hz, num_requests, seed, arrivals)
    return replan(setup.plan, setup.profile, deployment=deployment, preset=preset, requests=requests,
                  seed=seed)


def run(setup: Setup, deployment: Deployment, *, rate_hz: float, num_requests: int, seed: int = 0,
        preset: str = "easerve", arrivals: Arrivals = Arrivals(),
        options: SimOptions | None = None, keep_hint: bool = False) -> SimResult:
    """Simulate ``deployment`` under ``preset`` at ``rate_hz`` (``keep_hint``: see :func:`plan_of`)."""
    plan = plan_of(setup, deployment, rate_hz=rate_hz, num_requests=num_requests, seed=seed,
                   preset=preset, arrivals=arrivals, keep_hint=keep_hint)
    return setup.session(preset).with_plan(plan).sim(options).run()


#: one absolute SLO for every model, as vLLM bench's ``--goodput ttft:10000 tpot:100`` sets one:
#: the first token within 10 s, then at least 10 tokens/s (a reader's pace), per request. Ours,
#: chosen for an interactive multimodal chat; the paper gives no absolute SLO.
ABSOLUTE_SLO = SLO(ttft_s=10.0, tpot_s=0.1, tier="absolute")


def summary_row(result: SimResult, setup: Setup, **labels: Any) -> dict[str, Any]:
    """One table row: labels, then the summary under every tier and :data:`ABSOLUTE_SLO`."""
    base = result.summary(setup.slos["moderate"]).to_dict()
    row: dict[str, Any] = {**labels}
    for key in ("num_requests", "num_ok", "num_rejected", "throughput_rps", "makespan_s",
                "ttft_mean_s", "ttft_p50_s", "ttft_p99_s", "tpot_mean_s", "tpot_p50_s", "tpot_p99_s"):
        row[key] = base[key]
    for tier, slo in (*setup.slos.items(), ("absolute", ABSOLUTE_SLO)):
        s = result.summary(slo)
        row[f"goodput_{tier}_rps"] = s.goodput_rps
        row[f"attainment_{tier}"] = s.attainment
    return row
