"""One session: the only way from a config, or from parts, to a run.

``compose(config, overrides) -> Session`` finds the pieces a config implies
(:mod:`calibration.plans`: the profile, the host model a measured profile
carries, the base cluster, the workload's raw item sizes in LM tokens) and
hands them to the core's pure resolver (:func:`easerve_core.plan.resolve`),
once. ``compose(Parts(...))`` does the same for a run put together in code
(a deployment, a stream, a cluster) through :func:`easerve_core.plan.assemble`.
The :class:`Session` holds the plan (with the resolved config it writes), the
profile, and what a measured profile adds, and opens either engine on it::

    session = compose(load_experiment("configs/llava34b_rtx6000ada.toml"), Overrides(rate_hz=4.0))
    result = session.sim().run()          # SimPy, simulated time
    result = session.live().run()         # worker processes, wall time (a live model)
    other = session.replan(deployment=d)  # the same session on another deployment

:class:`SimEngine` and :class:`LiveEngine` share ``run() -> RunResult``; the
resolved config each result carries is the plan's, with the engine's own
options under ``sim`` (the simulator adds them; live's are the plan's
``[live]`` table already). A session re-composed with other overrides
(:meth:`Session.recompose`) reuses its profile, so a rate sweep loads it once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import import_module
from typing import TYPE_CHECKING, Any

from calibration.fit import FittedProfile
from calibration.loop.host import HostModel, host_of, with_overheads
from calibration.plans import Profile, base_cluster, config_profile
from calibration.registry import profile_from_doc
from calibration.sizes import resolve_sizes
from calibration.specs import is_model, model_spec
from easerve_core.cluster import Cluster
from easerve_core.config import ExperimentConfig
from easerve_core.deployment import Deployment
from easerve_core.plan import DEFAULT_PRESET, RunPlan, assemble, replan, resolve, within_context
from easerve_core.profile import ProfileDoc
from easerve_core.request import Request, check_modalities
from easerve_core.result import RunResult
from easerve_core.slo import SLO
from easerve_core.sm_share import SMShareTable
from easerve_core.workload.replay import RecordedTrace
from live.options import LiveOptions
from sim.options import SimOptions, options_for

if TYPE_CHECKING:
    from live.trial import Trial
    from sim.result import SimResult


@dataclass(frozen=True, slots=True, kw_only=True)
class Overrides:
    """What a caller changes of a config's run (every field: None keeps the config's).

    ``profile`` (with ``doc``, its document, when it has one) replaces the
    config's own (a what-if profile, ``validate --profile``); with a ``doc``
    alone the profile is built from it. ``host_cores`` replaces the host
    model's free cores (re-measured just before a run). ``need_profile``:
    False lets a live run go without a profile (a tiny model).
    """

    preset: str | None = None
    rate_hz: float | None = None
    tier: str | None = None
    requests: Sequence[Request] | None = None
    slo: SLO | None = None
    sm_table: SMShareTable | None = None
    profile: Profile | None = None
    doc: ProfileDoc | None = None
    host_cores: float | None = None
    need_profile: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Parts:
    """A run put together in code: ``preset`` is applied to ``deployment``, the SM-share
    table is ``sm_table`` or derived from ``profile`` (:func:`easerve_core.plan.assemble`)."""

    deployment: Deployment
    requests: Sequence[Request]
    cluster: Cluster
    profile: Profile | None = None
    seed: int = 0
    preset: str = DEFAULT_PRESET
    slo: SLO | None = None
    sm_table: SMShareTable | None = None
    model: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """A composed run: the plan and what the engines need besides it (see the module docstring)."""

    plan: RunPlan
    profile: Profile | None
    doc: ProfileDoc | None = None
    host: HostModel | None = None
    #: what it was composed from (None for parts or a plan given whole)
    config: ExperimentConfig | None = None
    overrides: Overrides = Overrides()

    def sim_options(self) -> SimOptions:
        """The plan's ``[sim]`` table over the host model's base (:meth:`HostModel.sim_base`)."""
        return options_for(self.plan, base=None if self.host is None else self.host.sim_base())

    def sim_profile(self) -> Profile:
        """The profile, refusing a plan that has none (a live-only model)."""
        if self.profile is None:
            raise ValueError(f"model {self.plan.model!r} on {self.plan.cluster.gpu!r} has no profile to "
                             "simulate with: set [profile] path (easerve calibrate writes one)")
        return self.profile

    def live_options(self) -> LiveOptions:
        """The plan's ``[live]`` table."""
        return LiveOptions.from_dict(self.plan.engine("live"))

    def sim(self, options: SimOptions | None = None, **knobs: Any) -> SimEngine:
        """The simulator on this session; ``options`` default :meth:`sim_options`; ``knobs``
        are :func:`sim.simulate`'s others (``progress``, ``controller``, ``reconfiguration_s``,
        ``trace``, ``make_before_break``). SimPy loads here, not in :meth:`SimEngine.run`, so
        a timed run times the simulation alone (the live command never loads it)."""
        import_module("sim.engine")
        return SimEngine(session=self, options=self.sim_options() if options is None else options,
                         knobs=knobs)

    def live(self, options: LiveOptions | None = None, **knobs: Any) -> LiveEngine:
        """The live executor on this session; ``options`` default :meth:`live_options`;
        ``knobs`` are :class:`live.trial.Trial`'s others (``controller``, ...)."""
        return LiveEngine(session=self, options=self.live_options() if options is None else options,
                          knobs=knobs)

    def replan(self, *, deployment: Deployment | None = None, preset: str | None = None,
               requests: Sequence[Request] | None = None, seed: int | None = None,
               slo: SLO | None = None) -> Session:
        """The session on another deployment, stream, seed or SLO (:func:`easerve_core.plan.replan`)."""
        plan = replan(self.plan, self.profile, deployment=deployment, preset=preset, requests=requests,
                      seed=seed, slo=slo)
        return replace(self, plan=plan)

    def with_plan(self, plan: RunPlan) -> Session:
        """The session on ``plan`` (one this session's plan was turned into)."""
        return replace(self, plan=plan)

    def recompose(self, config: ExperimentConfig | None = None, **changes: Any) -> Session:
        """The config (or ``config``, a variant of it) composed again with these overrides
        changed; the profile is reused."""
        config = config or self.config
        if config is None:
            raise ValueError("recompose: this session was not composed from a config")
        keep = {} if changes.get("profile") is not None or changes.get("doc") is not None else {
            "profile": self.profile, "doc": self.doc}
        return compose(config, replace(self.overrides, **{**keep, **changes}))


@dataclass(frozen=True, slots=True, kw_only=True)
class SimEngine:
    """The SimPy simulator on a session."""

    session: Session
    options: SimOptions
    knobs: dict[str, Any]

    def run(self) -> SimResult:
        from sim import simulate  # loaded by Session.sim already

        return simulate(self.session.plan, self.session.sim_profile(), options=self.options, **self.knobs)


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveEngine:
    """The live executor on a session: real models in worker processes.

    :meth:`run` starts the workers, runs the plan and stops them; :meth:`trial`
    gives the :class:`live.trial.Trial` itself, for a caller that must reach it
    between the two (an interrupted run's partial records, the model's own
    token counts).
    """

    session: Session
    options: LiveOptions
    knobs: dict[str, Any]

    def trial(self) -> Trial:
        # torch and transformers take seconds to import: only a live run pays for them
        from live.trial import Trial

        return Trial(self.session.plan, self.options, **self.knobs)

    def run(self) -> RunResult:
        with self.trial() as trial:
            trial.start()
            return trial.run()


def compose(source: ExperimentConfig | Parts, overrides: Overrides | None = None) -> Session:
    """A session from a config (with ``overrides``) or from parts (see the module docstring)."""
    if isinstance(source, Parts):
        if overrides is not None:
            raise ValueError("compose: overrides apply to a config; parts say everything themselves")
        return _from_parts(source)
    o = overrides or Overrides()
    config = resolve_sizes(source)
    profile, doc = o.profile, o.doc
    if profile is None and doc is not None:
        profile = profile_from_doc(doc)
    elif profile is None:
        profile, doc = config_profile(config, required=o.need_profile)
    host = host_of(doc.params) if doc is not None else None
    if host is not None and o.host_cores is not None:
        host = host.with_effects(num_host_cores=o.host_cores)
    if host is not None and isinstance(profile, FittedProfile):
        profile = with_overheads(profile, host)
    base = base_cluster(config, host, measured=doc is not None and doc.kind == "fitted")
    plan = resolve(config, profile, base_cluster=base, preset=o.preset, rate_hz=o.rate_hz, tier=o.tier,
                   requests=o.requests, slo=o.slo, sm_table=o.sm_table,
                   profile_table=None if doc is None else doc.sm_share_table,
                   item_scale=LiveOptions.from_dict(config.engine.get("live")).mm_token_scale)
    plan = _model_rules(config, plan)
    return Session(plan=plan, profile=profile, doc=doc, host=host, config=source, overrides=o)


def _model_rules(config: ExperimentConfig, plan: RunPlan) -> RunPlan:
    """The plan under what its model spec says, for both engines: a stream of a modality the model
    does not take is refused, and outputs end where the model's context does (a model the live
    zoo alone knows is checked by the live trial, against its family)."""
    if not is_model(config.model):
        return plan
    spec = model_spec(config.model)
    field_name = "workload.trace" if isinstance(config.workload.trace, RecordedTrace) else "workload.mix"
    check_modalities(plan.requests, spec.modalities, model=config.model, field_name=field_name)
    context = spec.max_context_tokens or None
    within_context(plan.requests, context, field_name=field_name)  # the refusal names the workload
    if context is not None and plan.workload is not None:  # a stream drawn on another seed, too
        longest = plan.workload.longest_input_tokens
        if longest >= context:
            raise ValueError(f"{field_name}: inputs (prompt and items) of up to {longest:,} tokens can be "
                             f"drawn, at or past the model's context of {context:,}, which an engine refuses "
                             "(any seed's stream, a HAS trial's too, may hold one; narrow "
                             "workload.prompt_tokens or the items)")
    return replace(plan, max_context_tokens=context)


def model_context(config: ExperimentConfig) -> int | None:
    """The context of the config's model, in tokens (None: its spec gives none, or it has no spec)."""
    return (model_spec(config.model).max_context_tokens or None) if is_model(config.model) else None


def _from_parts(p: Parts) -> Session:
    plan = assemble(p.deployment, p.requests, cluster=p.cluster, profile=p.profile, seed=p.seed,
                    preset=p.preset, slo=p.slo, sm_table=p.sm_table, model=p.model)
    return Session(plan=plan, profile=p.profile)
