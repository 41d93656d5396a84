"""Baselines as named presets: one table, one flag to compare them.

Each preset maps ``(deployment, cluster)`` to the deployment either engine
runs (DESIGN.md §2); :func:`easerve_core.plan.resolve` applies it once:

* ``easerve``: the deployment as given (adaptive batching, deficit router,
  its SM-sharing mode).
* ``dynamo``: request-at-a-time EPD (Dynamo-like): fixed batch of 1, every
  prefill remote (s = 1), no SM sharing; same E/P/D allocation.
* ``fixed-batch``: the same EPD baseline with a fixed encode batch of
  ``FIXED_BATCH`` and the deployment's ``batch_timeout_s``; a deployment
  that already batches fixed (a tuned fixed-batch one) keeps its B.
* ``vllm``: aggregated (vLLM-like): every GPU in LM instances of the
  deployment's decode TP, each running Encode, Prefill and Decode; an
  already aggregated deployment (a tuned one) keeps its instances.

Every preset is idempotent (applied to its own result it changes nothing),
so a baseline's tuned deployment (``easerve.experiments.choose``) runs as
chosen under its preset.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from easerve_core.cluster import Cluster
from easerve_core.deployment import Architecture, BatchingMode, Deployment, SMSharing, StageGroup

#: encode batch of the fixed-batch baseline (the paper's "fixed batch = 8")
FIXED_BATCH = 8

Preset = Callable[[Deployment, Cluster], Deployment]


def _easerve(deployment: Deployment, cluster: Cluster) -> Deployment:
    return deployment


def _epd_fixed(deployment: Deployment, batch: int) -> Deployment:
    if deployment.architecture is Architecture.AGGREGATED:
        raise ValueError("deployment.architecture: an EPD baseline needs a disaggregated deployment")
    if deployment.prefill.num_workers < 1:
        raise ValueError("prefill.num_workers: an EPD baseline sends every prefill remote, "
                         "so it needs at least one prefill worker")
    return deployment.with_(batching=BatchingMode.FIXED, max_encode_batch=batch,
                            remote_fraction=1.0, sm_sharing=SMSharing.NONE, router="deficit",
                            batch_timeout_s=deployment.batch_timeout_s if batch > 1 else 0.0)


def _dynamo(deployment: Deployment, cluster: Cluster) -> Deployment:
    return _epd_fixed(deployment, 1)


def _fixed_batch(deployment: Deployment, cluster: Cluster) -> Deployment:
    fixed = deployment.batching is BatchingMode.FIXED
    return _epd_fixed(deployment, deployment.max_encode_batch if fixed else FIXED_BATCH)


def _vllm(deployment: Deployment, cluster: Cluster) -> Deployment:
    tp = deployment.decode.tp
    if tp > cluster.num_gpus:
        raise ValueError(f"decode.tp: {tp} exceeds the cluster's {cluster.num_gpus} GPUs")
    instances = cluster.num_gpus // tp
    if deployment.architecture is Architecture.AGGREGATED:
        instances = deployment.decode.num_workers
    return deployment.with_(architecture=Architecture.AGGREGATED,
                            encode=StageGroup(num_workers=0, tp=1),
                            prefill=StageGroup(num_workers=0, tp=1),
                            decode=StageGroup(num_workers=instances, tp=tp),
                            remote_fraction=1.0, sm_sharing=SMSharing.NONE)


PRESETS: Mapping[str, Preset] = {
    "easerve": _easerve,
    "dynamo": _dynamo,
    "fixed-batch": _fixed_batch,
    "vllm": _vllm,
}


def apply_preset(name: str, deployment: Deployment, cluster: Cluster) -> Deployment:
    """The deployment preset ``name`` makes of ``deployment`` on ``cluster``."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(sorted(PRESETS))}")
    return PRESETS[name](deployment, cluster)
