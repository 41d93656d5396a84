"""Section 5: one model's measurements as an ``easerve.samples`` file, for ``easerve profile fit``.

The device check does not fit anything: the fit (``calibration.fit_samples``,
scipy) runs back on the development machine (bench/gpu/README.md). This
module only rewrites what was measured into the samples format that
``calibration.load_samples`` reads (docs/profiles.md §3), without importing
``calibration`` (whose fit needs scipy):

* ``encode``: one row per measured ``(batch_size, share)``: ``batch_size``
  items of the encoder's ``lm_tokens_per_item`` LM tokens each, the share
  the lane was granted (``encode_sms / total_sms``; 1.0 on the full device),
  the median wall seconds (the encoder is built at full depth);
* ``prefill``: one sequence per row, ``sm_share`` = the lane's
  ``lane_sms / total_sms`` (the full-device lengths and the one length on
  every level's prefill lane), seconds = ``scaled_ms`` (the built layers'
  wall time plus the missing layers at their measured per-layer time);
* ``decode``: ``batch_size`` and ``context_tokens`` (all rows together,
  as lm.csv and ``live.profiling`` count it), seconds = ``scaled_ms``.

Every figure is a measured median or the per-layer scaling of one; the file
also says where it came from (``source``, ``notes``) and which item the
profile's SM-share table is to be built for (``typical_mm_tokens_per_item``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runtime.files import write_text_atomic

SAMPLES_FORMAT = "easerve.samples"  # calibration.fit.SAMPLES_FORMAT (not imported: it needs scipy)
SAMPLES_VERSION = 1
#: rows per stage that ``calibration.fit_samples`` needs
MIN_ROWS = 4


def _latency_s(value: Any, where: str) -> float:
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{where}: latency must be a finite number > 0 s, got {value!r}")
    return seconds


def encode_rows(latency: Mapping[tuple[int, float], float], lm_tokens_per_item: int) -> list[dict[str, Any]]:
    """Samples rows of the encode sweep (``(batch_size, share) -> median seconds``)."""
    if lm_tokens_per_item < 1:
        raise ValueError(f"lm_tokens_per_item must be >= 1, got {lm_tokens_per_item!r}")
    return [{"mm_tokens_per_item": [int(lm_tokens_per_item)] * int(b), "sm_share": float(share),
             "latency_s": _latency_s(t, f"encode B={b} share={share}")}
            for (b, share), t in sorted(latency.items())]


def lm_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Prefill and decode samples rows of the LM sweep (lm.csv rows, full-depth ``scaled_ms``)."""
    prefill, decode = [], []
    for r in rows:
        where = f"{r['phase']} B={r['batch_size']} n={r['seq_len']} lane={r['lane']}"
        seconds = _latency_s(float(r["scaled_ms"]) / 1e3, where)
        if r["phase"] == "prefill":
            share = int(r["lane_sms"]) / int(r["total_sms"])
            prefill.append({"seq_lens": [int(r["seq_len"])] * int(r["batch_size"]),
                            "sm_share": min(1.0, share), "latency_s": seconds})
        elif r["phase"] == "decode":
            decode.append({"batch_size": int(r["batch_size"]), "context_tokens": int(r["context_tokens"]),
                           "latency_s": seconds})
        else:
            raise ValueError(f"lm row phase must be 'prefill' or 'decode', got {r['phase']!r}")
    return prefill, decode


def to_samples(*, model: str, gpu: str, lm_tokens_per_item: int, embed_bytes_per_token: int,
               kv_bytes_per_token: int, latency: Mapping[tuple[int, float], float],
               lm: Sequence[Mapping[str, Any]], source: str, notes: str) -> dict[str, Any]:
    """The samples mapping of one model (stages not measured are empty lists)."""
    prefill, decode = lm_rows(lm)
    return {"format": SAMPLES_FORMAT, "version": SAMPLES_VERSION, "model": model, "gpu": gpu, "tp": 1,
            "embed_bytes_per_token": int(embed_bytes_per_token),
            "kv_bytes_per_token": int(kv_bytes_per_token),
            "share_steps": 0,  # granted SMs are measured per lane; the share is the real fraction
            "typical_mm_tokens_per_item": [int(lm_tokens_per_item)],
            "source": source, "notes": notes,
            "encode": encode_rows(latency, lm_tokens_per_item) if latency else [],
            "prefill": prefill, "decode": decode}


def short_stages(samples: Mapping[str, Any]) -> dict[str, int]:
    """Stages with fewer rows than the fit needs, and how many they have."""
    return {s: len(samples[s]) for s in ("encode", "prefill", "decode") if len(samples[s]) < MIN_ROWS}


def write(samples: Mapping[str, Any], path: Path) -> Path:
    """Strict JSON, written atomically (a time-out never leaves half a file)."""
    return write_text_atomic(path, json.dumps(samples, indent=1, sort_keys=True, allow_nan=False) + "\n")
