"""The one sweep: rates x seeds x systems -> a goodput table, and how long each stream is.

A :class:`Sweep` turns (setup, deployment, rate) into one
:class:`~easerve.experiments.points.Point` per seed, each stream as long as
its :class:`StreamLength` rule says at that rate, and either maps
:func:`~easerve.experiments.points.summarise` over a round of curves on a
backend (:meth:`Sweep.rows`: one row per system, rate and seed, in that
order) or averages one deployment's goodput over its seeds in this process
(:meth:`Sweep.mean_goodput`). The stream-length rules live here, one each:

* :class:`Scale` (the evaluation's goodput sweep): ``num_requests``, or, above
  ``num_requests / min_duration_s`` req/s, ``min_duration_s`` seconds of
  arrivals (:mod:`easerve_core.trial_length` with no SLO term);
* :class:`SegmentLength` (the controller's plan tables): a stream one segment
  long, ``round(rate x segment_s)`` requests, at least 20;
* :class:`HorizonLength` (``easerve capacity``): the core's trial-length rule
  with the SLO's growth horizon.

:func:`goodput_sweep` is the evaluation's adaptive sweep on top: the grid,
then extensions above a curve still rising at its highest rate, then
refinements around each peak, each round one :meth:`Sweep.rows`. The search
for the highest rate within an SLO (bisection, a ladder of rates) is the
core's (:mod:`easerve_core.rate_search`); docs/architecture.md, "One sweep,
one capacity search", lists who calls what.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

from easerve.experiments.points import Point, summarise
from easerve.experiments.setup import Setup
from easerve_core import Deployment, checks
from easerve_core.settings import Settings, rule
from easerve_core.slo import SLO
from easerve_core.trial_length import TrialLength
from runtime.parallel import IN_PROCESS, Backend

SYSTEMS = ("easerve", "dynamo", "vllm", "fixed-batch")
#: the most requests one sweep point simulates
MAX_SWEEP_REQUESTS = 1_000_000
#: the fewest requests in a stream one segment long
MIN_SEGMENT_REQUESTS = 20


class StreamLength(Protocol):
    """How many requests a stream at a rate holds."""

    def requests_at(self, rate_hz: float) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentLength:
    """A stream one segment long: ``round(rate x segment_s)`` requests, at least ``min_requests``."""

    segment_s: float
    min_requests: int = MIN_SEGMENT_REQUESTS

    def requests_at(self, rate_hz: float) -> int:
        return max(self.min_requests, round(rate_hz * self.segment_s))


@dataclass(frozen=True, slots=True, kw_only=True)
class HorizonLength:
    """The core's trial-length rule (:class:`~easerve_core.trial_length.TrialLength`), its growth
    horizon set by the SLO's TTFT limit (None: the floor alone)."""

    length: TrialLength
    ttft_limit_s: float | None = None

    def requests_at(self, rate_hz: float) -> int:
        return self.length.requests_at(rate_hz, self.ttft_limit_s)


def _past_one(name: str, value: Any) -> Any:
    if not checks.finite(name, value) > 1.0:
        raise ValueError(f"{name} must be > 1, got {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Scale(Settings):
    """How big each simulation is (``quick`` for tests, ``full`` for the committed report)."""

    num_requests: int
    rates_hz: tuple[float, ...]
    num_seeds: int
    timeline_s: float
    #: times the goodput sweep halves the rate interval around each curve's peak
    #: (:func:`refine_rates`), so a peak between two grid rates shows
    refine_levels: int = 0
    #: at most this many times the sweep adds a rate ``extend_factor`` x a curve's highest
    #: when its best point is there (:func:`extend_rates`), so a peak is not censored by the grid
    max_extensions: int = field(default=0, metadata=rule(checks.integer, minimum=0))
    extend_factor: float = field(default=1.5, metadata=rule(_past_one))
    #: a sweep point lasts at least this long: above ``num_requests / min_duration_s`` req/s it
    #: simulates ``rate x min_duration_s`` requests (:meth:`requests_at`), so an overloaded system's
    #: queue has as long to build at a high rate as at the nominal one (0: ``num_requests`` always)
    min_duration_s: float = field(default=0.0, metadata=rule(checks.non_negative))

    def requests_at(self, rate_hz: float) -> int:
        """Requests a sweep point at ``rate_hz`` simulates (see ``min_duration_s``).

        The trial-length rule HAS and ``easerve capacity`` use
        (:mod:`easerve_core.trial_length`) with ``min_duration_s`` as its floor
        and no SLO term: a sweep point is judged at every tier at once, and the
        full scale's 250 s already covers the moderate tier's growth horizon for
        the image and audio models (168 s and 22 s; video's is 379 s).
        """
        if self.min_duration_s == 0:
            return self.num_requests
        length = TrialLength(trial_s=self.min_duration_s, growth_frac=0.0, min_requests=self.num_requests,
                             max_requests=max(self.num_requests, MAX_SWEEP_REQUESTS))
        return length.requests_at(rate_hz)

    def sweep(self) -> Sweep:
        """The sweep of this scale: seeds ``0 .. num_seeds - 1``, each stream :meth:`requests_at` long."""
        return Sweep(length=self, seeds=tuple(range(self.num_seeds)))


#: the durations are the request counts at the nominal 2 req/s (75 s and 250 s)
QUICK = Scale(num_requests=150, rates_hz=(0.5, 1.0, 2.0, 3.0, 5.0), num_seeds=1, timeline_s=600.0,
              refine_levels=1, max_extensions=4, min_duration_s=75.0)
FULL = Scale(num_requests=500, rates_hz=(0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0), num_seeds=3,
             timeline_s=1200.0, refine_levels=2, max_extensions=4, min_duration_s=250.0)


DeploymentFor = Callable[[str, str, float], Deployment]
#: told every (modality, system, rate) of a sweep round before ``deployment_for`` is asked for them
Prepare = Callable[[Sequence[tuple[str, str, float]]], None]
#: a curve of a sweep: (modality, system)
Curve = tuple[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Sweep:
    """Rates x seeds x systems (see the module docstring): each (deployment, rate) runs once per
    seed of ``seeds``, on a stream ``length`` long at that rate; ``keep_hint``: a deployment's own
    rate hint is kept (:func:`~easerve.experiments.setup.plan_of`)."""

    length: StreamLength
    seeds: tuple[int, ...] = (0,)
    keep_hint: bool = False

    def points(self, setup: Setup, deployment: Deployment, rate_hz: float, *, preset: str = "easerve",
               labels: Mapping[str, Any] | None = None,
               flags: Mapping[str, Any] | None = None) -> list[Point]:
        """One point per seed at ``rate_hz``; each row's labels are ``labels``, ``rate_hz``,
        ``seed``, then ``flags``."""
        n = self.length.requests_at(rate_hz)
        return [Point.of(setup, deployment, rate_hz=rate_hz, num_requests=n, seed=seed, preset=preset,
                         keep_hint=self.keep_hint,
                         labels={**(labels or {}), "rate_hz": rate_hz, "seed": seed, **(flags or {})})
                for seed in self.seeds]

    def rows(self, setups: Mapping[str, Setup], deployment_for: DeploymentFor,
             rates: Mapping[Curve, Sequence[float]], *, backend: Backend = IN_PROCESS,
             prepare: Prepare | None = None, flags: Mapping[str, Any] | None = None
             ) -> dict[Curve, list[dict[str, Any]]]:
        """One round: every curve (modality, system) at its ``rates``, each system under its own
        preset, all points in one map on ``backend``; each curve's rows rate by rate, seed by seed.

        ``prepare``, if given, first hears every (modality, system, rate) of the
        round; ``deployment_for`` is then asked once for each, in that order.
        """
        keys = [(m, s, r) for (m, s), curve_rates in rates.items() for r in curve_rates]
        if prepare is not None:
            prepare(keys)
        points = [p for m, s, r in keys
                  for p in self.points(setups[m], deployment_for(m, s, r), r, preset=s,
                                       labels={"modality": m, "system": s}, flags=flags)]
        done = iter(backend.map(summarise, points))
        return {c: [next(done) for _ in curve_rates for _ in self.seeds] for c, curve_rates in rates.items()}

    def mean_goodput(self, setup: Setup, deployment: Deployment, rate_hz: float, slo: SLO) -> float:
        """``deployment``'s goodput under ``slo`` at ``rate_hz``, the mean over the seeds' streams
        (simulated one after another in this process)."""
        return float(np.mean([p.simulate().summary(slo).goodput_rps
                              for p in self.points(setup, deployment, rate_hz)]))


def goodput_sweep(setups: Mapping[str, Setup], deployment_for: DeploymentFor, scale: Scale,
                  systems: Sequence[str] = SYSTEMS, tier: str = "moderate", *,
                  backend: Backend = IN_PROCESS, prepare: Prepare | None = None) -> pd.DataFrame:
    """Goodput, throughput and tail latency per modality, system, rate and seed.

    ``deployment_for(modality, system, rate)`` gives the deployment each
    system runs (EAServe: HAS's choice for that rate; baselines: a fixed one).
    Every curve runs the grid ``scale.rates_hz``; then, while its best point
    (median ``tier`` goodput over seeds) is its highest rate, up to
    ``scale.max_extensions`` times one rate ``scale.extend_factor`` times
    higher (rows with ``extended`` set), until goodput falls; then
    ``scale.refine_levels`` times the midpoints on either side of its peak
    (rows with ``refined`` set). Each system gets its own extension and
    refinement, by the same rule.

    The sweep runs in rounds (:meth:`Sweep.rows` of ``scale.sweep()``), every
    curve's new points of one round in one map on ``backend``; ``prepare``, if
    given, first hears every (modality, system, rate) of the round (so HAS's
    choices can be made in parallel too). The rows are those of curve after
    curve, each in the order of its rounds, rates and seeds.
    """
    col = f"goodput_{tier}_rps"
    curves = [(modality, system) for modality in setups for system in systems]
    rows: dict[Curve, list[dict[str, Any]]] = {c: [] for c in curves}
    sweep = scale.sweep()

    def sweep_round(rates: Mapping[Curve, Sequence[float]], **flags: bool) -> None:
        done = sweep.rows(setups, deployment_for, rates, backend=backend, prepare=prepare, flags=flags)
        for c in curves:
            rows[c].extend(done[c])

    def curve(c: Curve) -> tuple[list[float], list[float]]:
        med = pd.DataFrame(rows[c]).groupby("rate_hz")[col].median()
        return med.index.tolist(), med.tolist()

    sweep_round({c: scale.rates_hz for c in curves}, refined=False, extended=False)
    for _ in range(scale.max_extensions):
        more = {c: extend_rates(*curve(c), factor=scale.extend_factor) for c in curves}
        if not any(more.values()):
            break
        sweep_round(more, refined=False, extended=True)
    for _ in range(scale.refine_levels):
        sweep_round({c: refine_rates(*curve(c)) for c in curves}, refined=True, extended=False)
    return pd.DataFrame([row for c in curves for row in rows[c]])


def extend_rates(rates: Sequence[float], goodputs: Sequence[float], *, factor: float) -> list[float]:
    """``[factor x the highest rate]`` when a goodput curve's best point (the lowest, on a tie) is its
    highest rate, else ``[]``: the curve has not reached its cliff inside the rates tried."""
    if len(rates) != len(goodputs) or not rates:
        raise ValueError("rates and goodputs must be equally long and not empty")
    order = np.argsort(rates, kind="stable")
    g = np.asarray(goodputs, dtype=float)[order]
    top = float(np.asarray(rates, dtype=float)[order][-1])
    return [top * factor] if int(np.argmax(g)) == len(g) - 1 else []


def refine_rates(rates: Sequence[float], goodputs: Sequence[float]) -> list[float]:
    """The rates to try next around a goodput curve's peak.

    The midpoints between the best rate (the lowest, on a tie) and its
    neighbours in ``rates``, leaving out any already there: bisecting the
    bracket the peak lies in. A peak at the grid's edge is refined inward only.
    """
    if len(rates) != len(goodputs) or not rates:
        raise ValueError("rates and goodputs must be equally long and not empty")
    order = np.argsort(rates, kind="stable")
    r = np.asarray(rates, dtype=float)[order]
    g = np.asarray(goodputs, dtype=float)[order]
    best = int(np.argmax(g))
    mids = [(r[best] + r[k]) / 2 for k in (best - 1, best + 1) if 0 <= k < len(r)]
    known = set(r.tolist())
    return [float(m) for m in mids if not any(np.isclose(m, x) for x in known)]


def median_over_seeds(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    numeric = [c for c in frame.columns if c not in keys and c != "seed"
               and pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])]
    return frame.groupby(list(keys), as_index=False)[numeric].median()


def peak_goodput(sweep: pd.DataFrame, tier: str = "moderate",
                 keys: Sequence[str] = ("modality", "system")) -> pd.DataFrame:
    """Per curve (``keys``: modality and system, and e.g. the headline's ``tuning``): the best
    goodput over the rate sweep (median over seeds).

    ``censored`` is set where the best is the curve's highest rate: the curve was still rising
    where the sweep stopped (past ``Scale.max_extensions``), so its peak is a lower bound.
    """
    keys = list(keys)
    med = median_over_seeds(sweep, [*keys, "rate_hz"])
    col = f"goodput_{tier}_rps"
    idx = med.groupby(keys)[col].idxmax()
    best = med.loc[idx, [*keys, "rate_hz", col]]
    top = med.groupby(keys)["rate_hz"].transform("max")
    best["censored"] = best["rate_hz"].to_numpy() == top.loc[idx].to_numpy()
    return best.rename(columns={col: "goodput_rps", "rate_hz": "at_rate_hz"}).reset_index(drop=True)
