"""The pieces a config implies, found for :func:`calibration.session.compose`.

* the **profile** (:func:`config_profile`): ``[profile] path`` (its model and
  GPU must be the config's), else the analytic profile of a specified model
  on a specified GPU, else the committed profile of a live model on that
  device (``calibration/profiles/<gpu>/<model>-<size>--<gpu>.json``), else
  none (a tiny live model: its plan needs ``[profile] sm_share_table`` for
  dynamic sharing);
* the **base cluster** the config's ``[cluster]`` keys override
  (:func:`base_cluster`): worker processes on one host (64 paths of the
  measured link) when there is a host model, else the GPU spec's link.

The host model a measured profile carries (``params.host``) and the
workload's raw item sizes in LM tokens (:func:`calibration.sizes.resolve_sizes`)
are applied by ``compose`` itself.
"""

from __future__ import annotations

from pathlib import Path

from calibration.analytic import Efficiency
from calibration.loop.host import HostModel
from calibration.registry import analytic_profile, cluster_for, profile_from_doc
from calibration.specs import gpu_names, gpu_spec, is_model
from easerve_core.cluster import Cluster
from easerve_core.config import ExperimentConfig
from easerve_core.profile import ParallelProfile, ProfileDoc, StageProfile
from runtime.profiles import load_profile_doc

Profile = StageProfile | ParallelProfile
#: committed profiles of live models, by device: ``<gpu>/<model>-<size>--<gpu>.json``
PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
#: "GPUs" of a host whose workers are processes, when the config does not say
HOST_NUM_GPUS = 64
#: the link of worker processes on one host without a measured transfer fit
UNMEASURED_HOST_LINK = {"link_latency_s": 0.0, "link_bytes_per_s": 1e12, "num_links": 1}


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
    gpu = config.gpu
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
    if required and not is_model(config.model):  # a live-only model here: say where a profile comes from
        raise ValueError(f"unknown model {config.model!r} to simulate: no spec (easerve model list) and no "
                         f"committed profile for size {config.model_size!r} on {gpu!r}; set [profile] path "
                         "(easerve calibrate writes one) or [model] spec, or run it with easerve live")
    if required:  # name the unknown GPU
        analytic_profile(config.model, gpu)
    return None, None


def base_cluster(config: ExperimentConfig, host: HostModel | None, *, measured: bool) -> Cluster | None:
    """The cluster the config's ``[cluster]`` keys override (see the module docstring)."""
    gpu = config.gpu
    if host is not None:
        return Cluster(gpu=gpu, num_gpus=HOST_NUM_GPUS, **host.cluster_overrides())
    if gpu in gpu_names():
        return cluster_for(gpu, int(config.cluster.get("num_gpus", 8)))
    if measured:
        return Cluster(gpu=gpu, num_gpus=HOST_NUM_GPUS, **UNMEASURED_HOST_LINK)
    return None
