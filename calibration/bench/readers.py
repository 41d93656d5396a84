"""Read a serving benchmark's per-request results into one :class:`BenchRun`.

Three schemas, each as its tool writes it (docs/calibration.md §6 cites the
source of each):

* **vLLM** ``vllm bench serve --save-result --save-detailed``: one JSON
  object; per request ``input_lens``, ``output_lens``, ``ttfts`` (s), ``itls``
  (a list of seconds per request) and ``errors``; the run's ``request_rate``
  (a number or ``"inf"``), ``burstiness``, ``max_concurrency`` and
  ``duration``. No send times: the arrivals are synthesised from the rate.
* **SGLang** ``python -m sglang.bench_serving --output-file F.jsonl
  --output-details``: one JSON object per line (one line per run, appended),
  with the same per-request arrays and ``request_rate``, ``max_concurrency``,
  ``duration``.
* **genai-perf** ``profile_export.json``: ``experiments``, each with its
  load (``mode`` ``concurrency`` or ``request_rate``, ``value``) and its
  ``requests``: a send ``timestamp`` and ``response_timestamps`` in ns, and
  the ``response_outputs``. It holds no token counts (genai-perf tokenises
  the texts itself): the output length here is the number of responses that
  carry text (one streamed chunk per token), and the input lengths are
  unknown (:attr:`BenchRun.input_tokens` is None).

A request is ok when the tool recorded no error and at least one output
token; its end-to-end latency is its TTFT plus its inter-token latencies.
Anything else (another schema, a missing or ragged per-request field, a file
with several runs and no ``run`` index) is a ``ValueError`` naming it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the per-request arrays of vLLM's and SGLang's detailed results
DETAIL_FIELDS = ("input_lens", "output_lens", "ttfts", "itls", "errors")
TOOLS = ("vllm", "sglang", "genai-perf")
_NS = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchRun:
    """One benchmark run's successful requests, and how they were sent.

    ``send_s`` (seconds from the first send) is None when the tool did not
    record send times; ``rate_hz`` is then the offered rate (``inf``: all at
    once) with vLLM's Gamma ``burstiness`` (1: Poisson).
    """

    tool: str
    path: str
    output_tokens: tuple[int, ...]
    ttft_s: tuple[float, ...]
    latency_s: tuple[float, ...]
    input_tokens: tuple[int, ...] | None
    send_s: tuple[float, ...] | None
    rate_hz: float
    burstiness: float = 1.0
    max_concurrency: int | None = None
    duration_s: float | None = None
    num_failed: int = 0

    def __post_init__(self) -> None:
        n = len(self.output_tokens)
        if n == 0:
            raise ValueError(f"{self.path}: no successful request in the benchmark")
        for name in ("ttft_s", "latency_s", "input_tokens", "send_s"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise ValueError(f"{self.path}: {name} holds {len(value)} values for {n} requests")

    @property
    def num_requests(self) -> int:
        return len(self.output_tokens)


def read_bench(path: str | Path, *, run: int | None = None) -> BenchRun:
    """The run in ``path`` (``run``: which one, 0-based, of a file holding several)."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the benchmark file ({exc.__class__.__name__})") from None
    objects = _json_objects(path, text)
    if len(objects) == 1 and "experiments" in objects[0]:
        return _genai_perf(path, objects[0], run)
    if any("experiments" in o for o in objects):
        raise ValueError(f"{path}: a genai-perf export must be one JSON object")
    obj = _pick(path, objects, run, what="runs (lines)")
    if "ttfts" not in obj and not {"completed", "duration"} <= obj.keys():  # the summary both tools write
        raise ValueError(f"{path}: not a benchmark result of a known schema (vLLM bench serve JSON, "
                         f"SGLang bench_serving JSONL or genai-perf profile_export.json)")
    tool = "vllm" if "burstiness" in obj and path.suffix != ".jsonl" else "sglang"
    return _detailed(path, obj, tool)


def _json_objects(path: Path, text: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(text)
        rows = [data]
    except json.JSONDecodeError:
        try:  # JSON lines: one object per run
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: neither JSON nor JSON lines ({exc.msg}, line {exc.lineno})") from None
    if not rows or not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{path}: not a benchmark result (expected JSON objects)")
    return rows


def _pick(path: Path, items: Sequence[Any], run: int | None, *, what: str) -> Any:
    if run is None:
        if len(items) > 1:
            raise ValueError(f"{path}: holds {len(items)} {what}; "
                             f"choose one with --bench-run 0..{len(items) - 1}")
        return items[0]
    if not 0 <= run < len(items):
        raise ValueError(f"--bench-run {run}: {path} holds {len(items)} {what} (0..{len(items) - 1})")
    return items[run]


def _detailed(path: Path, obj: Mapping[str, Any], tool: str) -> BenchRun:
    """vLLM's and SGLang's schema: per-request arrays beside the run's settings."""
    name = {"vllm": "vLLM bench serve", "sglang": "SGLang bench_serving"}[tool]
    flag = {"vllm": "--save-detailed", "sglang": "--output-details"}[tool]
    missing = [f for f in DETAIL_FIELDS if f not in obj]
    if missing:
        raise ValueError(f"{path}: {name} result without per-request fields {', '.join(missing)} "
                         f"(saved without {flag}?)")
    n = len(obj["ttfts"])
    ragged = [f for f in DETAIL_FIELDS if not isinstance(obj[f], list) or len(obj[f]) != n]
    if ragged:
        raise ValueError(f"{path}: per-request field(s) {', '.join(ragged)} do not hold {n} values "
                         "as ttfts does")
    inputs, outputs, ttfts, latencies, failed = [], [], [], [], 0
    for i in range(n):
        out = _int(path, "output_lens", i, obj["output_lens"][i])
        if obj["errors"][i] or out < 1:
            failed += 1
            continue
        ttft = _seconds(path, "ttfts", i, obj["ttfts"][i])
        itl = obj["itls"][i]
        if not isinstance(itl, list):
            raise ValueError(f"{path}: itls[{i}] must be a list of seconds, got {itl!r}")
        inputs.append(_int(path, "input_lens", i, obj["input_lens"][i]))
        outputs.append(out)
        ttfts.append(ttft)
        latencies.append(ttft + sum(_seconds(path, f"itls[{i}]", j, x) for j, x in enumerate(itl)))
    return BenchRun(tool=tool, path=str(path), input_tokens=tuple(inputs), output_tokens=tuple(outputs),
                    ttft_s=tuple(ttfts), latency_s=tuple(latencies), send_s=None,
                    rate_hz=_rate(path, obj.get("request_rate", "inf")),
                    burstiness=float(obj.get("burstiness", 1.0) or 1.0),
                    max_concurrency=obj.get("max_concurrency"), duration_s=_opt_float(obj.get("duration")),
                    num_failed=failed)


def _genai_perf(path: Path, obj: Mapping[str, Any], run: int | None) -> BenchRun:
    experiments = obj["experiments"]
    if not isinstance(experiments, list) or not experiments:
        raise ValueError(f"{path}: genai-perf export with no experiments")
    exp = _pick(path, experiments, run, what="experiments (load levels)")
    load = exp.get("experiment") or {}
    requests = exp.get("requests")
    if not isinstance(requests, list) or not requests:
        raise ValueError(f"{path}: genai-perf experiment without requests")
    sends, outputs, ttfts, latencies, failed = [], [], [], [], 0
    for i, req in enumerate(requests):
        if not isinstance(req, dict) or not all(k in req for k in ("timestamp", "response_timestamps",
                                                                   "response_outputs")):
            raise ValueError(f"{path}: requests[{i}] lacks timestamp, response_timestamps or "
                             "response_outputs")
        for key in ("response_timestamps", "response_outputs"):
            if not isinstance(req[key], list):
                raise ValueError(f"{path}: requests[{i}].{key} must be a list, got {req[key]!r:.60}")
        stamps = [_ns(path, f"requests[{i}].response_timestamps", j, t)
                  for j, (t, out) in enumerate(zip(req["response_timestamps"], req["response_outputs"],
                                                   strict=False)) if _has_text(out)]
        if not stamps:
            failed += 1
            continue
        start = _ns(path, "requests", i, req["timestamp"], key=".timestamp")
        if stamps[0] < start or stamps != sorted(stamps):
            raise ValueError(f"{path}: requests[{i}].response_timestamps must follow its timestamp "
                             f"({start:.0f} ns) in time order")
        sends.append(start)
        outputs.append(len(stamps))
        ttfts.append((stamps[0] - start) * _NS)
        latencies.append((stamps[-1] - start) * _NS)
    if not sends:
        raise ValueError(f"{path}: no genai-perf request returned any text")
    first = min(sends)
    mode, value = load.get("mode"), load.get("value")
    if mode not in ("request_rate", "concurrency"):
        raise ValueError(f"{path}: genai-perf experiment mode {mode!r}; known: request_rate, concurrency")
    rate = _rate(path, value) if mode == "request_rate" else math.inf
    ends = [s + lat / _NS for s, lat in zip(sends, latencies, strict=True)]
    return BenchRun(tool="genai-perf", path=str(path), input_tokens=None, output_tokens=tuple(outputs),
                    ttft_s=tuple(ttfts), latency_s=tuple(latencies),
                    send_s=tuple((s - first) * _NS for s in sends), rate_hz=rate,
                    max_concurrency=int(_opt_float(value) or 0) if mode == "concurrency" else None,
                    duration_s=(max(ends) - first) * _NS, num_failed=failed)


def _has_text(out: Any) -> bool:
    """Whether one genai-perf response output carries generated text (Triton or OpenAI SSE)."""
    if not isinstance(out, dict):
        return False
    if "text_output" in out:
        return bool(out["text_output"])
    body = str(out.get("response", "")).strip()
    body = body[len("data:"):].strip() if body.startswith("data:") else body
    if not body or body == "[DONE]":
        return False
    try:
        choice = (json.loads(body).get("choices") or [{}])[0]
    except (json.JSONDecodeError, AttributeError):
        return False
    return bool((choice.get("delta") or {}).get("content") or choice.get("text"))


def _rate(path: Path, value: Any) -> float:
    if value in ("inf", "Infinity") or (isinstance(value, float) and math.isinf(value)):
        return math.inf
    if value == "trace":
        raise ValueError(f"{path}: request_rate 'trace' (trace timestamps) is not recorded in the result; "
                         "replay the trace with easerve instead")
    rate = _opt_float(value)
    if rate is None or not rate > 0:
        raise ValueError(f"{path}: request_rate must be a positive number or 'inf', got {value!r}")
    return rate


def _opt_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _int(path: Path, field: str, i: int, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{path}: {field}[{i}] must be a token count, got {value!r}")
    return value


def _time(path: Path, where: str, value: Any, unit: str) -> float:
    """A time (``unit``: seconds, or a genai-perf stamp in nanoseconds): a finite number >= 0, given
    as a number (a string is not one here)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{path}: {where} must be {unit} >= 0, got {value!r:.40}")
    return float(value)


def _ns(path: Path, field: str, i: int, value: Any, *, key: str = "") -> float:
    return _time(path, f"{field}[{i}]{key}", value, "nanoseconds")


def _seconds(path: Path, field: str, i: int, value: Any) -> float:
    return _time(path, f"{field}[{i}]", value, "seconds")
