"""From a config to a plan: its profile, the hardware's cluster and the host model, resolved once.

Every command, study, benchmark and the calibration loop go through
:func:`plan_for`, which finds the pieces a config implies and hands them to
the core's pure resolver (:func:`easerve_core.plan.resolve`):

* the **profile** (:func:`config_profile`): ``[profile] path`` (its model and
  GPU must be the config's), else the analytic profile of a specified model
  on a specified GPU, else the committed profile of a live model on that
  device (``calibration/profiles/<gpu>/<model>-<size>--<gpu>.json``), else
  none (a tiny live model: its plan needs ``[profile] sm_share_table`` for
  dynamic sharing);
* the **host model** a measured profile carries (``params.host``): its decode
  loop overhead is added to the profile's decode steps, its effects are the
  simulator's ``[sim.host]`` base and its transfer fit is the cluster's link;
* the **base cluster** the config's ``[cluster]`` keys override
  (:func:`base_cluster`): worker processes on one host (64 paths of the
  measured link) when there is a host model, else the GPU spec's link;
* the workload's **raw item sizes** (``[workload] images``, ``videos``,
  ``audio_s``) in LM tokens by the model's processor rule
  (:func:`calibration.sizes.resolve_sizes`).

The result, :class:`Resolved`, is the plan plus what the simulator needs
besides it (the profile and its options); the live executor needs the plan
alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from calibration.analytic import Efficiency
from calibration.fit import FittedProfile
from calibration.loop.host import HostModel, host_of, with_overheads
from calibration.registry import analytic_profile, cluster_for, profile_from_doc
from calibration.sizes import resolve_sizes
from calibration.specs import gpu_names, gpu_spec, is_model
from easerve_core.cluster import Cluster
from easerve_core.config import ExperimentConfig
from easerve_core.plan import RunPlan, resolve
from easerve_core.profile import ParallelProfile, ProfileDoc, StageProfile
from easerve_core.request import Request
from easerve_core.slo import SLO
from easerve_core.sm_share import SMShareTable
from live.options import LiveOptions
from runtime.profiles import load_profile_doc
from sim.options import SimOptions, options_for

Profile = StageProfile | ParallelProfile
#: committed profiles of live models, by device: ``<gpu>/<model>-<size>--<gpu>.json``
PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
#: "GPUs" of a host whose workers are processes, when the config does not say
HOST_NUM_GPUS = 64
#: the link of worker processes on one host without a measured transfer fit
UNMEASURED_HOST_LINK = {"link_latency_s": 0.0, "link_bytes_per_s": 1e12, "num_links": 1}


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """A config's plan and what the simulator needs besides it."""

    plan: RunPlan
    profile: Profile | None
    doc: ProfileDoc | None = None
    host: HostModel | None = None

    def sim_options(self) -> SimOptions:
        """The plan's ``[sim]`` table over the host model's base (:meth:`HostModel.sim_base`)."""
        return options_for(self.plan, base=None if self.host is None else self.host.sim_base())

    def sim_profile(self) -> Profile:
        """The profile, refusing a plan that has none (a live-only model)."""
        if self.profile is None:
            raise ValueError(f"model {self.plan.model!r} on {self.plan.cluster.gpu!r} has no profile to "
                             "simulate with: set [profile] path (easerve calibrate writes one)")
        return self.profile


def committed_profile_path(model: str, size: str, gpu: str) -> Path:
    """Where a live model's committed profile on ``gpu`` would be."""
    return PROFILES_DIR / gpu / f"{model}-{size}--{gpu}.json"


def same_gpu(measured: str, named: str) -> bool:
    """Whether a profile measured on ``measured`` (torch's device name, e.g. ``NVIDIA H200``) is
    for the config's GPU ``named`` (a spec name, e.g. ``h200``)."""
    if measured == named:
        return True
    if named not in gpu_names():
        return False
    full = gpu_spec(named).full_name  # "NVIDIA H200 SXM 141GB"; torch says "NVIDIA H200"
    return full.startswith(measured) or measured.startswith(full)


def config_profile(config: ExperimentConfig, *, efficiency: Efficiency | None = None,
                   required: bool = True) -> tuple[Profile | None, ProfileDoc | None]:
    """The config's profile and its document (see the module docstring).

    With none to be found, ``required`` raises the analytic model's error
    (naming the unknown model or GPU); otherwise it gives (None, None).
    """
    gpu = str(config.cluster["gpu"])
    if config.profile_path is not None:
        doc = load_profile_doc(config.profile_path)
        if doc.model != config.model or not same_gpu(doc.gpu, gpu):
            raise ValueError(f"profile.path is for {doc.model} on {doc.gpu}, "
                             f"but the config asks for {config.model} on {gpu}")
        return profile_from_doc(doc), doc
    if is_model(config.model) and gpu in gpu_names():
        return analytic_profile(config.model, gpu, efficiency=efficiency), None
    committed = committed_profile_path(config.model, config.model_size, gpu)
    if committed.is_file():
        doc = load_profile_doc(committed)
        return profile_from_doc(doc), doc
    if required:  # name the unknown model or GPU
        analytic_profile(config.model, gpu)
    return None, None


def base_cluster(config: ExperimentConfig, host: HostModel | None, *, measured: bool) -> Cluster | None:
    """The cluster the config's ``[cluster]`` keys override (see the module docstring)."""
    gpu = str(config.cluster["gpu"])
    if host is not None:
        return Cluster(gpu=gpu, num_gpus=HOST_NUM_GPUS, **host.cluster_overrides())
    if gpu in gpu_names():
        return cluster_for(gpu, int(config.cluster.get("num_gpus", 8)))
    if measured:
        return Cluster(gpu=gpu, num_gpus=HOST_NUM_GPUS, **UNMEASURED_HOST_LINK)
    return None


def plan_for(config: ExperimentConfig, *, preset: str | None = None, rate_hz: float | None = None,
             tier: str | None = None, requests: Sequence[Request] | None = None, slo: SLO | None = None,
             sm_table: SMShareTable | None = None, profile: Profile | None = None,
             doc: ProfileDoc | None = None, host_cores: float | None = None,
             need_profile: bool = True) -> Resolved:
    """The plan of ``config`` and what the simulator needs besides it.

    ``profile`` (with ``doc``, its document, when it has one) replaces the
    config's own (a what-if profile, or ``validate --profile``); with a
    ``doc`` alone the profile is built from it. ``host_cores`` replaces the
    host model's free cores (re-measured just before a run). A live run may
    go without a profile (``need_profile=False``).
    """
    config = resolve_sizes(config)
    if profile is None and doc is not None:
        profile = profile_from_doc(doc)
    elif profile is None:
        profile, doc = config_profile(config, required=need_profile)
    host = host_of(doc.params) if doc is not None else None
    if host is not None and host_cores is not None:
        host = host.with_effects(num_host_cores=host_cores)
    if host is not None and isinstance(profile, FittedProfile):
        profile = with_overheads(profile, host)
    base = base_cluster(config, host, measured=doc is not None and doc.kind == "fitted")
    plan = resolve(config, profile, base_cluster=base, preset=preset, rate_hz=rate_hz, tier=tier,
                   requests=requests, slo=slo, sm_table=sm_table,
                   profile_table=None if doc is None else doc.sm_share_table,
                   item_scale=LiveOptions.from_dict(config.engine.get("live")).mm_token_scale)
    return Resolved(plan=plan, profile=profile, doc=doc, host=host)
