"""Fitting: known coefficients come back from noisy synthetic samples."""

from __future__ import annotations

import numpy as np
import pytest

from calibration import FittedProfile, fit_samples, sm_share_table

TRUE = FittedProfile(
    encode={"fixed_s": 2e-3, "per_item_s": 1e-3, "per_token_s": 2e-6, "fill_tokens": 3000.0},
    prefill={"fixed_s": 5e-3, "per_token_s": 1.5e-4, "per_token2_s": 2e-9, "fill_tokens": 800.0},
    decode={"fixed_s": 3e-2, "per_seq_s": 2e-4, "per_context_token_s": 5e-8},
    embed_bytes_per_token=14336, kv_bytes_per_token=245760,
)


def synthetic_samples(profile: FittedProfile, rng: np.random.Generator, noise: float) -> dict:
    def jitter(v: float) -> float:
        return float(v * (1 + noise * rng.standard_normal()))

    encode = [{"mm_tokens_per_item": [tokens] * b, "sm_share": s,
               "latency_s": jitter(profile.encode_s([tokens] * b, s))}
              for tokens in (63, 500, 2928) for b in (1, 2, 4, 8, 16) for s in (0.2, 0.4, 0.6, 0.8, 1.0)]
    prefill = [{"seq_lens": [n] * k, "sm_share": s, "latency_s": jitter(profile.prefill_s([n] * k, s))}
               for n in (64, 256, 1024, 4096, 8192) for k in (1, 2) for s in (0.4, 1.0)]
    decode = [{"batch_size": b, "context_tokens": b * c,
               "latency_s": jitter(profile.decode_step_s(b, b * c))}
              for b in (1, 4, 16, 64, 128) for c in (256, 2048, 8192)]
    return {"format": "easerve.samples", "version": 1, "model": "synthetic", "gpu": "synthetic",
            "tp": 1, "embed_bytes_per_token": 14336, "kv_bytes_per_token": 245760,
            "encode": encode, "prefill": prefill, "decode": decode}


def test_fit_recovers_known_coefficients_from_noisy_samples():
    samples = synthetic_samples(TRUE, np.random.default_rng(7), noise=0.02)
    result = fit_samples(samples)
    for stage in ("encode", "prefill", "decode"):
        got, want = getattr(result.profile, stage), getattr(TRUE, stage)
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=0.2), (stage, key)
        assert 0.01 < result.fit_error[stage] < 0.03  # the 2% noise, no more
    assert result.num_samples == {"encode": 75, "prefill": 20, "decode": 15}


def test_fit_of_exact_samples_is_exact():
    result = fit_samples(synthetic_samples(TRUE, np.random.default_rng(0), noise=0.0))
    assert max(result.fit_error.values()) < 1e-3
    items = [500]
    assert result.profile.encode_s(items * 4, 0.6) == pytest.approx(TRUE.encode_s(items * 4, 0.6), rel=1e-3)


def test_fitted_profile_gives_an_sm_share_table():
    table = sm_share_table(TRUE, items=[500])
    assert table.share_for(1) < table.share_for(16) == 1.0


@pytest.mark.parametrize("mutate, match", [
    (lambda s: s.pop("decode"), "stage 'decode' needs a list"),
    (lambda s: s["encode"][0].pop("latency_s"), r"encode\[0\] lacks latency_s"),
    (lambda s: s["prefill"][1].update(latency_s=0), r"prefill\[1\].latency_s must be > 0"),
    # found by tests/core/mutation.py (kind samples): each was a TypeError
    (lambda s: s["encode"][2].update(mm_tokens_per_item=[500, None]),
     r"encode\[2\].mm_tokens_per_item\[1\] must be an integer, got None"),
    (lambda s: s["prefill"][0].update(seq_lens={}), r"prefill\[0\].seq_lens must be a non-empty list"),
    (lambda s: s["decode"][3].update(latency_s="x"), r"decode\[3\].latency_s must be a number, got 'x'"),
    (lambda s: s["decode"][3].update(batch_size=[4]), r"decode\[3\].batch_size must be an integer"),
    (lambda s: s["encode"][0].update(sm_share=None), r"encode\[0\].sm_share must be a number, got None"),
    (lambda s: s["decode"].__setitem__(1, 7), r"decode\[1\] must be an object, got 7"),
    (lambda s: s.update(kv_bytes_per_token=None), r"kv_bytes_per_token must be an integer, got None"),
])
def test_bad_samples_are_refused(mutate, match):
    samples = synthetic_samples(TRUE, np.random.default_rng(1), noise=0.0)
    mutate(samples)
    with pytest.raises(ValueError, match=match):
        fit_samples(samples)


def test_fitted_profile_validates_coefficients():
    with pytest.raises(ValueError, match="missing coefficient"):
        FittedProfile(encode={}, prefill=TRUE.prefill, decode=TRUE.decode,
                      embed_bytes_per_token=1, kv_bytes_per_token=1)
    with pytest.raises(ValueError, match=r"decode\.fixed_s must be a number >= 0"):
        FittedProfile(encode=TRUE.encode, prefill=TRUE.prefill,
                      decode={**TRUE.decode, "fixed_s": -1.0},
                      embed_bytes_per_token=1, kv_bytes_per_token=1)


@pytest.mark.parametrize("change, match", [
    ({"tp": None}, r"tp must be an integer, got None"),
    ({"tp": "x"}, r"tp must be an integer, got 'x'"),
    ({"model": {}}, r"model must be a name, got \{\}"),
    ({"gpu": None}, r"gpu must be a name, got None"),
    ({"typical_mm_tokens_per_item": [None]}, r"typical_mm_tokens_per_item\[0\] must be an integer"),
    ({"typical_mm_tokens_per_item": "x"}, r"typical_mm_tokens_per_item must be a non-empty list"),
])
def test_a_samples_files_header_is_checked(tmp_path, change, match):
    """easerve profile fit: each was an internal TypeError, int()'s message, or a profile of model
    '{}' (found by tests/core/mutation.py, kind samples)."""
    import json

    from calibration.fit import load_samples

    path = tmp_path / "s.json"
    path.write_text(json.dumps({**synthetic_samples(TRUE, np.random.default_rng(1), noise=0.0), **change}))
    with pytest.raises(ValueError, match=match):
        load_samples(path)
