"""Measured profiles: the interpolation rule, the aiconfigurator adapter, the profile kind and its CLI.

The tables are pure and tested on hand-made grids. The adapter reads the
installed ``aiconfigurator-core`` database (the ``measured`` extra) at test
time, nothing of it is stored here; those tests skip without the package.
"""

from __future__ import annotations

import importlib.util
import json
import math
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from calibration import aiconfigurator, load_profile
from calibration.analytic import AnalyticProfile
from calibration.efficiency import Efficiency, efficiency_dict
from calibration.measured import MeasuredProfile, model_tables
from calibration.op_prices import RooflineOps
from calibration.ops import decode_ops, encoder_ops, prefill_ops
from calibration.optables import AttentionTables, BatchTable, Curve, GemmTable
from calibration.registry import analytic_profile, measured_doc
from calibration.roofline_fit import fit_roofline, fitted_efficiency
from calibration.specs import gpu_spec, model_spec
from calibration.work import length_factor, prefill_work
from easerve.cli import main
from runtime.profiles import save_profile_doc

HAVE_DB = importlib.util.find_spec(aiconfigurator.PACKAGE) is not None
needs_db = pytest.mark.skipif(not HAVE_DB, reason="needs the measured extra (aiconfigurator-core)")
MODEL = "qwen2.5-vl-32b"


# -- the interpolation rule -------------------------------------------------------
def test_curve_is_exact_on_the_grid_a_power_law_between_flat_below_and_scaled_above():
    curve = Curve((1.0, 4.0, 16.0), (1e-5, 1e-5, 4e-5), exponent_above=2.0)
    assert curve(4.0) == 1e-5 and curve(16.0) == 4e-5
    assert curve(2.0) == pytest.approx(1e-5)  # flat between two equal points
    assert curve(8.0) == pytest.approx(2e-5)  # latency ~ size between 4 and 16: sqrt of the ratio 4
    assert curve(0.5) == 1e-5  # never faster than the smallest launch
    assert curve(32.0) == pytest.approx(4e-5 * 4)  # size**2 above


def test_curve_refuses_unsorted_sizes_and_bad_latencies():
    with pytest.raises(ValueError, match="increasing"):
        Curve((2.0, 1.0), (1.0, 1.0))
    with pytest.raises(ValueError, match="> 0"):
        Curve((1.0, 2.0), (1.0, 0.0))


def _gemm() -> GemmTable:
    return GemmTable({(n, k): Curve((1.0, 1024.0), (1e-5 * n / 64, 1e-3 * n * k / 4096))
                      for n in (64, 256) for k in (64, 256)})


def test_gemm_table_blends_the_four_surrounding_curves_and_says_none_for_a_hole():
    table = _gemm()
    assert table(1024, 64, 64) == pytest.approx(1e-3)
    # n = 128 lies half way (in log) between 64 and 256: the geometric mean
    assert table(1024, 128, 64) == pytest.approx(math.sqrt(1e-3 * 4e-3))
    assert table(1024, 512, 64) == pytest.approx(4e-3 * 2)  # linear in n above the grid
    holed = GemmTable({key: c for key, c in table.curves.items() if key != (256, 256)})
    assert holed(1024, 128, 128) is None
    assert GemmTable.from_dict(json.loads(json.dumps(table.to_dict()))) == table


def test_attention_tables_answer_a_missing_head_shape_from_the_nearest_scaled_by_heads():
    row = {64: Curve((1.0, 8.0), (1e-5, 8e-5)), 256: Curve((1.0, 8.0), (1.6e-4, 1.28e-3))}
    tables = AttentionTables({(8, 1, 128): BatchTable(row, 2.0)})
    seconds, held = tables(8, 256, (16, 2, 128))
    assert held == (8, 1, 128) and seconds == pytest.approx(2 * 1.28e-3)
    assert tables(1, 64, (8, 1, 64)) is None  # no table of that head dim
    sub = tables.subset([(16, 2, 128)])
    assert sub.aliases == {(16, 2, 128): (8, 1, 128)}
    assert AttentionTables.from_dict(json.loads(json.dumps(sub.to_dict()))) == sub


def test_ops_follow_the_roofline_work_counts():
    spec = model_spec(MODEL)
    lm = spec.lm
    ops = prefill_ops(lm, [1000, 3000], tp=2)
    qkv = next(op for op in ops if op.label == "lm.qkv")
    assert qkv.shape == (4000, (lm.q_width + 2 * lm.num_kv_heads * lm.head_dim) // 2, lm.hidden_size)
    assert qkv.count == lm.num_layers
    decode = decode_ops(lm, 16, 16 * 2048, tp=4)
    attention = next(op for op in decode if op.kind == "generation_attention")
    assert attention.shape == (16, 2048, lm.num_heads // 4, lm.num_kv_heads // 4, lm.head_dim)
    labels = {op.label for op in encoder_ops(spec, [1024])}
    assert {"vit.attention", "vit.window_attention", "vit.patch_embed", "vit.projector"} <= labels


def test_every_profile_prices_one_op():
    ops = analytic_profile(MODEL, "h200").ops()
    assert isinstance(ops, RooflineOps)
    big, small = ops.gemm_s(8192, 5120, 5120), ops.gemm_s(1, 5120, 5120)
    assert big > small > 0
    heads = (40, 8, 128)
    assert ops.attention_s("context", 1, 4096, *heads) > ops.attention_s("generation", 1, 4096, *heads)
    assert ops.allreduce_s(1 << 20, 1) == 0.0 < ops.allreduce_s(1 << 20, 2)
    with pytest.raises(ValueError, match="phase"):
        ops.attention_s("prefill", 1, 1, 1, 1, 1)


# -- the adapter and the measured profile ------------------------------------------
@pytest.fixture(scope="module")
def h200_tables():
    if not HAVE_DB:
        pytest.skip("needs the measured extra (aiconfigurator-core)")
    return aiconfigurator.load_tables("h200_sxm", "vllm")


@needs_db
def test_the_adapter_reads_grid_points_exactly(h200_tables):
    db = aiconfigurator.default_db()
    frame = pq.read_table(db / "data/h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet").to_pandas()
    row = frame[(frame.gemm_dtype == "bfloat16") & (frame.m == 2048) & (frame.n == 5120) & (frame.k == 5120)]
    assert h200_tables.gemm(2048, 5120, 5120) == pytest.approx(float(row.latency.median()) * 1e-3)
    assert "h200_sxm/vllm/0.24.0" in h200_tables.source
    assert h200_tables.allreduce(1 << 20, 8) > h200_tables.allreduce(1 << 20, 2)


@needs_db
@pytest.mark.parametrize("kwargs, match", [
    ({"system": "h200_sxm", "engine": "vllm", "db": "/nonexistent/systems"}, "does not exist"),
    ({"system": "h999", "engine": "vllm"}, "holds no system 'h999'; it holds: .*h200_sxm"),
    ({"system": "h200_sxm", "engine": "vllm", "version": "9.9"},
     "no vllm 9.9 for h200_sxm; it holds: 0.24.0"),
    ({"system": "h200_sxm", "engine": "tgi"}, "unknown engine 'tgi'; known: vllm"),
])
def test_the_adapter_refuses_what_the_database_does_not_hold(kwargs, match):
    with pytest.raises(ValueError, match=match):
        aiconfigurator.load_tables(**kwargs)


@pytest.fixture(scope="module")
def measured(h200_tables):
    return MeasuredProfile(model=model_spec(MODEL), gpu=gpu_spec("h200"),
                           tables=model_tables(h200_tables, model_spec(MODEL)))


@needs_db
def test_a_measured_profile_prices_ops_from_the_table_and_the_rest_by_the_roofline(measured, h200_tables):
    assert measured.ops().gemm_s(2048, 5120, 5120) == h200_tables.gemm(2048, 5120, 5120)
    sources = {(label, kind): source for label, kind, source in measured.op_sources(2)}
    assert sources[("lm.qkv", "gemm")] == "measured"
    assert sources[("lm.attention", "generation_attention")] == "measured"
    assert sources[("vit.window_attention", "encoder_attention")] == "measured"
    assert sources[("vit.patch_embed", "conv")] == "roofline"
    assert sources[("lm.norm", "elementwise")] == "roofline"
    worker = measured.for_tp(2)
    assert worker.prefill_s([4096]) > worker.prefill_s([512]) > 0
    assert worker.decode_step_s(64, 64 * 2048) > worker.decode_step_s(1, 2048) > 0
    assert worker.encode_s([1024], sm_share=0.5) >= worker.encode_s([1024])


@needs_db
def test_a_measured_profile_round_trips_through_its_document(measured, h200_tables, tmp_path):
    doc = measured_doc(MODEL, "h200", h200_tables, {"system": "h200_sxm"}, lm_tp=2, created="2026-12-02")
    save_profile_doc(doc, tmp_path / "p.json")
    loaded = load_profile(tmp_path / "p.json")
    assert isinstance(loaded, MeasuredProfile)
    for tp in (1, 2, 4):
        assert loaded.for_tp(tp).prefill_s([3000, 100]) == measured.for_tp(tp).prefill_s([3000, 100])
        step = (32, 32 * 1500)
        assert loaded.for_tp(tp).decode_step_s(*step) == measured.for_tp(tp).decode_step_s(*step)


@needs_db
def test_profile_build_then_show_prints_the_source_per_op(tmp_path, capsys):
    out = tmp_path / "q.json"
    assert main(["profile", "build", "--from", "aiconfigurator", "--system", "h200_sxm", "--engine", "vllm",
                 "--model", MODEL, "--out", str(out)]) == 0
    assert main(["profile", "show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "kind=measured" in text and "h200_sxm/vllm/0.24.0" in text
    assert any(line.split()[:3] == ["lm.qkv", "gemm", "measured"] for line in text.splitlines())
    assert any(line.split()[:3] == ["vit.patch_embed", "conv", "roofline"] for line in text.splitlines())


@needs_db
@pytest.mark.parametrize("extra, match", [
    (["--system", "h200_sxm", "--db", "/nonexistent/systems"],
     "database path /nonexistent/systems does not exist"),
    (["--system", "h999"], "holds no system 'h999'; it holds: "),
    (["--system", "h200_sxm", "--engine-version", "9.9"], "holds: 0.24.0"),
    (["--system", "h200_sxm", "--from", "sim"], "unknown --from 'sim'; known: aiconfigurator, vidur"),
])
def test_profile_build_refuses_bad_input_in_one_line_writing_nothing(tmp_path, capsys, extra, match):
    out = tmp_path / "bad.json"
    argv = ["profile", "build", "--from", "aiconfigurator", "--model", MODEL, "--out", str(out), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err
    assert list(tmp_path.iterdir()) == []


@needs_db
def test_sim_runs_on_a_measured_profile(tmp_path, h200_tables):
    doc = measured_doc(MODEL, "h200", h200_tables, {"system": "h200_sxm"}, lm_tp=2, created="2026-12-02")
    save_profile_doc(doc, tmp_path / "p.json")
    config = (Path(__file__).resolve().parents[2] / "configs" / "qwen25vl32b_rtx6000ada.toml").read_text()
    config = config.replace('gpu = "rtx6000ada"', 'gpu = "h200"')
    config = "\n".join(line if not line.startswith("num_requests") else "num_requests = 60"
                       for line in config.splitlines())
    (tmp_path / "c.toml").write_text(config + '\n[profile]\npath = "p.json"\n')
    assert main(["sim", str(tmp_path / "c.toml"), "--out", str(tmp_path / "run"), "--no-plots"]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["num_ok"] == 60 and summary["ttft_p50_s"] > 0


@needs_db
def test_the_fitted_roofline_beats_the_hand_set_one_and_the_committed_constants_load(h200_tables):
    fit = fit_roofline("h200", h200_tables)
    before, after = fit.before.stats(), fit.after.stats()
    for cls in ("LM GEMM", "whole prefill", "whole decode step"):
        assert after[cls][0] < before[cls][0]
    assert after["LM GEMM"][0] <= 0.08 and after["whole prefill"][0] <= 0.05
    assert after["context attention"][0] <= 0.12 and after["generation attention"][0] <= 0.12
    committed = fitted_efficiency("h200")
    assert committed is not None and committed.price_elementwise_ops
    assert committed.attention_half_len_tokens == pytest.approx(fit.efficiency.attention_half_len_tokens,
                                                                rel=0.05)
    assert committed.gemm_efficiency_frac == pytest.approx(fit.efficiency.gemm_efficiency_frac, rel=0.05)
    assert fitted_efficiency("rtx6000ada") is None  # outside the database: the documented constants


# -- the length-dependent attention efficiency -------------------------------------
def test_attention_efficiency_grows_with_the_sequence_length_as_documented():
    gpu = gpu_spec("h200")
    flat = Efficiency(attention_efficiency_frac=0.6, kernel_floor_s=0.0)
    half = replace(flat, attention_half_len_tokens=2000.0)
    a, b = RooflineOps(gpu, flat), RooflineOps(gpu, half)
    for phase in ("context", "encoder"):
        for length in (4096, 8192, 32768):  # large enough to fill the GPU: eff = 0.6 * L / (L + 2000)
            ratio = b.attention_s(phase, 4, length, 40, 8, 128) / a.attention_s(phase, 4, length, 40, 8, 128)
            assert ratio == pytest.approx((length + 2000) / length)
    # decode attention is not a sequence of L queries: its price keeps the top efficiency
    decode = ("generation", 32, 4096, 40, 8, 128)
    assert b.attention_s(*decode) == a.attention_s(*decode)
    assert length_factor(1000, 0.0) == 1.0 and length_factor(1000, 1000.0) == 2.0


def test_the_analytic_stages_follow_the_same_rule_and_leave_it_out_when_off():
    spec, gpu = model_spec(MODEL), gpu_spec("h200")
    flat = Efficiency(attention_efficiency_frac=0.6, step_overhead_s=0.0, layer_launch_s=0.0)
    half = replace(flat, attention_half_len_tokens=2000.0)
    assert "attention_half_len_tokens" not in efficiency_dict(flat)  # committed profiles stay as they were
    assert efficiency_dict(half)["attention_half_len_tokens"] == 2000.0
    lm = spec.lm
    plain, scaled = prefill_work(lm, [8192, 1024], tp=2), prefill_work(lm, [8192, 1024], tp=2,
                                                                      attention_half_len=2000.0)
    pairs = [n * (n + 1) / 2 * lm.num_layers for n in (8192, 1024)]
    expected = 4.0 * lm.q_width / 2 * sum(p * length_factor(n, 2000.0)
                                          for p, n in zip(pairs, (8192, 1024), strict=True))
    assert scaled.kernels[-2].flops == pytest.approx(expected) and plain.kernels[:-2] == scaled.kernels[:-2]
    slow = AnalyticProfile(model=spec, gpu=gpu, efficiency=half).for_tp(2)
    fast = AnalyticProfile(model=spec, gpu=gpu, efficiency=flat).for_tp(2)
    assert slow.prefill_s([8192]) > fast.prefill_s([8192]) and slow.encode_s([4096]) > fast.encode_s([4096])
    assert slow.decode_step_s(32, 32 * 4096) == fast.decode_step_s(32, 32 * 4096)
