"""From measured points to a fitted, versioned profile: samples, held-out check, SM-share table.

A *point* is one measured configuration of one stage (a row of
``live.profiling.POINT_COLUMNS``: stage, batch size, item tokens, sequence
length, context, share, latency median / min / spread). :func:`to_samples`
turns the points the stage fit uses into the ``easerve.samples`` mapping
that :func:`calibration.fit_samples` reads; :func:`held_out_error` fits on a
seeded 75% of each stage's points and predicts the rest;
:func:`share_table` builds the :class:`SMShareTable` from the encode points
measured at the five share levels; :func:`calibrated_doc` writes it all as
one ``fitted`` :class:`ProfileDoc` with the host model, the spreads and the
errors.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from calibration.fit import FittedProfile, fit_samples
from calibration.loop.host import HostModel
from easerve_core.profile import ProfileDoc
from easerve_core.sm_share import SMShareTable

STAGES = ("encode", "prefill", "decode")
#: fraction of each stage's points held out when checking the fit
HELD_OUT_FRAC = 0.25

#: threads of a live CPU worker (``[live] num_threads``): one, which no share can split
CPU_SHARE_STEPS = 1


def to_samples(points: Sequence[Mapping[str, Any]], *, model: str, gpu: str, embed_bytes_per_token: int,
               kv_bytes_per_token: int, share_steps: int, source: str) -> dict[str, Any]:
    """The samples mapping of ``calibration.fit`` from measured points."""
    out: dict[str, Any] = {"format": "easerve.samples", "version": 1, "model": model, "gpu": gpu, "tp": 1,
                           "embed_bytes_per_token": embed_bytes_per_token,
                           "kv_bytes_per_token": kv_bytes_per_token, "share_steps": share_steps,
                           "source": source, "encode": [], "prefill": [], "decode": []}
    for p in points:
        stage, lat = p["stage"], float(p["latency_s"])
        if stage == "encode":
            out["encode"].append({"mm_tokens_per_item": [int(v) for v in p["items"]],
                                  "sm_share": float(p["sm_share"]), "latency_s": lat})
        elif stage == "prefill":
            out["prefill"].append({"seq_lens": [int(p["seq_len"])], "sm_share": float(p["sm_share"]),
                                   "latency_s": lat})
        elif stage == "decode":
            out["decode"].append({"batch_size": int(p["batch_size"]),
                                  "context_tokens": int(p["context_tokens"]), "latency_s": lat})
        else:
            raise ValueError(f"point stage must be one of {', '.join(STAGES)}, got {stage!r}")
    return out


def predict(profile: FittedProfile, stage: str, row: Mapping[str, Any]) -> float:
    """The profile's latency for one samples row of ``stage``."""
    if stage == "encode":
        return profile.encode_s(row["mm_tokens_per_item"], row.get("sm_share", 1.0))
    if stage == "prefill":
        return profile.prefill_s(row["seq_lens"], row.get("sm_share", 1.0))
    return profile.decode_step_s(row["batch_size"], row["context_tokens"])


def held_out_error(samples: Mapping[str, Any], *, seed: int = 0,
                   frac: float = HELD_OUT_FRAC) -> dict[str, float]:
    """Median |relative error| on held-out rows, per stage and ``all``, fitting on the rest."""
    rng = np.random.default_rng(seed)
    train: dict[str, Any] = dict(samples)
    held: dict[str, list[Mapping[str, Any]]] = {}
    for stage in STAGES:
        rows = list(samples[stage])
        k = max(1, round(frac * len(rows)))
        if len(rows) - k < 4:
            raise ValueError(f"samples: stage {stage!r} needs at least {4 + k} rows for a held-out check")
        order = rng.permutation(len(rows))
        held[stage] = [rows[i] for i in order[:k]]
        train[stage] = [rows[i] for i in order[k:]]
    profile = fit_samples(train).profile
    errors = {stage: [abs(predict(profile, stage, r) / r["latency_s"] - 1) for r in rows]
              for stage, rows in held.items()}
    out = {stage: float(statistics.median(e)) for stage, e in errors.items()}
    out["all"] = float(statistics.median([v for e in errors.values() for v in e]))
    return out


def share_table(points: Sequence[Mapping[str, Any]], *, tolerance: float = 0.05) -> SMShareTable:
    """The SM-share table from encode points at several shares (share 1.0 needed per batch size)."""
    latency: dict[tuple[int, float], float] = {}
    for p in points:
        if p["stage"] == "encode":
            latency[(int(p["batch_size"]), float(p["sm_share"]))] = float(p["latency_s"])
    if not latency:
        raise ValueError("share_table: no encode points")
    return SMShareTable.from_measurements(latency, tolerance=tolerance)


def spread_summary(points: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per stage: median and max of the points' spread (IQR / median over the repeats)."""
    out = {}
    for stage in STAGES:
        spreads = [float(p["spread_frac"]) for p in points if p["stage"] == stage]
        if spreads:
            out[stage] = {"median": statistics.median(spreads), "max": max(spreads), "points": len(spreads)}
    return out


def calibrated_doc(*, samples: Mapping[str, Any], table: SMShareTable, host: HostModel, created: str,
                   measured: Mapping[str, Any], notes: str) -> tuple[ProfileDoc, dict[str, float]]:
    """The ``fitted`` profile document of a calibration run, and its held-out error."""
    result = fit_samples(samples)
    held = held_out_error(samples)
    params = result.profile.to_params()
    params.update(lm_tp=1, host=host.to_dict(), held_out_error=held, measured=dict(measured))
    doc = ProfileDoc(kind="fitted", model=str(samples["model"]), gpu=str(samples["gpu"]),
                     source=str(samples["source"]), created=created, params=params, sm_share_table=table,
                     fit_error=result.fit_error, notes=notes)
    return doc, held
