"""Profile kinds, loading, SM-share tables and clusters: calibration's front door.

:data:`PROFILE_KINDS` is the one table from a profile file's ``kind`` to the
code that evaluates its ``params``; :func:`load_profile` reads a file and
builds the profile object (analytic -> a ParallelProfile, fitted -> a
StageProfile). :func:`analytic_doc` and :func:`fitted_doc` make the versioned
documents that ``easerve profile`` writes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from calibration._fields import unknown_name
from calibration.analytic import AnalyticProfile, Efficiency
from calibration.fit import FitResult, FittedProfile
from calibration.measured import MeasuredProfile, model_tables
from calibration.networks import network_spec
from calibration.optables import OpTables
from calibration.scaled import ScaledProfile, scales_of
from calibration.specs import gpu_spec, model_spec
from easerve_core.cluster import Cluster
from easerve_core.profile import ParallelProfile, ProfileDoc, StageProfile, profile_for_tp
from easerve_core.sm_share import SHARE_LEVELS, TABLE_BATCH_SIZES, SMShareTable, derive_table
from runtime.profiles import load_profile_doc

#: The SM shares of the paper's five-level table.
SM_SHARE_LEVELS = SHARE_LEVELS


def _load_analytic(doc: ProfileDoc) -> AnalyticProfile:
    return AnalyticProfile.from_params(dict(doc.params))


def _load_fitted(doc: ProfileDoc) -> FittedProfile:
    return FittedProfile.from_params(doc.params)


def _load_measured(doc: ProfileDoc) -> MeasuredProfile:
    return MeasuredProfile.from_params(doc.params)


def _load_scaled(doc: ProfileDoc) -> ScaledProfile:
    base, first_token, decode = scales_of(doc.params)
    return ScaledProfile(profile_from_doc(ProfileDoc.from_json_dict(base, where=f"{doc.source} (base)")),
                         first_token_scale=first_token, decode_scale=decode)


#: profile kind -> loader of a ProfileDoc
PROFILE_KINDS: dict[str, Callable[[ProfileDoc], StageProfile | ParallelProfile]] = {
    "analytic": _load_analytic,
    "fitted": _load_fitted,
    "measured": _load_measured,
    "scaled": _load_scaled,
}


def profile_from_doc(doc: ProfileDoc) -> StageProfile | ParallelProfile:
    loader = PROFILE_KINDS.get(doc.kind)
    if loader is None:
        raise unknown_name("profile kind", doc.kind, list(PROFILE_KINDS))
    return loader(doc)


def load_profile(path: str | os.PathLike[str]) -> StageProfile | ParallelProfile:
    """Read a profile JSON file and build the object that evaluates it."""
    return profile_from_doc(load_profile_doc(path))


def analytic_profile(model: str, gpu: str, *, efficiency: Efficiency | None = None) -> AnalyticProfile:
    """The analytic profile of ``model`` on ``gpu`` (names as in the spec registries)."""
    return AnalyticProfile(model=model_spec(model), gpu=gpu_spec(gpu),
                           efficiency=efficiency or Efficiency())


def sm_share_table(
    profile: StageProfile | ParallelProfile,
    batch_sizes: Sequence[int] = TABLE_BATCH_SIZES,
    levels: Sequence[float] = SM_SHARE_LEVELS,
    items: Sequence[int] = (),
    *,
    tolerance: float = 0.05,
) -> SMShareTable:
    """The SM-share table of an encode worker, from the profile's encode latencies.

    ``items`` are the LM tokens of the items of one request; a batch of B
    requests encodes B copies. A ParallelProfile is asked at TP 1.
    """
    return derive_table(profile_for_tp(profile, 1), items, batch_sizes, levels=levels, tolerance=tolerance)


def cluster_for(gpu: str, num_gpus: int = 8, *, num_nodes: int = 1, network: str | None = None) -> Cluster:
    """A cluster of ``num_gpus`` identical ``gpu`` (all nodes together) joined by that GPU's usual
    link inside a node and, given ``network`` (:func:`calibration.networks.network_spec`), its NICs
    between nodes."""
    spec = gpu_spec(gpu)
    nic = {}
    if network is not None:
        net = network_spec(network)
        nic = {"nic_bytes_per_s": net.nic_bytes_per_s, "nic_latency_s": net.nic_latency_s}
    return Cluster(gpu=spec.name, num_gpus=num_gpus, link_bytes_per_s=spec.link_bytes_per_s,
                   link_latency_s=spec.link_latency_s, num_links=spec.num_links, num_nodes=num_nodes, **nic)


def analytic_doc(model: str, gpu: str, *, lm_tp: int, created: str) -> ProfileDoc:
    """The document ``easerve profile analytic`` writes (with its SM-share table)."""
    profile = analytic_profile(model, gpu)
    if not profile.lm_fits(lm_tp):
        raise ValueError(f"{model} does not fit {gpu} at tp={lm_tp}; try a larger --tp")
    params: dict[str, Any] = profile.to_params()
    params["lm_tp"] = lm_tp
    items = profile.model.typical_request.encode_items
    return ProfileDoc(
        kind="analytic", model=model, gpu=gpu, source="analytic roofline (calibration.analytic)",
        created=created, params=params, sm_share_table=sm_share_table(profile, items=items),
        notes=f"model and GPU specs embedded; lm_tp is the Prefill/Decode TP 'profile show' "
              f"reports; the SM-share table is for encode batches of the typical request "
              f"({list(items)} LM tokens per request).",
    )


def fitted_doc(result: FitResult, samples: dict[str, Any], *, created: str) -> ProfileDoc:
    """The document ``easerve profile fit`` writes."""
    items = samples.get("typical_mm_tokens_per_item") or [
        max((r["mm_tokens_per_item"] for r in samples["encode"]), key=len)[0]]
    params = result.profile.to_params()
    params["lm_tp"] = int(samples["tp"])
    return ProfileDoc(
        kind="fitted", model=str(samples["model"]), gpu=str(samples["gpu"]),
        source=str(samples.get("source", "fitted from measured samples (calibration.fit)")),
        created=created, params=params,
        sm_share_table=sm_share_table(result.profile, items=[int(v) for v in items]),
        fit_error=result.fit_error,
        notes=f"samples per stage: {result.num_samples}; fit_error is RMS relative error",
    )


def measured_doc(model: str, gpu: str, tables: OpTables, database: dict[str, str], *, lm_tp: int,
                 created: str, efficiency: Efficiency | None = None) -> ProfileDoc:
    """The document ``easerve profile build`` writes: ``model`` on ``gpu`` priced from ``tables``
    (only the model's shapes kept), the roofline with ``efficiency`` for ops they lack."""
    profile = MeasuredProfile(model=model_spec(model), gpu=gpu_spec(gpu), database=database,
                              tables=model_tables(tables, model_spec(model)),
                              efficiency=efficiency or Efficiency())
    if not profile.lm_fits(lm_tp):
        raise ValueError(f"{model} does not fit {gpu} at tp={lm_tp}; try a larger --tp")
    params: dict[str, Any] = profile.to_params()
    params["lm_tp"] = lm_tp
    items = profile.model.typical_request.encode_items
    fallback = sorted({label for label, _, source in profile.op_sources(lm_tp) if source == "roofline"})
    return ProfileDoc(
        kind="measured", model=model, gpu=gpu, source=tables.source, created=created, params=params,
        sm_share_table=sm_share_table(profile, items=items),
        notes=f"stage latencies summed from measured ops (calibration.measured); the roofline prices "
              f"{', '.join(fallback) or 'no op'}; 'easerve profile show' lists the source per op.",
    )
