"""The three benchmark schemas read into one BenchRun (sources of the schemas: schemas.py here)."""

from __future__ import annotations

import json
import math

import pytest

from calibration.bench.readers import read_bench
from tests.calibration_bench.schemas import genai_perf_export, sglang_line, vllm_result


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    from tests.calibration_bench.schemas import engine_run, write_config

    return engine_run(write_config(tmp_path_factory.mktemp("cfg"))).head(12)


def test_vllm_detailed_result(rec, tmp_path):
    data = vllm_result(rec)
    data["errors"][3], data["output_lens"][3] = "HTTP 500", 0  # vLLM writes a failed request so
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(data))
    run = read_bench(path)
    assert run.tool == "vllm" and run.num_requests == 11 and run.num_failed == 1
    assert run.rate_hz == 1.0 and run.burstiness == 1.0 and run.send_s is None
    assert run.input_tokens[0] == data["input_lens"][0]
    # end-to-end latency = TTFT + the inter-token latencies
    assert run.latency_s[0] == pytest.approx(data["ttfts"][0] + sum(data["itls"][0]))


def test_vllm_inf_rate(rec, tmp_path):
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(vllm_result(rec, rate="inf")))
    assert math.isinf(read_bench(path).rate_hz)


def test_sglang_jsonl_one_run_per_line(rec, tmp_path):
    path = tmp_path / "sglang.jsonl"
    path.write_text("".join(json.dumps(sglang_line(rec, rate=r)) + "\n" for r in (1.0, 2.0)))
    with pytest.raises(ValueError, match="holds 2 runs"):
        read_bench(path)
    run = read_bench(path, run=1)
    assert run.tool == "sglang" and run.rate_hz == 2.0 and run.num_requests == len(rec)


def test_genai_perf_export(rec, tmp_path):
    path = tmp_path / "profile_export.json"
    path.write_text(json.dumps(genai_perf_export(rec)))
    run = read_bench(path)
    assert run.tool == "genai-perf" and run.input_tokens is None
    assert list(run.output_tokens) == [int(x) for x in rec["output_tokens"]]  # content chunks only
    assert run.send_s[0] == 0.0
    assert run.ttft_s[0] == pytest.approx(rec["first_token_s"][0] - rec["arrival_s"][0], abs=1e-6)
    assert run.latency_s[0] == pytest.approx(rec["finish_s"][0] - rec["arrival_s"][0], abs=1e-6)


@pytest.mark.parametrize(("content", "match"), [
    ({"rows": [1, 2]}, "not a benchmark result of a known schema"),
    ({"completed": 1, "duration": 2.0, "burstiness": 1.0, "ttfts": [0.1]}, "without per-request fields"),
    ("not json at all {", "neither JSON nor JSON lines"),
    ({"experiments": []}, "no experiments"),
])
def test_bad_files_name_what_is_wrong(tmp_path, content, match):
    path = tmp_path / "bench.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ValueError, match=match):
        read_bench(path)


def test_ragged_fields(rec, tmp_path):
    data = vllm_result(rec)
    data["itls"] = data["itls"][:-1]
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="itls do not hold"):
        read_bench(path)


@pytest.mark.parametrize(("change", "match"), [
    (lambda req: req["response_timestamps"].__setitem__(1, "x"),
     r"requests\[0\]\.response_timestamps\[1\] must be nanoseconds >= 0, got 'x'"),
    (lambda req: req.__setitem__("timestamp", "soon"), r"requests\[0\]\.timestamp must be nanoseconds"),
    (lambda req: req.__setitem__("timestamp", float("nan")), r"requests\[0\]\.timestamp must be nanoseconds"),
    (lambda req: req.__setitem__("response_timestamps", 5),
     r"requests\[0\]\.response_timestamps must be a list"),
    (lambda req: req.__setitem__("timestamp", req["response_timestamps"][-1] + 1),
     r"requests\[0\]\.response_timestamps must follow its timestamp"),
    (lambda req: req["response_timestamps"].reverse(), "in time order"),
])
def test_genai_perf_time_stamps_are_checked(rec, tmp_path, change, match):
    """Found by the mutation harness (``refits``): a time stamp that is not a number reached the
    arithmetic, an internal error; each is now one line naming the request and field."""
    data = genai_perf_export(rec)
    change(data["experiments"][0]["requests"][0])
    path = tmp_path / "profile_export.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=match):
        read_bench(path)
