"""Fitted profiles: a small parametric latency model fitted to measured samples.

The live profiler (or anyone) writes a samples file; :func:`fit_samples` fits
one model per stage with ``scipy.optimize.least_squares`` on relative error and
returns a :class:`FittedProfile` with its per-stage fit error (RMS relative
error). The forms mirror the analytic roofline (docs/profiles.md):

- encode:  ``fixed + per_item*n + per_token*T / min(s, min(1, T/fill_tokens))``
- prefill: ``fixed + (per_token*T + per_token2*sum(n^2)) / min(s, min(1, T/fill_tokens))``
- decode:  ``fixed + per_seq*b + per_context_token*context``

where T is the batch's tokens, n the items or sequences, s the SM share. A
batch smaller than ``fill_tokens`` cannot fill the GPU, so it costs a constant
and loses nothing at a share above its fill.

``share_steps`` (0: continuous) says the worker can only be split into that
many equal parts: a share becomes ``max(1, min(n, round(s*n))) / n`` before
the model sees it, as the live CPU backend turns a share into a thread count
out of n (docs/calibration.md; 1 = one thread, which no share can split).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from easerve_core import checks
from runtime.files import read_json

SAMPLES_FORMAT = "easerve.samples"
SAMPLES_VERSION = 1
ENCODE_KEYS = ("fixed_s", "per_item_s", "per_token_s", "fill_tokens")
PREFILL_KEYS = ("fixed_s", "per_token_s", "per_token2_s", "fill_tokens")
DECODE_KEYS = ("fixed_s", "per_seq_s", "per_context_token_s")


def _slowdown(tokens: np.ndarray, share: np.ndarray, fill_tokens: float) -> np.ndarray:
    return 1.0 / np.minimum(share, np.minimum(1.0, tokens / max(fill_tokens, 1e-9)))


def encode_model(x: Sequence[float], n: np.ndarray, t: np.ndarray, s: np.ndarray) -> np.ndarray:
    fixed, per_item, per_token, fill = x
    return fixed + per_item * n + per_token * t * _slowdown(t, s, fill)


def prefill_model(x: Sequence[float], t: np.ndarray, t2: np.ndarray, s: np.ndarray) -> np.ndarray:
    fixed, per_token, per_token2, fill = x
    return fixed + (per_token * t + per_token2 * t2) * _slowdown(t, s, fill)


def decode_model(x: Sequence[float], b: np.ndarray, c: np.ndarray) -> np.ndarray:
    fixed, per_seq, per_ctx = x
    return fixed + per_seq * b + per_ctx * c



def _sizes(name: str, values: Sequence[int]) -> np.ndarray:
    """``values`` as floats, refused unless every one is >= 1 (and there is at least one)."""
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0 or (arr < 1).any():
        raise ValueError(f"{name} must be integers >= 1, got {list(values)!r}")
    return arr

@dataclass(frozen=True, slots=True, kw_only=True)
class FittedProfile:
    """A :class:`~easerve_core.profile.StageProfile` of one worker from fitted coefficients."""

    encode: Mapping[str, float]
    prefill: Mapping[str, float]
    decode: Mapping[str, float]
    embed_bytes_per_token: int
    kv_bytes_per_token: int
    share_steps: int = 0

    def __post_init__(self) -> None:
        for stage, keys in (("encode", ENCODE_KEYS), ("prefill", PREFILL_KEYS), ("decode", DECODE_KEYS)):
            coeffs = getattr(self, stage)
            missing = [k for k in keys if k not in coeffs]
            if missing:
                raise ValueError(f"fitted profile {stage}: missing coefficient(s) {', '.join(missing)}")
            for k in keys:
                v = coeffs[k]
                if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                    raise ValueError(f"fitted profile {stage}.{k} must be a number >= 0, got {v!r}")
            object.__setattr__(self, stage, {k: float(coeffs[k]) for k in keys})
        for name in ("embed_bytes_per_token", "kv_bytes_per_token", "share_steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"fitted profile {name} must be an integer >= 0, got {v!r}")

    def encode_s(self, mm_tokens_per_item: Sequence[int], sm_share: float = 1.0) -> float:
        items = _sizes("mm_tokens_per_item", mm_tokens_per_item)
        x = [self.encode[k] for k in ENCODE_KEYS]
        share = np.array([self.effective_share(sm_share)])
        return float(encode_model(x, np.array([items.size]), np.array([items.sum()]), share)[0])

    def prefill_s(self, seq_lens: Sequence[int], sm_share: float = 1.0) -> float:
        lens = _sizes("seq_lens", seq_lens)
        x, share = [self.prefill[k] for k in PREFILL_KEYS], np.array([self.effective_share(sm_share)])
        return float(prefill_model(x, np.array([lens.sum()]), np.array([(lens**2).sum()]), share)[0])

    def effective_share(self, sm_share: float) -> float:
        """The share the worker really grants (``share_steps``; see the module docstring)."""
        share = _share(sm_share)
        n = self.share_steps
        return share if n == 0 else max(1, min(n, round(share * n))) / n

    def decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        if batch_size < 1 or context_tokens < 0:
            raise ValueError(f"batch_size must be >= 1 and context_tokens >= 0, got "
                             f"{batch_size!r}, {context_tokens!r}")
        x = [self.decode[k] for k in DECODE_KEYS]
        return float(decode_model(x, np.array([batch_size]), np.array([context_tokens]))[0])

    def embed_bytes(self, mm_tokens: int) -> int:
        return int(mm_tokens) * self.embed_bytes_per_token

    def kv_bytes(self, num_tokens: int) -> int:
        return int(num_tokens) * self.kv_bytes_per_token

    def to_params(self) -> dict[str, Any]:
        return {"encode": dict(self.encode), "prefill": dict(self.prefill),
                "decode": dict(self.decode), "embed_bytes_per_token": self.embed_bytes_per_token,
                "kv_bytes_per_token": self.kv_bytes_per_token, "share_steps": self.share_steps}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> FittedProfile:
        for key in ("encode", "prefill", "decode", "embed_bytes_per_token", "kv_bytes_per_token"):
            if key not in params:
                raise ValueError(f"fitted profile params: missing field {key!r}")
        return cls(**{k: params[k] for k in ("encode", "prefill", "decode",
                                             "embed_bytes_per_token", "kv_bytes_per_token")},
                   share_steps=params.get("share_steps", 0))


def _share(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ValueError(f"sm_share must be in (0, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class FitResult:
    profile: FittedProfile
    fit_error: dict[str, float]  # RMS relative error per stage
    num_samples: dict[str, int]


def _fit(model: Callable[..., np.ndarray], args: tuple[np.ndarray, ...], y: np.ndarray,
         starts: list[list[float]]) -> tuple[np.ndarray, float]:
    """Best of several ``least_squares`` runs on relative residuals."""
    from scipy.optimize import least_squares  # here: scipy.optimize takes 0.4 s to import, and
    # every command imports this package; only a fit needs it

    best_x, best_err = np.asarray(starts[0]), math.inf
    for x0 in starts:
        scale = np.maximum(np.abs(x0), 1e-12)

        def residual(z: np.ndarray, scale: np.ndarray = scale) -> np.ndarray:
            return model(z * scale, *args) / y - 1.0

        res = least_squares(residual, np.ones(len(x0)), bounds=(0.0, np.inf), method="trf",
                            x_scale="jac")
        err = float(np.sqrt(np.mean(res.fun**2)))
        if err < best_err:
            best_x, best_err = res.x * scale, err
    return best_x, best_err


#: each stage's fields besides ``latency_s``: ``items`` a non-empty list of integers >= 1, ``count``
#: an integer >= 1, ``tokens`` an integer >= 0
_FIELDS = {"encode": (("mm_tokens_per_item", "items"),), "prefill": (("seq_lens", "items"),),
           "decode": (("batch_size", "count"), ("context_tokens", "tokens"))}


def _rows(samples: Mapping[str, Any], stage: str) -> list[dict[str, Any]]:
    """A stage's samples, each field checked (a bad one named by its row) and ``sm_share`` filled."""
    rows = samples.get(stage)
    if not isinstance(rows, list) or len(rows) < 4:
        raise ValueError(f"samples: stage {stage!r} needs a list of at least 4 samples")
    out = []
    for i, row in enumerate(rows):
        where = f"samples: {stage}[{i}]"
        if not isinstance(row, Mapping):
            raise ValueError(f"{where} must be an object, got {row!r}")
        missing = [k for k, _ in (*_FIELDS[stage], ("latency_s", "")) if k not in row]
        if missing:
            raise ValueError(f"{where} lacks {', '.join(missing)}")
        clean: dict[str, Any] = {"latency_s": checks.positive(f"{where}.latency_s", row["latency_s"])}
        for key, kind in _FIELDS[stage]:
            value = row[key]
            if kind != "items":
                clean[key] = checks.integer(f"{where}.{key}", value, minimum=1 if kind == "count" else 0)
            elif not isinstance(value, list) or not value:
                raise ValueError(f"{where}.{key} must be a non-empty list of integers >= 1, got {value!r}")
            else:
                clean[key] = [checks.integer(f"{where}.{key}[{j}]", v, minimum=1)
                              for j, v in enumerate(value)]
        share = checks.finite(f"{where}.sm_share", row.get("sm_share", 1.0))
        if not 0 < share <= 1:
            raise ValueError(f"{where}.sm_share must be in (0, 1], got {row.get('sm_share')!r}")
        clean["sm_share"] = share
        out.append(clean)
    return out


def _fill_starts(tokens: np.ndarray, first: list[float]) -> list[list[float]]:
    return [[*first[:-1], float(q)] for q in np.quantile(tokens, [0.05, 0.25, 0.5, 0.75, 0.95])]


def _quantise(shares: np.ndarray, steps: int) -> np.ndarray:
    return shares if steps == 0 else np.maximum(1, np.minimum(steps, np.round(shares * steps))) / steps


def fit_samples(samples: Mapping[str, Any]) -> FitResult:
    """Fit all three stages from a samples mapping (see :func:`load_samples`)."""
    steps = checks.integer("samples: share_steps", samples.get("share_steps", 0), minimum=0)
    sizes = {key: checks.integer(f"samples: {key}", samples[key], minimum=0)
             for key in ("embed_bytes_per_token", "kv_bytes_per_token")}
    enc = _rows(samples, "encode")
    n = np.array([len(r["mm_tokens_per_item"]) for r in enc], float)
    t = np.array([sum(r["mm_tokens_per_item"]) for r in enc], float)
    s = _quantise(np.array([r["sm_share"] for r in enc]), steps)
    y = np.array([r["latency_s"] for r in enc], float)
    guess = [y.min() / 2, y.min() / 4, float(np.median(y / t)), 1.0]
    x_enc, e_enc = _fit(encode_model, (n, t, s), y, _fill_starts(t, guess))

    pre = _rows(samples, "prefill")
    t = np.array([sum(r["seq_lens"]) for r in pre], float)
    t2 = np.array([sum(v * v for v in r["seq_lens"]) for r in pre], float)
    s = _quantise(np.array([r["sm_share"] for r in pre]), steps)
    y = np.array([r["latency_s"] for r in pre], float)
    guess = [y.min() / 2, float(np.median(y / t)), float(np.median(y / t2)) * 0.1, 1.0]
    x_pre, e_pre = _fit(prefill_model, (t, t2, s), y, _fill_starts(t, guess))

    dec = _rows(samples, "decode")
    b = np.array([r["batch_size"] for r in dec], float)
    c = np.array([r["context_tokens"] for r in dec], float)
    y = np.array([r["latency_s"] for r in dec], float)
    guess = [y.min(), float(np.median(y / b)) * 0.01, float(np.median(y / np.maximum(c, 1))) * 0.01]
    x_dec, e_dec = _fit(decode_model, (b, c), y, [guess])

    profile = FittedProfile(
        encode=dict(zip(ENCODE_KEYS, map(float, x_enc), strict=True)),
        prefill=dict(zip(PREFILL_KEYS, map(float, x_pre), strict=True)),
        decode=dict(zip(DECODE_KEYS, map(float, x_dec), strict=True)),
        **sizes,
        share_steps=steps,
    )
    return FitResult(profile, {"encode": e_enc, "prefill": e_pre, "decode": e_dec},
                     {"encode": len(enc), "prefill": len(pre), "decode": len(dec)})


def load_samples(path: str | Path) -> dict[str, Any]:
    """Read a samples file: format/version tag, model, gpu, tp, byte sizes, per-stage rows."""
    path = Path(path)
    data = read_json(path, what="samples")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: samples must be a JSON object")
    if data.get("format") != SAMPLES_FORMAT or data.get("version") != SAMPLES_VERSION:
        raise ValueError(f"{path}: expected format {SAMPLES_FORMAT!r} version {SAMPLES_VERSION}, got "
                         f"{data.get('format')!r} version {data.get('version')!r}")
    for key in ("model", "gpu", "tp", "embed_bytes_per_token", "kv_bytes_per_token"):
        if key not in data:
            raise ValueError(f"{path}: missing field {key!r}")
    for key in ("model", "gpu"):  # written into the profile, which a run then names
        if not isinstance(data[key], str) or not data[key]:
            raise ValueError(f"{path}: {key} must be a name, got {data[key]!r}")
    checks.integer(f"{path}: tp", data["tp"], minimum=1)
    typical = data.get("typical_mm_tokens_per_item")
    if typical is not None:
        if not isinstance(typical, list) or not typical:
            raise ValueError(f"{path}: typical_mm_tokens_per_item must be a non-empty list, got {typical!r}")
        for i, tokens in enumerate(typical):
            checks.integer(f"{path}: typical_mm_tokens_per_item[{i}]", tokens, minimum=1)
    return data
