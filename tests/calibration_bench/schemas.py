"""Benchmark files written in each tool's documented schema, from a simulated run with known scales.

Sources of the schemas (the keys and units written here):

* vLLM ``vllm bench serve --save-result --save-detailed``: ``vllm/benchmarks/serve.py``
  at vllm-project/vllm commit def9ce85ba1079af970a58ed3d42dd861ae35d58 (``benchmark()``'s
  ``result`` dict: ``input_lens``, ``output_lens``, ``ttfts`` and ``itls`` in seconds,
  ``errors``; ``main_async``: ``request_rate`` (a number or ``"inf"``), ``burstiness``,
  ``max_concurrency``; ``--save-detailed`` keeps the per-request arrays).
* SGLang ``python -m sglang.bench_serving --output-file F.jsonl --output-details``:
  ``docs/developer_guide/bench_serving.md`` ("JSONL output format") at sgl-project/sglang
  commit 2409eacc3cd5681e0608210c755be3988a45614f, and ``python/sglang/bench_serving.py``
  (``result`` and ``result_details``; one JSON object appended per run).
* genai-perf ``profile_export.json``: the fixtures of
  ``src/c++/perf_analyzer/genai-perf/tests/test_llm_profile_data_parser.py`` at
  triton-inference-server/client commit 93b2f5a4e81c9263a532d00e963d147386ebd1e9
  (``experiments[].experiment.{mode,value}``, ``requests[].timestamp``,
  ``response_timestamps`` in ns, ``response_outputs`` as OpenAI SSE chunks).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from calibration.bench.refit import base_profile
from calibration.scaled import ScaledProfile
from calibration.session import Overrides, compose
from easerve.cli.search_cmd import dump_toml
from easerve.resources import load_config

CONFIG = {
    "seed": 0, "model": {"name": "llava-v1.6-34b"}, "cluster": {"gpu": "rtx6000ada", "num_gpus": 8},
    "deployment": {"encode": {"num_workers": 1, "tp": 2}, "prefill": {"num_workers": 1, "tp": 2},
                   "decode": {"num_workers": 2, "tp": 2}, "max_encode_batch": 8, "remote_fraction": 0.5},
    "workload": {"mix": "llava-image", "rate_hz": 1.0, "num_requests": 40},
}
#: the scales the "engine" ran at (what a refit should find)
TRUE_FIRST_TOKEN, TRUE_DECODE = 1.3, 1.2


def write_config(folder: Path, **workload: Any) -> Path:
    data = {**CONFIG, "workload": {**CONFIG["workload"], **workload}}
    path = folder / "config.toml"
    path.write_text(dump_toml(data))
    return path


def engine_run(config_path: Path) -> pd.DataFrame:
    """The successful records of the config simulated at the true scales: the stand-in engine."""
    config = load_config(config_path)
    profile, doc = base_profile(config)
    scaled = ScaledProfile(profile, first_token_scale=TRUE_FIRST_TOKEN, decode_scale=TRUE_DECODE)
    rec = compose(config, Overrides(profile=scaled, doc=doc)).sim().run().records
    return rec[rec["status"] == "ok"].reset_index(drop=True)


def _per_request(rec: pd.DataFrame) -> dict[str, list[Any]]:
    ttft = (rec["first_token_s"] - rec["arrival_s"]).tolist()
    latency = (rec["finish_s"] - rec["arrival_s"]).tolist()
    outs = [int(x) for x in rec["output_tokens"]]
    itls = [[(lat - t) / (o - 1)] * (o - 1) for t, lat, o in zip(ttft, latency, outs, strict=True)]
    return {"input_lens": [int(x) for x in rec["prompt_tokens"]], "output_lens": outs, "ttfts": ttft,
            "itls": itls, "generated_texts": ["x"] * len(outs), "errors": [""] * len(outs)}


def vllm_result(rec: pd.DataFrame, *, rate: Any = 1.0, **extra: Any) -> dict[str, Any]:
    duration = float(rec["finish_s"].max() - rec["arrival_s"].min())
    return {"date": "20261202-120000", "endpoint_type": "openai-chat", "backend": "openai-chat",
            "label": None, "model_id": "llava-hf/llava-v1.6-34b-hf",
            "tokenizer_id": "llava-hf/llava-v1.6-34b-hf", "num_prompts": len(rec), "request_rate": rate,
            "burstiness": 1.0, "max_concurrency": None, "duration": duration, "completed": len(rec),
            "failed": 0, "total_input_tokens": int(rec["prompt_tokens"].sum()),
            "total_output_tokens": int(rec["output_tokens"].sum()), "request_throughput": len(rec) / duration,
            "median_ttft_ms": float((rec["first_token_s"] - rec["arrival_s"]).median() * 1e3),
            **_per_request(rec), **extra}


def sglang_line(rec: pd.DataFrame, *, rate: float = 1.0) -> dict[str, Any]:
    duration = float(rec["finish_s"].max() - rec["arrival_s"].min())
    return {"tag": None, "backend": "sglang-oai-chat", "dataset_name": "image", "request_rate": rate,
            "max_concurrency": None, "sharegpt_output_len": None, "random_input_len": 512,
            "random_output_len": 256, "random_range_ratio": 0.0, "server_info": None, "duration": duration,
            "completed": len(rec), "total_input_tokens": int(rec["prompt_tokens"].sum()),
            **_per_request(rec)}


def _sse(text: str) -> dict[str, str]:
    chunk = {"id": "abc", "object": "chat.completion.chunk",
             "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return {"response": f"data: {json.dumps(chunk)}\n\n"}


def genai_perf_export(rec: pd.DataFrame, *, rate: float = 1.0) -> dict[str, Any]:
    requests = []
    for row in rec.itertuples():
        start = round(row.arrival_s * 1e9)
        first, finish, n = row.first_token_s * 1e9, row.finish_s * 1e9, int(row.output_tokens)
        gap = (finish - first) / max(1, n - 1)
        stamps = [start + 1000] + [round(first + i * gap) for i in range(n)] + [round(finish) + 1000]
        outputs = [{"response": 'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'}]
        outputs += [_sse("tok") for _ in range(n)] + [{"response": "data: [DONE]\n\n"}]
        requests.append({"timestamp": start, "request_inputs": {"payload": "{}"},
                         "response_timestamps": stamps, "response_outputs": outputs})
    return {"service_kind": "openai", "endpoint": "v1/chat/completions",
            "experiments": [{"experiment": {"mode": "request_rate", "value": rate}, "requests": requests}]}
