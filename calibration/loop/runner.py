"""Run one deployment and workload in both engines: the simulator and the live executor.

The one module of ``calibration`` that drives both engines (DESIGN.md §7:
simulate -> run the same configuration live -> compare), from one plan
(:func:`calibration.session.compose`). Both sides get the same request
stream: the workload drawn from the config's seed; the live side scales item
sizes by ``[live] mm_token_scale`` and builds inputs the family accepts, and
the simulator is given exactly the LM tokens those inputs produce
(:meth:`live.trial.Trial.model_requests`). Both are judged by one SLO,
computed from the profile (:func:`easerve_core.reference.slo_for`) for the
scaled mix.

The simulator runs with the profile's host model switched on (its
``[sim.host]`` effects and the live mechanisms, :meth:`HostModel.sim_base`;
the link from the measured transfers; the decode-loop overhead added to
every step); a config's own ``[sim]`` table wins over those. The simulator
is deterministic, so it runs once; the live side runs ``repeats`` times
(weights saved once, shared).

A Ctrl-C (or SIGTERM) during :func:`compare` keeps what was done: it raises
:class:`CompareInterrupted` holding every finished deployment and the one in
progress with the live trials it finished and the interrupted trial's
records so far (open requests end ``failed``, error ``interrupted``), with
its simulator run, so ``easerve validate`` writes them all.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from calibration.loop.host import HostModel
from calibration.session import Overrides, Session, compose
from easerve_core.config import ExperimentConfig
from easerve_core.deployment import Deployment
from easerve_core.profile import ProfileDoc
from easerve_core.request import Request
from easerve_core.result import RunResult


def setup(config: ExperimentConfig, doc: ProfileDoc, *, host_cores: float | None = None) -> Session:
    """The config's plan on ``doc``'s profile (its items and SLO those the live model gets).

    ``host_cores`` replaces the profile's ``num_host_cores`` (the host's free
    cores re-measured just before the runs: other tenants come and go).
    """
    return compose(config, Overrides(doc=doc, host_cores=host_cores))


def requests_for(session: Session) -> list[Request]:
    """The plan's requests with the LM tokens the live model really gets (the simulator's stream)."""
    return session.live().trial().model_requests()


def _matching(runs: list[RunResult], requests: Sequence[Request], name: str) -> list[RunResult]:
    """``runs`` if each recorded the same request ids as ``requests``, else a ValueError."""
    want = sorted(r.request_id for r in requests)
    for i, run in enumerate(runs):
        if sorted(int(x) for x in run.records["request_id"]) != want:
            raise ValueError(f"recorded live run {i} of {name!r} holds other requests than this config's "
                             f"workload ({len(run.records)} records, {len(want)} requests)")
    return runs


def run_sim(session: Session, requests: Sequence[Request]) -> RunResult:
    """The simulator on ``session`` with ``requests`` (the live model's token counts)."""
    session.sim_profile()  # a plan with no profile is refused by name
    return session.replan(requests=requests).sim().run()


def run_live(session: Session, repeats: int, *, weights_dir: str,
             done: list[RunResult] | None = None) -> list[RunResult]:
    """``repeats`` live trials of ``session``, the weights saved once in ``weights_dir``.

    Each result is appended to ``done`` (a new list by default) as it ends;
    on a Ctrl-C the interrupted trial's records so far are appended too, then
    the interrupt goes on.
    """
    engine = session.live(replace(session.live_options(), weights_dir=weights_dir))
    done = [] if done is None else done
    for _ in range(repeats):
        with engine.trial() as trial:
            trial.start()
            try:
                done.append(trial.run())
            except KeyboardInterrupt:
                trial.close()
                done.append(trial.result())
                raise
    return done


class CompareInterrupted(KeyboardInterrupt):
    """A Ctrl-C during :func:`compare`, with what it had (the module docstring); ``__cause__`` is
    the interrupt itself."""

    def __init__(self, results: list[Comparison]) -> None:
        super().__init__(f"interrupted after {len(results)} deployment(s)")
        self.results = results


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    name: str
    deployment: Deployment
    sim: RunResult
    live: list[RunResult]
    host: HostModel | None = None


def compare(config: ExperimentConfig, s: Session, deployments: Sequence[tuple[str, Deployment]], *,
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
    assert s.doc is not None
    sim_reqs = requests_for(s)
    out = []
    with tempfile.TemporaryDirectory(prefix="easerve-validate-") as tmp:
        folder = weights_dir or str(Path(tmp) / "weights")
        for name, dep in deployments:
            here = s if host_cores is None else setup(config, s.doc, host_cores=host_cores(name))
            here = here.replan(deployment=dep)
            live: list[RunResult] = []
            try:
                if recorded is None:
                    run_live(here, repeats, weights_dir=folder, done=live)
                else:
                    live = _matching(recorded[name], sim_reqs, name)
            except KeyboardInterrupt as exc:
                if live:  # the unfinished deployment, with the trials it has
                    out.append(Comparison(name=name, deployment=dep, sim=run_sim(here, sim_reqs),
                                          live=live, host=here.host))
                raise CompareInterrupted(out) from exc
            out.append(Comparison(name=name, deployment=dep, sim=run_sim(here, sim_reqs), live=live,
                                  host=here.host))
    return out
