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

The goodput sweep, its rate extension and refinement, its scales and its peak table
live in :mod:`easerve.experiments.sweep`, the one sweep.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np
import pandas as pd

from easerve.experiments.points import Point, summarise
from easerve.experiments.setup import Arrivals, Setup, run
from easerve.experiments.sweep import median_over_seeds
from easerve_core import Deployment, SMSharing
from runtime.parallel import IN_PROCESS, Backend, run_tasks


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
