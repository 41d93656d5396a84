"""Held-out prediction, share quantisation, de-contention of live traces, decode gaps."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibration.fit import FittedProfile
from calibration.loop.host import HostModel, fit_transfer, with_overheads
from calibration.loop.refit import exclusive_times, samples_from_log, step_gap_s
from calibration.loop.samples import held_out_error, share_table, to_samples
from sim.host_effects import HostEffects

TRUE = FittedProfile(
    encode={"fixed_s": 0.002, "per_item_s": 0.015, "per_token_s": 2e-5, "fill_tokens": 1.0},
    prefill={"fixed_s": 0.0015, "per_token_s": 5e-5, "per_token2_s": 5e-8, "fill_tokens": 1.0},
    decode={"fixed_s": 0.0012, "per_seq_s": 1e-4, "per_context_token_s": 6e-7},
    embed_bytes_per_token=1024, kv_bytes_per_token=4096, share_steps=1)


def _points(noise: float, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    pts = []
    for b in (1, 2, 3, 4, 6, 8):
        for tok in (24, 48, 94):
            pts.append({"stage": "encode", "batch_size": b, "items": [tok] * b, "seq_len": 0,
                        "context_tokens": 0, "sm_share": 1.0, "latency_s": TRUE.encode_s([tok] * b)})
    for n in range(40, 240, 20):
        pts.append({"stage": "prefill", "batch_size": 1, "items": [], "seq_len": n, "context_tokens": 0,
                    "sm_share": 1.0, "latency_s": TRUE.prefill_s([n])})
    for b in (1, 2, 3, 4, 6, 8):
        for c in (48, 96, 160):
            pts.append({"stage": "decode", "batch_size": b, "items": [], "seq_len": 0,
                        "context_tokens": b * c, "sm_share": 1.0, "latency_s": TRUE.decode_step_s(b, b * c)})
    for p in pts:
        p["latency_s"] *= 1 + noise * rng.standard_normal()
    return pts


def test_held_out_points_predicted_within_ten_percent():
    samples = to_samples(_points(0.03), model="m", gpu="cpu", embed_bytes_per_token=1024,
                         kv_bytes_per_token=4096, share_steps=1, source="synthetic")
    err = held_out_error(samples, seed=0)
    assert set(err) == {"encode", "prefill", "decode", "all"}
    assert err["all"] < 0.10 and max(err.values()) < 0.10


def test_share_steps_quantise_like_the_thread_backend():
    assert TRUE.encode_s([48], 0.2) == TRUE.encode_s([48], 1.0)  # one thread: no share splits it
    two = FittedProfile.from_params({**TRUE.to_params(), "share_steps": 2})
    assert two.effective_share(0.4) == 0.5 and two.effective_share(0.8) == 1.0
    assert FittedProfile.from_params({**TRUE.to_params(), "share_steps": 0}).effective_share(0.3) == 0.3


def test_share_table_from_level_points():
    levels = {1: (1.0, 1.0, 1.0), 4: (2.0, 1.5, 1.0)}
    pts = [{"stage": "encode", "batch_size": b, "sm_share": s, "latency_s": lat}
           for b, lats in levels.items() for s, lat in zip((0.5, 0.8, 1.0), lats, strict=True)]
    assert share_table(pts).shares == {1: 0.5, 4: 1.0}


def _log(rows):
    cols = ["stage", "worker", "group", "start_s", "end_s", "batch_size", "tokens", "sm_share"]
    return pd.DataFrame(rows, columns=cols)


def test_exclusive_times_take_contention_out():
    log = _log([("prefill", 0, "prefill", 0.0, 2.0, 1, 50, 1.0),
                ("decode", 0, "decode", 1.0, 2.0, 2, 200, 1.0)])
    one_core = HostModel(effects=HostEffects(num_host_cores=1.0))
    # 0-1 alone (1 s), 1-2 shared with decode (0.5 s each)
    assert exclusive_times(log, one_core).tolist() == pytest.approx([1.5, 0.5])
    assert exclusive_times(log, None).tolist() == pytest.approx([2.0, 1.0])
    coloc = _log([("encode", 0, "encode", 0.0, 1.0, 1, 40, 1.0),
                  ("prefill", 0, "encode", 0.0, 1.0, 1, 60, 1.0)])
    host = HostModel(effects=HostEffects(num_host_cores=4.0, colocated_speed_frac=0.5))
    assert exclusive_times(coloc, host).tolist() == pytest.approx([0.5, 0.5])
    samples = samples_from_log(coloc, host)
    assert samples["encode"][0]["mm_tokens_per_item"] == [40]
    assert samples["prefill"][0]["seq_lens"] == [60]


def test_step_gap_only_between_unchanged_batches():
    log = _log([("decode", 0, "decode", 0.0, 1.0, 2, 10, 1.0), ("decode", 0, "decode", 1.1, 2.0, 2, 12, 1.0),
                ("decode", 0, "decode", 5.0, 6.0, 3, 20, 1.0)])
    assert step_gap_s(log) == pytest.approx(0.1)


def test_transfer_fit_and_decode_overhead():
    lat, bw = fit_transfer([{"bytes": 0, "latency_s": 0.001}, {"bytes": 1_000_000, "latency_s": 0.002}])
    assert lat == pytest.approx(0.001) and bw == pytest.approx(1e9)
    prof = with_overheads(TRUE, HostModel(decode_step_overhead_s=0.0002))
    assert prof.decode_step_s(1, 10) == pytest.approx(TRUE.decode_step_s(1, 10) + 0.0002)
    with pytest.raises(ValueError, match="colocated_speed_frac"):
        HostModel(effects=HostEffects(colocated_speed_frac=0.0))
