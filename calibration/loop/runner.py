"""Run one deployment and workload in both engines: the simulator and the live executor.

The one module of ``calibration`` that drives both engines (DESIGN.md §7:
simulate -> run the same configuration live -> compare). Both sides get the
same request stream: the workload drawn from the config's seed; the live
side scales item sizes by ``[live] mm_token_scale`` and builds inputs the
family accepts, and the simulator is given exactly the LM tokens those inputs
produce. Both are judged by one SLO, computed from the profile
(:func:`easerve_core.reference.slo_for`).

The simulator runs with the profile's host model switched on (``[sim]``
options from :meth:`HostModel.sim_base`, the link from the measured
transfers, the decode-loop overhead added to every step); a config's own
``[sim]`` table wins over those. The simulator is deterministic, so it runs
once; the live side runs ``repeats`` times (weights saved once, shared).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from calibration.fit import FittedProfile
from calibration.loop.host import HostModel, host_of, with_overheads
from calibration.registry import profile_from_doc
from easerve_core.config import ExperimentConfig
from easerve_core.deployment import Cluster, Deployment
from easerve_core.profile import ProfileDoc
from easerve_core.reference import slo_for
from easerve_core.request import Request
from easerve_core.result import RunResult
from easerve_core.slo import SLO
from easerve_core.workload import generate
from easerve_core.workload.mixes import RequestMix
from live.trial import Trial, run_trial
from sim import SimOptions, simulate

#: the cluster the CPU host stands for: one "GPU" per worker process
_CPU_GPUS = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    """What both sides of a comparison share."""

    profile: Any
    host: HostModel | None
    doc: ProfileDoc
    slo: SLO
    cluster: Cluster
    sim_options: SimOptions


def setup(config: ExperimentConfig, doc: ProfileDoc, *, host_cores: float | None = None) -> Setup:
    """The profile (with its overheads), host model, SLO, cluster and simulator options.

    ``host_cores`` replaces the profile's ``num_host_cores`` (the host's free
    cores re-measured just before the runs: other tenants come and go).
    """
    profile = profile_from_doc(doc)
    host = host_of(doc.params)
    if host is not None and host_cores is not None:
        host = host.with_effects(num_host_cores=host_cores)
    if host is not None and isinstance(profile, FittedProfile):
        profile = with_overheads(profile, host)
    link = host.cluster_overrides() if host is not None else {
        "link_latency_s": 0.0, "link_bytes_per_s": 1e12, "num_links": 1}
    cluster_data = {"gpu": str(config.cluster.get("gpu", doc.gpu)),
                    "num_gpus": int(config.cluster.get("num_gpus", _CPU_GPUS)), **link}
    cluster_data.update({k: v for k, v in config.cluster.items() if k.startswith("link") or k == "num_links"})
    cluster = Cluster(**cluster_data)
    base = host.sim_base() if host is not None else SimOptions()
    slo = slo_for(config.slo_tier, profile, scaled_mix(config), cluster)
    return Setup(profile=profile, host=host, doc=doc, slo=slo, cluster=cluster,
                 sim_options=SimOptions.from_dict(config.engine.get("sim", {}), base=base))


def scaled_mix(config: ExperimentConfig) -> RequestMix:
    """The workload's mix with item sizes scaled as the live side scales them (for the SLO)."""
    mix = config.workload.mix
    scale = float(config.engine.get("live", {}).get("mm_token_scale", 1.0))
    return replace(mix, item_tokens=tuple(max(1, round(t * scale)) for t in mix.item_tokens))


def requests_for(config: ExperimentConfig) -> tuple[list[Request], list[Request]]:
    """(live requests, the same requests with the LM tokens the live model really gets)."""
    requests = generate(config.workload, np.random.default_rng(config.seed))
    trial = Trial(config, requests=requests)
    model_config = trial.spec.config()
    sim_side = []
    for job in trial.build_jobs():
        req = job.request
        if job.mm is not None:
            counts = tuple(trial.spec.family.validate(model_config, job.mm))
            req = replace(req, mm_tokens_per_item=counts)
        sim_side.append(req)
    return list(trial.requests), sim_side


def with_deployment(config: ExperimentConfig, deployment: Deployment, *,
                    weights_dir: str | None = None) -> ExperimentConfig:
    """``config`` with another deployment (and the live weights folder, when given)."""
    engine = {k: dict(v) for k, v in config.engine.items()}
    if weights_dir is not None:
        engine["live"] = {**engine.get("live", {}), "weights_dir": weights_dir}
    return replace(config, deployment=deployment, engine=engine)


def _matching(runs: list[RunResult], requests: Sequence[Request], name: str) -> list[RunResult]:
    """``runs`` if each recorded the same request ids as ``requests``, else a ValueError."""
    want = sorted(r.request_id for r in requests)
    for i, run in enumerate(runs):
        if sorted(int(x) for x in run.records["request_id"]) != want:
            raise ValueError(f"recorded live run {i} of {name!r} holds other requests than this config's "
                             f"workload ({len(run.records)} records, {len(want)} requests)")
    return runs


def run_sim(config: ExperimentConfig, requests: Sequence[Request], s: Setup) -> RunResult:
    result = simulate(config.deployment, requests, s.profile, cluster=s.cluster, seed=config.seed,
                      options=s.sim_options, sm_share_table=s.doc.sm_share_table)
    return result


def run_live(config: ExperimentConfig, repeats: int) -> list[RunResult]:
    """``repeats`` live trials of ``config`` (its ``[live] weights_dir`` should be set)."""
    return [run_trial(config) for _ in range(repeats)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    name: str
    deployment: Deployment
    sim: RunResult
    live: list[RunResult]
    host: HostModel | None = None


def compare(config: ExperimentConfig, s: Setup, deployments: Sequence[tuple[str, Deployment]], *,
            repeats: int, weights_dir: str | None = None,
            host_cores: Callable[[str], float] | None = None,
            recorded: Mapping[str, list[RunResult]] | None = None) -> list[Comparison]:
    """Every deployment in both engines on the config's workload (see the module docstring).

    ``host_cores``, when given, gives the host's free cores for each
    deployment by name (re-measured just before its live trials, or recorded
    with them); the simulator of that deployment uses the value. ``recorded``
    gives earlier live trials per deployment name instead of new ones (the
    simulator is judged against them; each must hold the config's requests).
    """
    live_reqs, sim_reqs = requests_for(config)
    del live_reqs  # the live trial draws the same stream from the same seed
    out = []
    with tempfile.TemporaryDirectory(prefix="easerve-validate-") as tmp:
        folder = weights_dir or str(Path(tmp) / "weights")
        for name, dep in deployments:
            cfg = with_deployment(config, dep, weights_dir=folder)
            dep.check_fits(s.cluster)
            here = s if host_cores is None else setup(config, s.doc, host_cores=host_cores(name))
            live = run_live(cfg, repeats) if recorded is None else _matching(recorded[name], sim_reqs, name)
            out.append(Comparison(name=name, deployment=dep, sim=run_sim(cfg, sim_reqs, here), live=live,
                                  host=here.host))
    return out
