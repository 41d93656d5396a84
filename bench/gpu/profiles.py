"""Section 5: the measured grids and simple fits, as versioned profile JSON (``ProfileDoc``).

``calibration/`` has no fitting code for measured profiles yet, so each file
is a ``ProfileDoc`` of kind ``measured-grid`` (version 1 of the file format)
whose ``params`` hold the raw grids plus least-squares fits, in seconds:

* ``encode``: ``batch_sizes``, ``shares``, ``latency_s[i][j]`` for batch
  ``i`` and share ``j`` (null: not measured), ``lm_tokens_per_item``;
  ``encode_fit[share] = [a, b]`` for ``a + b * batch_size``;
* ``prefill``: full-depth (scaled) latency per ``seq_lens`` on the whole
  GPU, ``prefill_fit = [c0, c1, c2]`` for ``c0 + c1 L + c2 L^2``; and
  ``prefill_share``: at one length, latency per prefill-lane share;
* ``decode``: ``points`` of ``[batch_size, context_tokens_total, seconds]``,
  ``decode_fit = [a, b, c]`` for ``a + b B + c context``;
* ``kv_bytes_per_token`` and ``embed_bytes_per_token`` (BF16).

``sm_share_table`` is ``SMShareTable.from_measurements`` on the encode grid;
``fit_error`` is each fit's largest relative error over its points. The
evaluator for this kind belongs to calibration/ (see bench/gpu/README.md).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from easerve_core.profile import ProfileDoc, save_profile_doc
from easerve_core.sm_share import SMShareTable
from live.gpu.realsize import EncoderStage
from live.gpu.realsize_lm import LMStage

KIND = "measured-grid"


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[list[float], float]:
    """Least squares ``y ~ x @ coef``; returns coefficients and the largest relative error."""
    if len(y) < x.shape[1]:
        return [], math.nan
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    rel = np.abs(x @ coef - y) / np.maximum(np.abs(y), 1e-12)
    return [float(c) for c in coef], float(rel.max())


def encode_params(latency: Mapping[tuple[int, float], float]) -> tuple[dict[str, Any], float]:
    sizes = sorted({b for b, _ in latency})
    shares = sorted({s for _, s in latency})
    grid = [[latency.get((b, s)) for s in shares] for b in sizes]
    fits, worst = {}, 0.0
    for s in shares:
        pts = [(b, latency[(b, s)]) for b in sizes if (b, s) in latency]
        coef, err = _fit(np.array([[1.0, b] for b, _ in pts]), np.array([t for _, t in pts]))
        if coef:
            fits[f"{s:.6f}"] = coef
            worst = max(worst, err)
    return {"batch_sizes": sizes, "shares": shares, "latency_s": grid, "encode_fit": fits}, worst


def lm_params(rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], dict[str, float]]:
    pre = [r for r in rows if r["phase"] == "prefill" and r["lane"] == "full/encode"]
    pre_lens = [int(r["seq_len"]) for r in pre]
    pre_s = [float(r["scaled_ms"]) / 1e3 for r in pre]
    x = np.array([[1.0, n, float(n) ** 2] for n in pre_lens]).reshape(-1, 3)
    pfit, perr = _fit(x, np.array(pre_s))
    lvl = [r for r in rows if r["phase"] == "prefill" and r["lane"] != "full/encode"]
    dec = [r for r in rows if r["phase"] == "decode"]
    points = [[int(r["batch_size"]), int(r["context_tokens"]), float(r["scaled_ms"]) / 1e3] for r in dec]
    dfit, derr = _fit(np.array([[1.0, b, c] for b, c, _ in points]).reshape(-1, 3),
                      np.array([t for *_, t in points]))
    params = {
        "prefill": {"seq_lens": pre_lens, "latency_s": pre_s}, "prefill_fit": pfit,
        "prefill_share": {"seq_len": int(lvl[0]["seq_len"]) if lvl else None,
                          "shares": [int(r["lane_sms"]) / int(r["total_sms"]) for r in lvl],
                          "latency_s": [float(r["scaled_ms"]) / 1e3 for r in lvl]},
        "decode": {"points": points}, "decode_fit": dfit,
    }
    errors = {k: v for k, v in (("prefill", perr), ("decode", derr)) if not math.isnan(v)}
    return params, errors


def write(root: Path, *, model: str, gpu: str, enc: EncoderStage, lm: LMStage,
          latency: Mapping[tuple[int, float], float], lm_rows: Sequence[Mapping[str, Any]],
          tolerance: float, notes: str) -> Path:
    """Build and save ``root/<model>.json``; returns its path."""
    params: dict[str, Any] = {"encoder": enc.name, "lm": lm.name, "layers_built": len(lm.built_types),
                              "layers_full": lm.dims.num_layers, "lm_tokens_per_item": enc.lm_tokens_per_item,
                              "kv_bytes_per_token": lm.kv_bytes_per_token(),
                              "embed_bytes_per_token": 2 * lm.dims.hidden}
    fit_error: dict[str, float] = {}
    table = None
    if latency:
        enc_params, enc_err = encode_params(latency)
        params["encode"] = enc_params
        fit_error["encode"] = enc_err
        table = SMShareTable.from_measurements(latency, tolerance=tolerance)
    if lm_rows:
        more, errs = lm_params(lm_rows)
        params.update(more)
        fit_error.update(errs)
    doc = ProfileDoc(kind=KIND, model=model, gpu=gpu, source="measured: bench/gpu/run_device_check.py",
                     created=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), params=params,
                     sm_share_table=table, fit_error=fit_error, notes=notes)
    return save_profile_doc(doc, root / f"{model}.json")
