"""The simulator as a HAS evaluator: a deployment in, goodput at the target rate out.

:func:`make_evaluator` draws the target workload once (seeded) and returns a
:class:`SimEvaluator`, a picklable callable that simulates every deployment
on those same requests and returns its goodput (requests/s meeting the SLO,
``easerve_core.slo.goodput_rps``); with ``num_samples`` > 1 it draws that many
request streams (seeds ``seed``, ``seed + 1``, ...) and returns the mean, so a
deployment near a capacity cliff is not judged on one lucky stream. The same
requests for every trial keep the comparison between deployments free of
workload noise. A stream is sized in time by :mod:`easerve_core.trial_length`
(at least ``trial_s`` seconds of arrivals and the SLO's growth horizon)
unless ``num_requests`` is given.

For HAS's ladder (:mod:`easerve_core.has.ladder`) the evaluator also gives
a :class:`~easerve_core.has.ladder.Verdict` on the first part of each stream
(:meth:`SimEvaluator.verdict`: goodput, attainment and whether the queue was
still growing, :mod:`easerve_core.stability`), and on a new, longer stream
(:meth:`SimEvaluator.recheck`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from easerve_core import checks
from easerve_core.deployment import Deployment
from easerve_core.has.ladder import Verdict
from easerve_core.has.recheck import recheck_seed
from easerve_core.plan import DEFAULT_PRESET, RunPlan, replan
from easerve_core.presets import PRESETS
from easerve_core.profile import ParallelProfile, StageProfile
from easerve_core.request import Request
from easerve_core.slo import goodput_rps
from easerve_core.stability import assess
from easerve_core.trial_length import DEFAULT_TRIAL_LENGTH, TrialLength
from easerve_core.workload import generate
from sim.engine import simulate
from sim.options import NO_RECORDING, SimOptions, options_for

#: the fewest requests a rung's stream holds (its stability tests need a few chunks of ten)
MIN_RUNG_REQUESTS = 50


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
    #: the fewest requests :meth:`verdict` judges on a stream
    min_rung_requests: int = MIN_RUNG_REQUESTS

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

    def _judge(self, deployment: Deployment, requests: Sequence[Request]) -> Verdict:
        assert self.plan.slo is not None
        trial = replan(self.plan, self.profile, deployment=deployment, preset=self.preset,
                       requests=tuple(requests))
        records = simulate(trial, self.profile, options=self.options).records
        found = assess(records, self.plan.slo)
        span = requests[-1].arrival_s - requests[0].arrival_s
        return Verdict(goodput_rps=goodput_rps(records, self.plan.slo), attainment=found.attainment,
                       unstable=found.unstable, offered_rps=len(requests) / span if span > 0 else 0.0,
                       num_requests=len(requests), reason=found.reason)

    def verdict(self, deployment: Deployment, *, fraction: float = 1.0) -> Verdict:
        """The deployment on the first ``fraction`` of each stream (at least ``min_rung_requests``)."""
        checks.fraction("fraction", fraction)
        verdicts = []
        for requests in (self.plan.requests, *self.more_requests):
            n = min(len(requests), max(self.min_rung_requests, math.ceil(fraction * len(requests))))
            verdicts.append(self._judge(deployment, requests[:n]))
        return Verdict.mean(verdicts)

    @property
    def distinct_long_streams(self) -> int | None:
        """One for a trace (its recheck replays it), else as many as asked."""
        spec = self.plan.workload
        return 1 if spec is not None and spec.trace is not None else None

    def recheck(self, deployment: Deployment, *, factor: float, index: int) -> Verdict:
        """The deployment on the ``index``-th long stream, ``factor`` times as long as a trial's.

        Its seed is :func:`~easerve_core.has.recheck.recheck_seed` of the plan's
        seed: the first long stream is the one ``easerve sim`` draws for the
        config at that length.
        A trace workload has no longer stream: its recheck replays the trace.
        """
        spec = self.plan.workload
        assert spec is not None
        if spec.trace is not None:
            return self._judge(deployment, self.plan.requests)
        n = math.ceil(checks.positive("factor", factor) * len(self.plan.requests))
        seed = recheck_seed(self.plan.seed, checks.integer("index", index, minimum=0))
        requests = generate(replace(spec, num_requests=n), np.random.default_rng(seed))
        return self._judge(deployment, requests)


def stream_requests(plan: RunPlan, rate_hz: float, length: TrialLength = DEFAULT_TRIAL_LENGTH) -> int:
    """Requests in one of the plan's trial streams at ``rate_hz`` (:mod:`easerve_core.trial_length`)."""
    return length.requests_at(rate_hz, plan.slo.ttft_s if plan.slo is not None else None)


def make_evaluator(plan: RunPlan, profile: StageProfile | ParallelProfile, *, rate_hz: float | None = None,
                   num_requests: int | None = None, length: TrialLength = DEFAULT_TRIAL_LENGTH,
                   options: SimOptions | None = None, num_samples: int = 1,
                   preset: str = DEFAULT_PRESET) -> SimEvaluator:
    """An evaluator for the plan's workload (at ``rate_hz`` if given).

    Each stream holds ``num_requests`` requests, or, by default, as many as
    ``length`` asks at the rate and the plan's SLO (:func:`stream_requests`).
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
        n = stream_requests(plan, spec.mean_rate_hz, length) if num_requests is None else num_requests
        spec = replace(spec, num_requests=checks.integer("num_requests", n, minimum=1))
    seed = plan.seed
    requests = tuple(generate(spec, np.random.default_rng(seed)))
    more: tuple[tuple[Request, ...], ...] = ()
    if spec.trace is None:
        more = tuple(tuple(generate(spec, np.random.default_rng(seed + k)))
                     for k in range(1, num_samples))
    opts = replace(options or options_for(plan), record=NO_RECORDING)
    base = replace(replan(plan, profile, requests=requests), workload=spec)
    return SimEvaluator(plan=base, profile=profile, options=opts, more_requests=more, preset=preset)
