"""Fidelity tables, bars, ranking (Kendall tau) and sweep specs."""

from __future__ import annotations

import pandas as pd
import pytest

from calibration.loop.fidelity import METRICS, TABLE_COLUMNS, bar_check, fidelity_rows, ranking, rel_error
from easerve.cli.validate_cmd import DEFAULT_SWEEP, parse_spec
from easerve_core import Deployment


def _table(sim_good, live_good):
    rows = []
    for i, (s, v) in enumerate(zip(sim_good, live_good, strict=True)):
        sim = {m: 1.0 for m in METRICS} | {"goodput_rps": s}
        live = {m: 1.1 for m in METRICS} | {"goodput_rps": v}
        rows += fidelity_rows(f"d{i}", sim, live, {}, 3)
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def test_table_columns_and_errors():
    table = _table([1, 2], [1, 2])
    assert list(table.columns) == TABLE_COLUMNS and set(table["metric"]) == set(METRICS)
    assert rel_error(1.0, 1.25) == pytest.approx(-0.2)
    bars = bar_check(table)
    assert bars["passes"].all()  # |1/1.1 - 1| = 9% everywhere


def test_ranking_kendall_tau_and_best():
    same = ranking(_table([1, 2, 3, 4], [1.5, 2.5, 3.5, 4.5]), "goodput_rps")
    assert same["kendall_tau"] == pytest.approx(1.0) and same["sim_best_is_live_best"]
    swapped = ranking(_table([1, 2, 4, 3], [1, 2, 3, 4]), "goodput_rps")
    assert swapped["kendall_tau"] == pytest.approx(2 / 3)
    assert swapped["live_best"] == "d3" and swapped["live_best_sim_rank"] == 2
    assert swapped["live_best_in_sim_top2"] and not swapped["sim_best_is_live_best"]


def test_sweep_specs():
    base = Deployment(prefill={"num_workers": 1, "tp": 1}, decode={"num_workers": 1, "tp": 1})
    dep = parse_spec(base, "b4-s0-time-slice-p0")
    assert (dep.max_encode_batch, dep.remote_fraction, str(dep.sm_sharing), dep.prefill.num_workers) == \
        (4, 0.0, "time-slice", 0)
    assert len({parse_spec(base, s).label() for s in DEFAULT_SWEEP}) == len(DEFAULT_SWEEP) >= 4
    with pytest.raises(ValueError, match="bad token"):
        parse_spec(base, "x9")


def test_cuda_bars_are_tighter_and_follow_the_device():
    from calibration.loop.fidelity import BARS_BY_DEVICE

    table = _table([1, 2], [1, 2])  # 9% off everywhere: inside the CPU bars, outside the GPU's
    assert bar_check(table, BARS_BY_DEVICE["cpu"])["passes"].all()
    cuda = bar_check(table, BARS_BY_DEVICE["cuda"]).set_index("metric")
    assert not cuda.loc["ttft_p50_s", "passes"] and cuda.loc["ttft_p99_s", "passes"]
    assert cuda.loc["ttft_p50_s", "bar"] == 0.05 and cuda.loc["tpot_p99_s", "bar"] == 0.10


def test_validate_device_override():
    from easerve.cli.validate_cmd import live_device, with_device
    from runtime.configs import load_experiment

    config = load_experiment("configs/small_qwen2audio_cpu.toml")
    assert live_device(config) == "cpu" and with_device(config, None) is config
    moved = with_device(config, "cuda")
    assert live_device(moved) == "cuda"
    assert moved.engine["live"]["mm_token_scale"] == config.engine["live"]["mm_token_scale"]
    assert live_device(config) == "cpu"  # the original is untouched
    with pytest.raises(ValueError, match="--device must be one of"):
        with_device(config, "tpu")
