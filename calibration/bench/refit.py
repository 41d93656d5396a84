"""Refit a profile to a serving benchmark: the two scales end-to-end timings determine.

What is fitted (docs/calibration.md §6): ``first_token_scale`` on encode and
prefill seconds and ``decode_scale`` on decode-step seconds
(:mod:`calibration.scaled`), so that the simulator's **median** TTFT and
median TPOT on the benchmark's requests and rate match the benchmark's. The
simulator is not linear in them (queueing), so the fit iterates: simulate,
multiply each scale by benchmark/sim of its median (each step clamped to
``[1/MAX_STEP, MAX_STEP]``), until both medians are within ``TOLERANCE_FRAC``
or ``MAX_ITERATIONS`` simulations ran; the best iteration (smallest sum of
the two |relative errors|) is kept. The P99s and goodput are not fitted: they
are the check.

What is not fitted, because a benchmark cannot tell it apart: encode from
prefill (one scale for both), a fixed per-request overhead (HTTP, tokenising,
detokenising: it goes into the first-token scale), and the kernels inside a
step.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from calibration.analytic import AnalyticProfile
from calibration.bench.compare import BenchCase, metrics_of, simulate_case
from calibration.bench.readers import BenchRun
from calibration.plans import Profile, config_profile
from calibration.registry import profile_from_doc
from calibration.scaled import ScaledProfile, scaled_params
from easerve_core.config import ExperimentConfig
from easerve_core.profile import ProfileDoc

MAX_ITERATIONS = 8
#: both medians within this relative error: stop
TOLERANCE_FRAC = 0.02
#: the most one iteration multiplies a scale by (or divides it by)
MAX_STEP = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Refit:
    """The fitted scales, the simulator's records and metrics with them, and the path there."""

    first_token_scale: float
    decode_scale: float
    records: pd.DataFrame
    metrics: dict[str, float]
    history: list[dict[str, float]] = field(default_factory=list)


def _clamp(ratio: float) -> float:
    if not math.isfinite(ratio) or ratio <= 0:
        return 1.0
    return min(MAX_STEP, max(1.0 / MAX_STEP, ratio))


def _rel(sim: float, bench: float) -> float:
    return abs(sim - bench) / bench if bench else math.inf


def fit_scales(case: BenchCase, config: ExperimentConfig, base: Profile, base_doc: ProfileDoc | None, *,
               progress: Callable[[str], None] | None = None) -> Refit:
    """The scales that bring the simulator's median TTFT and TPOT to the benchmark's (module docstring)."""
    target = case.bench_metrics
    first, decode = 1.0, 1.0
    best: Refit | None = None
    history = []
    for _ in range(MAX_ITERATIONS):
        profile = ScaledProfile(base, first_token_scale=first, decode_scale=decode)
        records = simulate_case(case, config, profile, base_doc)
        m = metrics_of(records, case.slo)
        ttft_err = _rel(m["ttft_p50_s"], target["ttft_p50_s"])
        tpot_err = _rel(m["tpot_p50_s"], target["tpot_p50_s"])
        history.append({"first_token_scale": first, "decode_scale": decode,
                        "ttft_p50_rel_error": ttft_err, "tpot_p50_rel_error": tpot_err})
        if progress is not None:
            progress(f"scales {first:.3f} / {decode:.3f}: TTFT P50 off {ttft_err:.1%}, "
                     f"TPOT P50 {tpot_err:.1%}")
        if best is None or ttft_err + tpot_err < _score(best, target):
            best = Refit(first_token_scale=first, decode_scale=decode, records=records, metrics=m)
        if ttft_err <= TOLERANCE_FRAC and tpot_err <= TOLERANCE_FRAC:
            break
        first *= _clamp(target["ttft_p50_s"] / m["ttft_p50_s"])
        decode *= _clamp(target["tpot_p50_s"] / m["tpot_p50_s"])
    assert best is not None
    return Refit(first_token_scale=best.first_token_scale, decode_scale=best.decode_scale,
                 records=best.records, metrics=best.metrics, history=history)


def base_profile(config: ExperimentConfig, doc: ProfileDoc | None = None) -> tuple[Profile, ProfileDoc]:
    """The profile to refit and its document: ``doc`` (``--profile``), else the config's own.

    The config's analytic profile of a specified model has no file: its
    document is made here (the roofline's params), to embed in the refit.
    """
    if doc is not None:
        if doc.model != config.model:
            raise ValueError(f"profile is for {doc.model}, the config runs {config.model}")
        return profile_from_doc(doc), doc
    profile, own = config_profile(config)
    assert profile is not None  # required=True raises instead
    if own is None:
        if not isinstance(profile, AnalyticProfile):
            raise ValueError(f"the config's profile of {config.model} has no document to refit")
        own = ProfileDoc(kind="analytic", model=config.model, gpu=config.gpu,
                         source="analytic roofline (calibration.analytic)",
                         created=dt.date.today().isoformat(), params=profile.to_params())
    return profile, own


def _score(refit: Refit, target: dict[str, float]) -> float:
    return (_rel(refit.metrics["ttft_p50_s"], target["ttft_p50_s"])
            + _rel(refit.metrics["tpot_p50_s"], target["tpot_p50_s"]))


def refit_doc(base_doc: ProfileDoc, refit: Refit, run: BenchRun, case: BenchCase, *,
              before: dict[str, float], created: str | None = None) -> ProfileDoc:
    """The ``scaled`` profile document of ``refit`` over ``base_doc``, with what it was fitted from."""
    fit: dict[str, Any] = {
        "fitted": "median TTFT -> first_token_scale (encode, prefill); median TPOT -> decode_scale",
        "benchmark": {"tool": run.tool, "path": run.path, "requests": run.num_requests,
                      "failed": run.num_failed, "rate_hz": case.rate_hz, "burstiness": run.burstiness},
        "slo": {"ttft_s": case.slo.ttft_s, "tpot_s": case.slo.tpot_s, "tier": case.slo.tier},
        "bench": case.bench_metrics, "sim_before": before, "sim_after": refit.metrics,
        "iterations": refit.history,
    }
    params = scaled_params(base_doc.to_json_dict(), first_token_scale=refit.first_token_scale,
                           decode_scale=refit.decode_scale, fit=fit)
    return ProfileDoc(
        kind="scaled", model=base_doc.model, gpu=base_doc.gpu,
        source=f"easerve calibrate --from-bench {run.path} ({run.tool}) over {base_doc.source}",
        created=created or dt.date.today().isoformat(), params=params,
        sm_share_table=base_doc.sm_share_table,
        fit_error={"ttft_p50": abs(refit.metrics["ttft_p50_s"] / case.bench_metrics["ttft_p50_s"] - 1),
                   "tpot_p50": abs(refit.metrics["tpot_p50_s"] / case.bench_metrics["tpot_p50_s"] - 1)},
        notes="scaled: the base profile's encode and prefill x first_token_scale, decode step x "
              "decode_scale (calibration.scaled); fitted to a serving benchmark's median TTFT and TPOT",
    )
