"""The evaluation's studies, each a function returning a tidy DataFrame.

Every study simulates with :func:`easerve.experiments.setup.run` on the
analytic profiles, one :class:`~easerve.experiments.points.Point` per
simulation, mapped on ``backend`` (default: this process, one after
another; :mod:`runtime.parallel`) and assembled in the points' order,
so a table does not depend on the backend or its number of workers. The
report (:mod:`easerve.experiments.report`) turns the frames into tables and
figures. A study is given the deployments it runs (EAServe's HAS choice,
or a baseline's: tuned per rate, or the example config's); each runs
under its system's preset (:mod:`easerve_core.presets`: request-at-a-time
``dynamo`` and ``fixed-batch`` keep its allocation with all prefill remote;
``vllm`` runs aggregated LM instances).

The module stays a little past 300 lines because each study is a short function over the
same point-mapping helpers and the report reads them as one list; the goodput sweep and
its rate refinement are the part to move out when issue 30's one sweep API lands.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from easerve.experiments.points import Point, summarise
from easerve.experiments.setup import Arrivals, Setup, run
from easerve_core import Deployment, SMSharing, checks
from easerve_core.settings import Settings, rule
from easerve_core.trial_length import TrialLength
from runtime.parallel import IN_PROCESS, Backend, run_tasks

SYSTEMS = ("easerve", "dynamo", "vllm", "fixed-batch")
#: the most requests one sweep point simulates
MAX_SWEEP_REQUESTS = 1_000_000


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
        rule = TrialLength(trial_s=self.min_duration_s, growth_frac=0.0, min_requests=self.num_requests,
                           max_requests=max(self.num_requests, MAX_SWEEP_REQUESTS))
        return rule.requests_at(rate_hz)


#: the durations are the request counts at the nominal 2 req/s (75 s and 250 s)
QUICK = Scale(num_requests=150, rates_hz=(0.5, 1.0, 2.0, 3.0, 5.0), num_seeds=1, timeline_s=600.0,
              refine_levels=1, max_extensions=4, min_duration_s=75.0)
FULL = Scale(num_requests=500, rates_hz=(0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0), num_seeds=3,
             timeline_s=1200.0, refine_levels=2, max_extensions=4, min_duration_s=250.0)


DeploymentFor = Callable[[str, str, float], Deployment]
#: told every (modality, system, rate) of a sweep round before ``deployment_for`` is asked for them
Prepare = Callable[[Sequence[tuple[str, str, float]]], None]


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

    The sweep runs in rounds, every curve's new points of one round in one
    map on ``backend``; ``prepare``, if given, first hears every (modality,
    system, rate) of the round (so HAS's choices can be made in parallel
    too). The rows are those of curve after curve, each in the order of its
    rounds, rates and seeds.
    """
    col = f"goodput_{tier}_rps"
    curves = [(modality, system) for modality in setups for system in systems]
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {c: [] for c in curves}

    def sweep_round(rates: Mapping[tuple[str, str], Sequence[float]], **flags: bool) -> None:
        keys = [(m, s, r) for (m, s) in curves for r in rates[(m, s)]]
        if prepare is not None:
            prepare(keys)
        points = [p for m, s, r in keys
                  for p in _curve_points(setups[m], deployment_for(m, s, r), scale, r,
                                         modality=m, system=s, flags=flags)]
        done = iter(backend.map(summarise, points))
        for c in curves:
            rows[c].extend(next(done) for _ in rates[c] for _ in range(scale.num_seeds))

    def curve(c: tuple[str, str]) -> tuple[list[float], list[float]]:
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


def _curve_points(setup: Setup, deployment: Deployment, scale: Scale, rate: float, *, modality: str,
                  system: str, flags: Mapping[str, bool]) -> list[Point]:
    """One system's points at ``rate``, seed by seed (``flags``: the round's ``refined`` / ``extended``)."""
    return [Point.of(setup, deployment, rate_hz=rate, num_requests=scale.requests_at(rate), seed=seed,
                     preset=system, labels={"modality": modality, "system": system, "rate_hz": rate,
                                            "seed": seed, **flags})
            for seed in range(scale.num_seeds)]


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


def fixed_batch_tradeoff(setup: Setup, deployment: Deployment, *, rate_hz: float,
                         num_requests: int, batches: Sequence[int] = (1, 8),
                         seed: int = 0, backend: Backend = IN_PROCESS) -> pd.DataFrame:
    """The paper's fixed-batch experiment: throughput and mean TTFT/TPOT per fixed batch."""
    points = [Point.of(setup, deployment.with_(max_encode_batch=b), rate_hz=rate_hz,
                       num_requests=num_requests, seed=seed, preset="fixed-batch" if b > 1 else "dynamo",
                       labels={"batch": b, "rate_hz": rate_hz})
              for b in batches]
    return pd.DataFrame(backend.map(summarise, points))


def burstiness(setup: Setup, deployment: Deployment, *, rate_hz: float, num_requests: int,
               cvs: Sequence[float] = (1.0, 2.0, 4.0, 8.0), num_seeds: int = 1,
               backend: Backend = IN_PROCESS) -> pd.DataFrame:
    """Gamma arrivals at one mean rate with rising CV, EAServe deployment."""
    points = [Point.of(setup, deployment, rate_hz=rate_hz, num_requests=num_requests, seed=seed,
                       arrivals=Arrivals(cv=cv), labels={"cv": cv, "burstiness": 1.0 / cv**2, "seed": seed})
              for cv in cvs for seed in range(num_seeds)]
    return median_over_seeds(pd.DataFrame(backend.map(summarise, points)), ["cv"])


def rate_shift(setup: Setup, deployment: Deployment, *, mean_rate_hz: float, num_requests: int,
               segment_s: float, bin_s: float, seed: int = 0,
               shape: Sequence[float] = (0.5, 1.5, 0.5, 1.5)) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A rate that steps down and up around the mean the deployment was chosen for.

    Returns (per-segment summary, per-time-bin TTFT and goodput of arrivals in each bin).
    """
    schedule = tuple((segment_s, mean_rate_hz * f) for f in shape)
    result = run(setup, deployment, rate_hz=mean_rate_hz, num_requests=num_requests, seed=seed,
                 arrivals=Arrivals(schedule=schedule))
    rec = result.records.copy()
    slo = setup.slos["moderate"]
    rec["ttft_s"] = rec["first_token_s"] - rec["arrival_s"]
    period = segment_s * len(shape)
    rec["segment"] = ((rec["arrival_s"] % period) // segment_s).astype(int)
    rec["offered_rate_hz"] = [mean_rate_hz * shape[s] for s in rec["segment"]]
    rec["bin_s"] = (rec["arrival_s"] // bin_s) * bin_s
    tpot = (rec["finish_s"] - rec["first_token_s"]) / (rec["output_tokens"] - 1).clip(lower=1)
    rec["meets"] = (rec["status"] == "ok") & (rec["ttft_s"] <= slo.ttft_s) & (tpot <= slo.tpot_s)
    bins = rec.groupby("bin_s", as_index=False).agg(
        arrivals=("request_id", "size"), offered_rate_hz=("offered_rate_hz", "first"),
        ttft_p50_s=("ttft_s", "median"), ttft_p99_s=("ttft_s", lambda x: np.nanpercentile(x, 99)),
        attainment=("meets", "mean"))
    segs = rec.groupby(["segment", "offered_rate_hz"], as_index=False).agg(
        requests=("request_id", "size"), ttft_p99_s=("ttft_s", lambda x: np.nanpercentile(x, 99)),
        attainment=("meets", "mean"))
    return segs, bins


def sm_ablation(setup: Setup, deployment: Deployment, *, rate_hz: float, num_requests: int,
                remote_fraction: float, num_seeds: int = 1, backend: Backend = IN_PROCESS) -> pd.DataFrame:
    """Dynamic vs static 50/50 vs time-slice sharing, same deployment and s."""
    points = [Point.of(setup, deployment.with_(sm_sharing=mode, remote_fraction=remote_fraction,
                                               static_encode_share=0.5),
                       rate_hz=rate_hz, num_requests=num_requests, seed=seed,
                       labels={"sharing": str(mode), "seed": seed})
              for mode in (SMSharing.DYNAMIC, SMSharing.STATIC, SMSharing.TIME_SLICE)
              for seed in range(num_seeds)]
    return median_over_seeds(pd.DataFrame(backend.map(summarise, points)), ["sharing"])


def encoder_utilization(setup: Setup, deployment: Deployment, *, rate_hz: float,
                        num_requests: int, bin_s: float, seed: int = 0,
                        easerve: Deployment | None = None, backend: Backend = IN_PROCESS) -> pd.DataFrame:
    """Busy SM fraction of the first encode GPU over time, per system, binned.

    The baselines run ``deployment``; EAServe runs ``easerve`` (default the same).
    """
    tasks = []
    for system in ("dynamo", "fixed-batch", "easerve"):
        dep = easerve if system == "easerve" and easerve is not None else deployment
        point = Point.of(setup, dep, rate_hz=rate_hz, num_requests=num_requests, seed=seed, preset=system)
        tasks.append(partial(_first_encode_gpu, point, bin_s))
    return pd.concat(run_tasks(backend, tasks), ignore_index=True)


def _first_encode_gpu(point: Point, bin_s: float) -> pd.DataFrame:
    util = point.simulate().utilization
    gpu0 = util[util["gpu"] == 0].sort_values("time_s")
    return _binned_step(gpu0, bin_s).assign(system=point.preset)


def _binned_step(step: pd.DataFrame, bin_s: float) -> pd.DataFrame:
    """Time-average a step function (time_s, busy_frac) over bins of ``bin_s``."""
    if step.empty:
        return pd.DataFrame({"bin_s": [], "busy_frac": []})
    t = step["time_s"].to_numpy(dtype=float)
    v = step["busy_frac"].to_numpy(dtype=float)
    if t[0] > 0:  # idle before the first change
        t, v = np.concatenate(([0.0], t)), np.concatenate(([0.0], v))
    end = float(t[-1])
    edges = np.arange(0.0, end + bin_s, bin_s)
    # integral of the step function at each edge
    cum = np.concatenate(([0.0], np.cumsum(v[:-1] * np.diff(t))))
    idx = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, len(t) - 1)
    area = cum[idx] + v[idx] * (edges - t[idx])
    busy = np.diff(area) / bin_s
    return pd.DataFrame({"bin_s": edges[:-1], "busy_frac": busy})
