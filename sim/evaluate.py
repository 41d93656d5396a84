"""The simulator as a HAS evaluator: a deployment in, goodput at the target rate out.

:func:`make_evaluator` draws the target workload once (seeded) and returns a
:class:`SimEvaluator`, a picklable callable that simulates every deployment
on those same requests and returns its goodput (requests/s meeting the SLO,
``easerve_core.slo.goodput_rps``); with ``num_samples`` > 1 it draws that many
request streams (seeds ``seed``, ``seed + 1``, ...) and returns the mean, so a
deployment near a capacity cliff is not judged on one lucky stream. The same requests for every trial keep
the comparison between deployments free of workload noise; a modest request
count (``num_requests``, default 250) keeps one trial to about a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from easerve_core import checks
from easerve_core.deployment import Deployment
from easerve_core.plan import DEFAULT_PRESET, RunPlan, replan
from easerve_core.presets import PRESETS
from easerve_core.profile import ParallelProfile, StageProfile
from easerve_core.request import Request
from easerve_core.slo import goodput_rps
from easerve_core.workload import generate
from sim.engine import simulate
from sim.options import NO_RECORDING, SimOptions

#: requests simulated per trial unless told otherwise
DEFAULT_NUM_REQUESTS = 250


@dataclass(frozen=True, slots=True, kw_only=True)
class SimEvaluator:
    """Simulate one deployment on fixed requests; return its goodput (req/s)."""

    plan: RunPlan
    profile: StageProfile | ParallelProfile
    options: SimOptions = field(default_factory=lambda: SimOptions(record=NO_RECORDING))
    #: further request streams; the goodput is the mean over all of them
    more_requests: tuple[tuple[Request, ...], ...] = ()
    #: the preset every deployment runs under (:data:`easerve_core.presets.PRESETS`)
    preset: str = DEFAULT_PRESET

    def __post_init__(self) -> None:
        checks.one_of("preset", self.preset, tuple(PRESETS))
        if not self.plan.requests:
            raise ValueError("requests must not be empty")
        if self.plan.slo is None:
            raise ValueError("the plan has no SLO to judge goodput by")

    def __call__(self, deployment: Deployment) -> float:
        assert self.plan.slo is not None
        streams = (self.plan.requests, *self.more_requests)
        total = 0.0
        for requests in streams:
            trial = replan(self.plan, self.profile, deployment=deployment, preset=self.preset,
                           requests=requests)
            result = simulate(trial, self.profile, options=self.options)
            total += goodput_rps(result.records, self.plan.slo)
        return total / len(streams)


def make_evaluator(plan: RunPlan, profile: StageProfile | ParallelProfile, *, rate_hz: float | None = None,
                   num_requests: int = DEFAULT_NUM_REQUESTS, options: SimOptions | None = None,
                   num_samples: int = 1, preset: str = DEFAULT_PRESET) -> SimEvaluator:
    """An evaluator for the plan's workload (at ``rate_hz`` if given), ``num_requests`` long.

    The streams are drawn with the plan's seed (``seed``, ``seed + 1``, ...);
    the plan's SLO judges them. A trace workload keeps its own requests
    (time-scaled to ``rate_hz``) and ignores ``num_samples``. Every
    deployment runs under ``preset`` (a baseline's mechanics; default EAServe's).
    """
    if plan.workload is None:
        raise ValueError("the plan has no workload to draw request streams from")
    num_samples = checks.integer("num_samples", num_samples, minimum=1)
    spec = plan.workload if rate_hz is None else plan.workload.with_rate(rate_hz)
    if spec.trace is None:
        spec = replace(spec, num_requests=checks.integer("num_requests", num_requests, minimum=1))
    seed = plan.seed
    requests = tuple(generate(spec, np.random.default_rng(seed)))
    more: tuple[tuple[Request, ...], ...] = ()
    if spec.trace is None:
        more = tuple(tuple(generate(spec, np.random.default_rng(seed + k)))
                     for k in range(1, num_samples))
    opts = replace(options or SimOptions(), record=NO_RECORDING)
    base = replace(replan(plan, profile, requests=requests), workload=spec)
    return SimEvaluator(plan=base, profile=profile, options=opts, more_requests=more, preset=preset)
