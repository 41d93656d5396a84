"""``validate --bench`` and ``calibrate --from-bench`` end to end on files in each tool's schema.

The "engine" is the simulator at known scales (tests/calibration_bench/schemas.py); the refit
must find them. Bad input: one line, exit status 2, nothing written.
"""

from __future__ import annotations

import json

import pytest

from calibration.registry import load_profile
from calibration.scaled import ScaledProfile
from easerve.cli import main
from runtime.profiles import load_profile_doc
from tests.calibration_bench.schemas import (
    TRUE_DECODE,
    TRUE_FIRST_TOKEN,
    engine_run,
    genai_perf_export,
    sglang_line,
    vllm_result,
    write_config,
)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench")
    config = write_config(folder)
    rec = engine_run(config)
    (folder / "vllm.json").write_text(json.dumps(vllm_result(rec)))
    return folder, config, rec


def test_validate_bench_prints_the_error_table_and_refits(setup, tmp_path, capsys):
    folder, config, _ = setup
    out = tmp_path / "v"
    assert main(["validate", str(config), "--bench", str(folder / "vllm.json"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for metric in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "goodput_rps"):
        assert f"| as is | {metric} |" in text and f"| refit | {metric} |" in text
    assert {p.name for p in out.iterdir()} >= {"fidelity.csv", "fidelity.md", "summary.json",
                                                "refit-profile.json", "bench_records.csv"}
    doc = load_profile_doc(out / "refit-profile.json")
    assert doc.kind == "scaled"
    assert doc.params["first_token_scale"] == pytest.approx(TRUE_FIRST_TOKEN, rel=0.05)
    assert doc.params["decode_scale"] == pytest.approx(TRUE_DECODE, rel=0.03)
    assert doc.fit_error["ttft_p50"] <= 0.05 and doc.fit_error["tpot_p50"] <= 0.05


def test_calibrate_from_bench_writes_a_loadable_scaled_profile(setup, tmp_path, capsys):
    folder, config, _ = setup
    out = tmp_path / "refit.json"
    assert main(["calibrate", "--from-bench", str(folder / "vllm.json"), "--config", str(config),
                 "--out", str(out)]) == 0
    assert "wrote scaled profile" in capsys.readouterr().out
    profile = load_profile(out)
    assert isinstance(profile, ScaledProfile)
    base = profile.base.for_tp(2)  # type: ignore[union-attr]
    assert profile.for_tp(2).decode_step_s(4, 2000) == pytest.approx(
        profile.decode_scale * base.decode_step_s(4, 2000))


@pytest.mark.parametrize("schema", ["sglang", "genai-perf"])
def test_the_other_schemas_refit_too(setup, tmp_path, schema, capsys):
    _, config, rec = setup
    path = tmp_path / ("s.jsonl" if schema == "sglang" else "profile_export.json")
    path.write_text(json.dumps(sglang_line(rec) if schema == "sglang" else genai_perf_export(rec)) + "\n")
    out = tmp_path / "refit.json"
    assert main(["calibrate", "--from-bench", str(path), "--config", str(config), "--out", str(out)]) == 0
    doc = load_profile_doc(out)
    assert doc.params["decode_scale"] == pytest.approx(TRUE_DECODE, rel=0.05)


def _fails(argv, capsys, out):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert not out.exists()
    return err[0]


def test_bad_benchmarks_are_one_line_exit_2_nothing_written(setup, tmp_path, capsys):
    _, config, rec = setup
    out = tmp_path / "out"
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"results": []}))
    assert "known schema" in _fails(["validate", str(config), "--bench", str(other), "--out", str(out)],
                                    capsys, out)
    bare = vllm_result(rec)
    for key in ("ttfts", "itls"):
        del bare[key]
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    line = _fails(["calibrate", "--from-bench", str(tmp_path / "bare.json"), "--config", str(config),
                   "--out", str(out)], capsys, out)
    assert "per-request fields ttfts, itls" in line and "--save-detailed" in line
    closed = vllm_result(rec, rate="inf", max_concurrency=4)
    (tmp_path / "closed.json").write_text(json.dumps(closed))
    assert "max_concurrency=4" in _fails(["validate", str(config), "--bench", str(tmp_path / "closed.json"),
                                          "--out", str(out)], capsys, out)


def test_a_benchmark_of_another_workload_says_how_it_differs(setup, tmp_path, capsys):
    folder, _, _ = setup
    config = write_config(tmp_path, prompt_tokens=[1024, 2048], output_tokens=[16, 32])
    out = tmp_path / "out"
    argv = ["validate", str(config), "--bench", str(folder / "vllm.json"), "--out", str(out)]
    line = _fails(argv, capsys, out)
    assert "do not match the config's workload" in line
    assert "prompt_tokens [1024, 2048]" in line and "output_tokens [16, 32]" in line


def test_a_benchmark_past_the_model_context_is_not_comparable(setup, tmp_path, capsys):
    """The engine served every request within LLaVA-34B's 4,096 tokens. Taken as text with the mix's
    items added, these requests do not fit: the assumption does not hold, and the run says so."""
    _, _, rec = setup
    config = write_config(tmp_path, prompt_tokens=[100, 1100])  # the config's own stream fits
    long = vllm_result(rec)
    long["input_lens"] = [1100] * len(long["input_lens"])  # + a 2,928-token grid + output: past 4,096
    (tmp_path / "long.json").write_text(json.dumps(long))
    out = tmp_path / "out"
    line = _fails(["validate", str(config), "--bench", str(tmp_path / "long.json"), "--out", str(out)],
                  capsys, out)
    assert "requests run past llava-v1.6-34b's context of 4,096 tokens once the mix's items are added" in line
    assert "not comparable" in line
