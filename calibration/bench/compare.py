"""The simulator on a benchmark's requests and rate, and its errors against the benchmark.

The simulated stream is the benchmark's successful requests, in order:

* **sizes**: each request's input length as its text prompt and its output
  length, from the file; its multimodal items drawn from the config's mix
  (with the config's seed), because no tool records what the items became in
  LM tokens. genai-perf records no input lengths: those are drawn from the
  mix's prompt range too.
* **arrivals**: the recorded send times (genai-perf); otherwise the tool's
  own arrival process at its offered rate, drawn with the config's seed:
  Gamma gaps of shape ``burstiness`` (vLLM: 1 is Poisson), rescaled as
  ``vllm bench serve`` does so that the last send is at ``n / rate``; a rate
  of ``inf`` sends everything at once. A closed-loop run (``max_concurrency``
  below the request count, no send times) cannot be replayed open-loop and
  is refused.

The benchmark's own records carry the same arrivals, so TTFT and TPOT are
the tool's per request (TPOT as vLLM defines it, ``(latency - ttft) /
(output - 1)``). Throughput and goodput of the benchmark are over its recorded
``duration`` when it has one. Both sides are judged by one SLO: the
config's, computed from the base profile.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from calibration.bench.readers import BenchRun
from calibration.loop.fidelity import side_metrics
from calibration.plans import Profile
from calibration.session import Overrides, Session, compose, model_context
from easerve_core.config import ExperimentConfig
from easerve_core.profile import ProfileDoc
from easerve_core.request import Record, Request, Status, records_to_frame
from easerve_core.slo import SLO
from easerve_core.workload.arrivals import GammaArrivals
from easerve_core.workload.mixes import RequestMix

#: the fraction of a benchmark's requests whose length may fall outside the config's range
MAX_OUTSIDE_FRAC = 0.05
#: the metrics of the error table, in order
METRICS = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "goodput_rps")


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchCase:
    """What both sides share: the requests, the benchmark's records and the SLO."""

    requests: tuple[Request, ...]
    bench: pd.DataFrame
    bench_metrics: dict[str, float]
    slo: SLO
    rate_hz: float


def check_workload(run: BenchRun, mix: RequestMix) -> None:
    """Refuse a benchmark whose lengths fall outside the config's mix (saying how they differ)."""
    sides = [("output lengths", run.output_tokens, "output_tokens", mix.output_tokens)]
    if run.input_tokens is not None:
        sides.insert(0, ("input lengths", run.input_tokens, "prompt_tokens", mix.prompt_tokens))
    problems = []
    for what, values, field, (lo, hi) in sides:
        arr = np.asarray(values)
        outside = float(np.mean((arr < lo) | (arr > hi)))
        if outside > MAX_OUTSIDE_FRAC:
            problems.append(f"{what} {arr.min()}-{arr.max()} (median {np.median(arr):g}) against the "
                            f"config's {field} [{lo}, {hi}]: {outside:.0%} outside")
    if problems:
        raise ValueError(f"{run.path}: its requests do not match the config's workload: "
                         + "; ".join(problems) + " (set [workload] to the benchmark's lengths)")


def arrivals_s(run: BenchRun, rng: np.random.Generator) -> np.ndarray:
    """Send times of the run's requests (see the module docstring)."""
    n = run.num_requests
    if run.send_s is not None:
        return np.asarray(run.send_s, dtype=float)
    if run.max_concurrency is not None and run.max_concurrency < n:
        raise ValueError(f"{run.path}: run with max_concurrency={run.max_concurrency} (closed loop) and no "
                         "send times; the simulator replays open-loop arrivals: benchmark at a "
                         "--request-rate without --max-concurrency")
    if math.isinf(run.rate_hz):
        return np.zeros(n)
    times = GammaArrivals(rate_hz=run.rate_hz, cv=1.0 / math.sqrt(run.burstiness)).sample(n, rng)
    if run.tool == "vllm" and times[-1] > 0:  # vllm bench serve's rescaling: the last send at n / rate
        times = times * (n / run.rate_hz) / times[-1]
    return times


def bench_requests(run: BenchRun, mix: RequestMix, seed: int) -> list[Request]:
    """The simulated stream of ``run`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    arrivals = arrivals_s(run, rng)
    items = mix.draw_item_lists(run.num_requests, rng)
    prompts = run.input_tokens if run.input_tokens is not None else tuple(
        int(x) for x in rng.integers(mix.prompt_tokens[0], mix.prompt_tokens[1] + 1, size=run.num_requests))
    return [Request(request_id=i, arrival_s=float(arrivals[i]), modality=mix.modality,
                    prompt_tokens=int(prompts[i]), output_tokens=int(run.output_tokens[i]),
                    mm_tokens_per_item=items[i][0], encode_tokens_per_item=items[i][1])
            for i in range(run.num_requests)]


def bench_records(run: BenchRun, requests: Sequence[Request]) -> pd.DataFrame:
    """The benchmark's requests as a record frame (first token and finish from its timings)."""
    rows = []
    for req, ttft, latency in zip(requests, run.ttft_s, run.latency_s, strict=True):
        rec = Record.for_request(req)
        rec.first_token_s = req.arrival_s + ttft
        rec.finish_s = req.arrival_s + latency
        rec.status = Status.OK.value
        rows.append(rec)
    return records_to_frame(rows)


def metrics_of(frame: pd.DataFrame, slo: SLO, *, duration_s: float | None = None) -> dict[str, float]:
    """P50/P99 TTFT and TPOT, throughput and goodput; over ``duration_s`` when given."""
    med, _ = side_metrics([frame], slo)
    if duration_s:
        span = float(frame["finish_s"].max() - frame["arrival_s"].min())
        for key in ("throughput_rps", "goodput_rps"):
            med[key] = med[key] * span / duration_s
    return med


def prepare(run: BenchRun, config: ExperimentConfig, profile: Profile, doc: ProfileDoc | None) -> BenchCase:
    """The benchmark checked against the config's workload, its stream, records and SLO."""
    mix = config.workload.mix
    check_workload(run, mix)
    requests = bench_requests(run, mix, config.seed)
    _check_context(run, requests, config)
    slo = _session(config, profile, doc, requests=requests).plan.slo
    if slo is None:
        raise ValueError("the config has no SLO to judge goodput by")
    frame = bench_records(run, requests)
    span = float(requests[-1].arrival_s - requests[0].arrival_s)
    rate = run.rate_hz if math.isfinite(run.rate_hz) else (len(requests) / span if span > 0 else math.inf)
    return BenchCase(requests=tuple(requests), bench=frame, slo=slo, rate_hz=rate,
                     bench_metrics=metrics_of(frame, slo, duration_s=run.duration_s))


def _check_context(run: BenchRun, requests: Sequence[Request], config: ExperimentConfig) -> None:
    """The engine served every request within the model's context; ours must fit it too, or the
    rule that a benchmark's input lengths count text only, with the mix's items added, does not
    hold for this benchmark (the simulator would cap or refuse what the engine served)."""
    context = model_context(config)
    past = [r for r in requests if context is not None and r.input_tokens + r.output_tokens > context]
    if past:
        r = past[0]
        raise ValueError(f"{run.path}: {len(past):,} of its {len(requests):,} requests run past "
                         f"{config.model}'s context of {context:,} tokens once the mix's items are added "
                         f"to their input lengths (request {r.request_id}: {r.prompt_tokens:,} + items "
                         f"{sum(r.mm_tokens_per_item):,} + output {r.output_tokens:,}); the engine served "
                         "them, so its input lengths count the items too, or its items were smaller than "
                         "the mix's: the two are not comparable (docs/calibration.md, 6.2)")


def simulate_case(case: BenchCase, config: ExperimentConfig, profile: Profile,
                  doc: ProfileDoc | None) -> pd.DataFrame:
    """The config's deployment on the case's requests and rate, judged by its SLO: the sim's records."""
    rate = case.rate_hz if math.isfinite(case.rate_hz) else None
    session = _session(config, profile, doc, requests=case.requests, slo=case.slo, rate_hz=rate)
    return session.sim().run().records


def _session(config: ExperimentConfig, profile: Profile, doc: ProfileDoc | None, **overrides: Any) -> Session:
    """The config on ``profile`` (its document ``doc``) with the benchmark's ``overrides``."""
    return compose(config, Overrides(profile=profile, doc=doc, **overrides))


def error_rows(label: str, sim: dict[str, float], bench: dict[str, float]) -> list[dict[str, object]]:
    """One row per metric: the simulator, the benchmark and the relative error ``(sim - bench)/bench``."""
    return [{"profile": label, "metric": m, "sim": sim[m], "bench": bench[m],
             "rel_error": (sim[m] - bench[m]) / bench[m] if bench[m] else math.nan} for m in METRICS]
