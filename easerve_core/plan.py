"""The run plan: one resolved description of a run, executed by either engine.

::

    config (TOML) --load_experiment--> ExperimentConfig
                  --resolve(config, profile, ...)--> RunPlan (frozen)
        calibration.session.compose(config, overrides) -> Session (calls resolve)
                        |                                   |
           Session.sim().run() (SimPy)          Session.live().run() (processes)
                        \\____________ records (one schema) _____________/

A :class:`RunPlan` holds everything a run needs and nothing engine-specific:
the deployment with its preset applied, the cluster, the request stream
(and the workload and seed that drew it), the SLO, the SM-share table with
where it came from, and the seed. The config's engine tables (``[sim]``,
``[live]``) ride along as plain data in :attr:`RunPlan.config`, the resolved
config every run writes beside its results; each engine parses its own.

:func:`resolve` is the one pure function from a loaded config (plus a
profile and the hardware's default cluster) to a plan; presets, defaults and
validation are applied there once. :func:`assemble` builds a plan from parts
(``calibration.session.compose(Parts(...))``, tests); :func:`replan` derives a plan for another
deployment, request stream or seed (a HAS trial, a sweep point), re-deriving
the SM-share table when the plan's own was derived.

SM-share table, first that applies (:attr:`RunPlan.sm_table_source`):

1. ``given``: passed to :func:`resolve` / :func:`assemble` by the caller;
2. ``config``: the config's ``[profile] sm_share_table``;
3. ``profile``: the table stored in the profile document;
4. ``derived``: :func:`easerve_core.sm_share.derive_table` on the profile, at
   the encoder's TP, for batch sizes 1..B of the stream's median request's
   items (text-only streams: share 1.0);
5. ``none``: no profile and no table; refused for ``dynamic`` sharing with
   local Prefill, which needs one; otherwise Encode keeps the whole device.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from easerve_core import checks
from easerve_core.cluster import Cluster
from easerve_core.config import ExperimentConfig
from easerve_core.deployment import Deployment, SMSharing
from easerve_core.presets import apply_preset
from easerve_core.profile import ParallelProfile, StageProfile, profile_for_tp
from easerve_core.reference import slo_for
from easerve_core.request import Request
from easerve_core.slo import SLO
from easerve_core.sm_share import SMShareTable, derive_table
from easerve_core.workload import WorkloadSpec, generate
from easerve_core.workload.mixes import scale_items

Profile = StageProfile | ParallelProfile
#: where a plan's SM-share table came from (see the module docstring), in order of precedence
TABLE_SOURCES = ("given", "config", "profile", "derived", "none")
DEFAULT_PRESET = "easerve"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPlan:
    """Everything one run needs (see the module docstring); build it with :func:`resolve`."""

    deployment: Deployment
    cluster: Cluster
    requests: tuple[Request, ...]
    sm_table: SMShareTable
    sm_table_source: str
    seed: int = 0
    preset: str = DEFAULT_PRESET
    slo: SLO | None = None
    model: str = ""
    model_size: str = "full"
    workload: WorkloadSpec | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    #: the model's context (prompt, items and output, in tokens); None: not known, no cap
    max_context_tokens: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.deployment, Deployment):
            raise ValueError(f"deployment must be a Deployment, got {type(self.deployment).__name__}")
        if not isinstance(self.cluster, Cluster):
            raise ValueError(f"cluster must be a Cluster, got {type(self.cluster).__name__}")
        self.deployment.check_fits(self.cluster)
        if self.sm_table_source not in TABLE_SOURCES:
            raise ValueError(f"unknown sm_table_source {self.sm_table_source!r}; "
                             f"known: {', '.join(TABLE_SOURCES)}")
        object.__setattr__(self, "requests", within_context(_ordered(self.requests), self.max_context_tokens))

    def engine(self, name: str) -> Mapping[str, Any]:
        """The config's ``[name]`` table (``sim``, ``live``), empty when it has none."""
        table = self.config.get(name, {})
        return table if isinstance(table, Mapping) else {}

    @property
    def outputs_at_context(self) -> int:
        """How many requests' outputs end where the sequence fills the model's context: capped there
        (:func:`within_context`), or drawn to end exactly there (an engine cannot tell them apart)."""
        if self.max_context_tokens is None:
            return 0
        return sum(r.input_tokens + r.output_tokens == self.max_context_tokens for r in self.requests)

    def describe(self) -> dict[str, Any]:
        """What a run reports about its plan (its ``summary.json`` meta; ``outputs_at_context`` only
        where some output ends at the model's context, so other runs' summaries read as before)."""
        out: dict[str, Any] = {"preset": self.preset, "deployment": self.deployment.label(),
                               "seed": self.seed, "sm_share_table": self.sm_table.to_dict(),
                               "sm_share_table_source": self.sm_table_source}
        if capped := self.outputs_at_context:
            out |= {"outputs_at_context": capped, "max_context_tokens": self.max_context_tokens}
        return out


def _ordered(requests: Sequence[Request]) -> tuple[Request, ...]:
    """``requests`` in ``(arrival_s, request_id)`` order, refusing repeated ids."""
    ids = [r.request_id for r in requests]
    if len(set(ids)) != len(ids):
        raise ValueError("requests: request_id values must be unique")
    return tuple(sorted(requests, key=lambda r: (r.arrival_s, r.request_id)))


def within_context(requests: tuple[Request, ...], max_context_tokens: int | None, *,
                   field_name: str = "requests") -> tuple[Request, ...]:
    """``requests`` as an engine serves them on a model of ``max_context_tokens`` (prompt, items and
    output together; None: no limit known): each output ends where the sequence fills the context
    (vLLM's ``max_model_len``: the request finishes, capped by length). A request whose input
    alone fills it is refused, as an engine refuses it: a ``ValueError`` naming ``field_name``,
    how many and the first."""
    if max_context_tokens is None:
        return requests
    over = [r for r in requests if r.input_tokens >= max_context_tokens]
    if over:
        raise ValueError(f"{field_name}: {len(over):,} request(s) have an input (prompt and items) at or "
                         f"past the model's context of {max_context_tokens:,} tokens (request "
                         f"{over[0].request_id}: {over[0].input_tokens:,}); an engine refuses them")
    return tuple(r if r.input_tokens + r.output_tokens <= max_context_tokens else
                 replace(r, output_tokens=max_context_tokens - r.input_tokens) for r in requests)


_NETWORK_KEYS = ("num_nodes", "nic_bytes_per_s", "nic_latency_s", "link_sharing")


def cluster_dict(cluster: Cluster) -> dict[str, Any]:
    """The cluster as a ``[cluster]`` table (the network keys only off the single-node model,
    so a single-node run's resolved config is what it was before nodes existed)."""
    keys: tuple[str, ...] = ("gpu", "num_gpus", "link_bytes_per_s", "link_latency_s", "num_links")
    if not cluster.single_node_model:
        keys += _NETWORK_KEYS
    return {k: getattr(cluster, k) for k in keys}


def derived_table(deployment: Deployment, requests: Sequence[Request], profile: Profile) -> SMShareTable:
    """Rule 4 of the module docstring: the table the profile gives this deployment and stream."""
    items = sorted(r.encode_items for r in requests if r.mm_tokens_per_item)
    if not items:
        return SMShareTable({1: 1.0})
    typical = items[len(items) // 2]
    encode = profile_for_tp(profile, max(1, deployment.encode.tp))
    return derive_table(encode, typical, range(1, max(1, deployment.max_encode_batch) + 1))


def _choose_table(deployment: Deployment, requests: Sequence[Request], profile: Profile | None, *,
                  given: SMShareTable | None, config_table: SMShareTable | None,
                  profile_table: SMShareTable | None) -> tuple[SMShareTable, str]:
    for table, source in ((given, "given"), (config_table, "config"), (profile_table, "profile")):
        if table is not None:
            return table, source
    if profile is not None:
        return derived_table(deployment, requests, profile), "derived"
    if deployment.has_local_prefill and deployment.sm_sharing is SMSharing.DYNAMIC:
        raise ValueError("deployment.sm_sharing: 'dynamic' needs an SM-share table; give [profile] path "
                         "(a profile to derive it from) or [profile] sm_share_table")
    return SMShareTable({1: 1.0}), "none"


def assemble(deployment: Deployment, requests: Sequence[Request], *, cluster: Cluster,
            profile: Profile | None = None, seed: int = 0, preset: str = DEFAULT_PRESET,
            slo: SLO | None = None, sm_table: SMShareTable | None = None,
            config_table: SMShareTable | None = None, profile_table: SMShareTable | None = None,
            workload: WorkloadSpec | None = None, model: str = "", model_size: str = "full",
            config: Mapping[str, Any] | None = None) -> RunPlan:
    """A plan from parts: ``preset`` is applied to ``deployment`` here."""
    dep = apply_preset(preset, deployment, cluster)
    table, source = _choose_table(dep, requests, profile, given=sm_table, config_table=config_table,
                                  profile_table=profile_table)
    data = dict(config) if config is not None else {}
    data.update(seed=seed, cluster=cluster_dict(cluster), deployment={**dep.to_dict(), "preset": preset})
    if model:
        data["model"] = {"name": model, "size": model_size}
    return RunPlan(deployment=dep, cluster=cluster, requests=tuple(requests), sm_table=table,
                   sm_table_source=source, seed=seed, preset=preset, slo=slo, model=model,
                   model_size=model_size, workload=workload, config=data)


def resolve(config: ExperimentConfig, profile: Profile | None, *, base_cluster: Cluster | None = None,
            preset: str | None = None, rate_hz: float | None = None, tier: str | None = None,
            requests: Sequence[Request] | None = None, slo: SLO | None = None,
            sm_table: SMShareTable | None = None,
            profile_table: SMShareTable | None = None, item_scale: float = 1.0) -> RunPlan:
    """The plan of ``config`` (see the module docstring).

    Args:
        config: a loaded experiment config.
        profile: the latency profile (for the SLO and a derived SM-share
            table); None for a live run of a model without one.
        base_cluster: the hardware's defaults (GPU spec links) that the
            config's ``[cluster]`` keys override; None: :class:`Cluster`'s defaults.
        preset: overrides ``[deployment] preset`` (default ``easerve``).
        rate_hz: overrides the workload's mean rate; the deployment's batcher
            rate hint, when it has one, follows it.
        tier: overrides ``[slo] tier`` (``[slo]``'s absolute limits still win).
        requests: the stream to run instead of drawing the workload with the seed.
        slo: an SLO to judge by instead of the tier's (computed from the profile).
        sm_table: an SM-share table that wins over every other source.
        profile_table: the table the profile document carries.
        item_scale: every drawn request's multimodal items, and the mix the
            SLO is computed for, at this many times their LM tokens (a small
            live model's ``[live] mm_token_scale``, read by the caller), so
            both engines run the same work. Given ``requests`` are run as given.
    """
    cluster = config.build_cluster(base_cluster)
    name = preset or config.deployment_preset or DEFAULT_PRESET
    deployment = config.deployment
    workload = config.workload
    if rate_hz is not None:
        if isinstance(rate_hz, bool) or not isinstance(rate_hz, int | float) or not (
                math.isfinite(rate_hz) and rate_hz > 0):
            raise ValueError(f"--rate must be a positive number, got {rate_hz!r}")
        workload = workload.with_rate(rate_hz)
        if deployment.rate_hint_hz is not None:
            deployment = deployment.with_(rate_hint_hz=rate_hz)
    stream = tuple(requests) if requests is not None else tuple(
        generate(workload, np.random.default_rng(config.seed)))
    if checks.positive("item_scale", item_scale) != 1.0:
        if requests is None:
            stream = tuple(replace(r, mm_tokens_per_item=scale_items(r.mm_tokens_per_item, item_scale),
                                   encode_tokens_per_item=scale_items(r.encode_tokens_per_item, item_scale))
                           for r in stream)
        workload = replace(workload, mix=workload.mix.with_item_scale(item_scale))
    spec = config.slo.with_tier(tier) if tier else config.slo
    if slo is None and (profile is not None or spec.absolute):
        slo = slo_for(spec, profile, workload.mix, cluster)
    data = config.to_dict()
    data["slo"] = spec.to_dict()
    if rate_hz is not None:
        data["workload"] = {**data["workload"], "rate_hz": rate_hz}
    return assemble(deployment, stream, cluster=cluster, profile=profile, seed=config.seed, preset=name,
                   slo=slo, sm_table=sm_table, config_table=config.sm_share_table,
                   profile_table=profile_table, workload=workload, model=config.model,
                   model_size=config.model_size, config=data)


def replan(plan: RunPlan, profile: Profile | None = None, *, deployment: Deployment | None = None,
           preset: str | None = None, requests: Sequence[Request] | None = None,
           seed: int | None = None, slo: SLO | None = None) -> RunPlan:
    """``plan`` with another deployment (``preset``, default ``easerve``, applied to it), stream,
    seed or SLO.

    A derived SM-share table is derived again for the new deployment and
    stream (it depends on B, the encoder's TP and the stream's items), which
    needs ``profile``; a table from any other source is kept.
    """
    if deployment is None:
        if preset is not None:
            raise ValueError("replan: a preset applies to a deployment; give deployment too")
        name, dep = plan.preset, plan.deployment
    else:
        name = preset or DEFAULT_PRESET
        dep = apply_preset(name, deployment, plan.cluster)
    stream = plan.requests if requests is None else tuple(requests)
    table, source = plan.sm_table, plan.sm_table_source
    if source == "derived" and (deployment is not None or requests is not None):
        if profile is None:
            raise ValueError("replan: a derived SM-share table needs the profile to derive it again")
        table = derived_table(dep, stream, profile)
    config = dict(plan.config)
    config["deployment"] = {**dep.to_dict(), "preset": name}
    config["seed"] = plan.seed if seed is None else seed
    return replace(plan, deployment=dep, preset=name, requests=stream, sm_table=table,
                   sm_table_source=source, seed=plan.seed if seed is None else seed,
                   slo=plan.slo if slo is None else slo, config=config)
