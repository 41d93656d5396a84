"""Inputs mutated at random (seeded): every reader refuses one in one line, or takes it whole.

Run as ``python -m tests.core.mutation KIND CASES SEED`` (``KIND``: a key of :data:`CASES`: traces,
model specs, shift files, shipped configs composed and simulated, raw item sizes, GPU specs, models'
config.json and processor files imported and priced, benchmark result files, ``[live]`` tables,
command lines run, profiles loaded, priced and simulated on, plan tables run by ``sim --controller``,
stage samples fitted, a stand-in engine's benchmark files refit by ``calibrate --from-bench``, an
earlier report's live trial damaged and judged again by ``validate --live-from`` or refit by
``calibrate --from-runs``); it
prints one line per kind of failure (an exception other than ``ValueError``, or a ``ValueError`` of
several lines or of more than 250 characters past the file's name and before
a list of the known names) and exits 1 when there is any. ``tests/core/test_mutated_inputs.py``
runs it in a child process under a memory limit, since the failures it looks for include
arithmetic that fills the host's memory.

Over 300 lines: one block per kind, its valid input beside the case that mutates and reads it;
split up, a kind's input would sit apart from the reader it is written for.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import random
import re
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TRACES = {
    "azure": ("azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                           "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n"
                           "2023-11-16 18:15:51.3551140,879,34\n"),
    "burstgpt": ("burstgpt.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                                 "5,ChatGPT,472,18,490,Conversation log\n"
                                 "45,ChatGPT,10870,0,10870,Conversation log\n"
                                 "110.5,GPT-4,4170,505,4675,API log\n"),
    "mooncake": ("mooncake.jsonl",
                 '{"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": [0]}\n'
                 '{"timestamp": 3052, "input_length": 2287, "output_length": 316}\n'),
    "easerve": ("trace.csv", "arrival_s,modality,prompt_tokens,output_tokens,mm_tokens_per_item\n"
                             "0.0,image,128,64,2928\n0.5,image,100,32,1948;576\n1.25,text,300,20,\n"),
    "easerve-jsonl": ("trace.jsonl",
                      '{"arrival_s": 0.0, "modality": "image", "prompt_tokens": 128, "output_tokens": 64, '
                      '"mm_tokens_per_item": [2928]}\n'
                      '{"request_id": 7, "arrival_s": 0.5, "modality": "text", "prompt_tokens": 10, '
                      '"output_tokens": 3, "mm_tokens_per_item": []}\n'),
    "easerve-pooled": ("pooled.csv", "arrival_s,modality,prompt_tokens,output_tokens,mm_tokens_per_item,"
                                     "encode_tokens_per_item\n0.0,image,128,64,7371,27135\n"
                                     "0.5,image,100,32,2929;5967,2929;5967\n1.25,text,300,20,,\n"),
    "easerve-pooled-jsonl": ("pooled.jsonl",
                             '{"arrival_s": 0.0, "modality": "image", "prompt_tokens": 128, '
                             '"output_tokens": 64, "mm_tokens_per_item": [7371], '
                             '"encode_tokens_per_item": [27135]}\n'),
}
#: what a mutation inserts into a trace's text
PIECES = ["", ",", "\n", '"', "{", "}", "[", "]", ":", "-1", "1e400", "nan", "inf", "0", "x", "\x00",
          "\ufeff", "99999999999999999999", "1.5", " ", ";", "\r\n", "true", "null", "\\", "é",
          "2023-13-45 25:61:61"]
#: shipped specs of every processor kind and mapping, and what a mutation puts in a spec
SPECS = ("qwen3-vl-8b", "llava-onevision-qwen2-7b", "internvl3-8b", "idefics3-8b", "qwen2-audio-7b",
         "gemma-4-26b-a4b", "ultravox-v0.5-llama-3.1-8b")
VALUES = [0, -1, 1.5, "x", None, [], {}, True, 1e30, float("nan"), 10**20, "", [1, 2], {"value": "a"}]
LIMIT = 250
_SERIAL = itertools.count()


def mutate_text(text: str, rng: random.Random) -> str:
    """``text`` with 1-4 cuts, insertions of :data:`PIECES` or copied runs."""
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        op, pos = rng.random(), rng.randrange(len(chars) + 1)
        if op < 0.4 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif op < 0.8:
            chars[pos:pos] = list(rng.choice(PIECES))
        else:
            at = rng.randrange(len(chars) + 1)
            chars[at:at] = chars[pos:pos + rng.randint(1, 20)]
    return "".join(chars)


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        if "value" in node and "mark" in node:
            yield path
        for key, child in node.items():
            yield from _leaves(child, (*path, key))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from _leaves(child, (*path, i))
    else:
        yield path


def mutate_spec(data: dict[str, Any], rng: random.Random) -> None:
    """Set 1-2 of ``data``'s entries (a marked leaf, its value or anything below) to :data:`VALUES`."""
    for _ in range(rng.randint(1, 2)):
        path = rng.choice([p for p in _leaves(data) if p])
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = copy.deepcopy(rng.choice(VALUES))


def _trace_case(rng: random.Random, work: Path) -> Callable[[], object]:
    from easerve_core.workload import WorkloadSpec
    from runtime.traces import load_trace

    kind = rng.choice(sorted(TRACES))
    name, text = TRACES[kind]
    fmt = kind.split("-")[0]  # easerve-jsonl, easerve-pooled: our own format
    path = work / name
    path.write_text(mutate_text(text, rng), encoding="utf-8", errors="surrogatepass")
    table = {"mix": "llava-image", "trace": str(path), "trace_format": fmt}
    return lambda: WorkloadSpec.from_dict(table, traces=load_trace)


def _spec_case(rng: random.Random, work: Path) -> Callable[[], object]:
    from calibration.registry import analytic_profile
    from calibration.sizes import resolve_workload
    from calibration.specs import model_spec
    from easerve.resources import CONFIGS_DIR
    from easerve_core.workload import WorkloadSpec

    name = rng.choice(SPECS)
    data = json.loads((CONFIGS_DIR / "specs" / "models" / f"{name}.json").read_text())
    mutate_spec(data, rng)
    path = work / f"{name}.json"
    path.write_text(json.dumps(data))
    sizes = {"audio_s": [10]} if "audio" in name or "ultravox" in name else {"images": [[1280, 720]]}

    def run() -> object:
        spec = model_spec(str(path))
        profile = analytic_profile(str(path), "h100-sxm")
        profile.for_tp(1).encode_s(list(spec.typical_request.mm_tokens_per_item))
        profile.for_tp(2).prefill_s([2000])
        profile.for_tp(2).decode_step_s(8, 4000)
        return resolve_workload(WorkloadSpec.from_dict({"rate_hz": 1.0, **sizes}), str(path))
    return run


SHIFT = """name = "mine"
model = "image"
signal = "mm_tokens_mean"
load_frac = 0.85
[[phase]]
start_s = 0
duration_s = 300
mix = "llava-small-chat"
rate_hz = 4.0
[[phase]]
start_s = 300
duration_s = 300
mix = "llava-anyres-short"
rate_hz = 2.5
"""
#: raw sizes a workload may give (and some it may not)
SIZES = [0, 1, 3, 13, 100, 333, 1280, 4096, 10**5, 10**30, -5, 0.5, float("inf"), float("nan"), "7", None,
         True]


def _shift_case(rng: random.Random, work: Path) -> Callable[[], object]:
    from easerve.experiments.shifts import load_shift

    path = work / "shift.toml"
    path.write_text(mutate_text(SHIFT, rng), encoding="utf-8", errors="surrogatepass")
    return lambda: load_shift(path)


def _config_case(rng: random.Random, work: Path) -> Callable[[], object]:
    """A shipped config with a value nudged or scaled (most often) or set wild, run 20 requests."""
    import tomllib

    from calibration.session import compose
    from easerve.resources import CONFIGS_DIR
    from easerve_core.config import ExperimentConfig
    from runtime.configs import DISK

    data = tomllib.loads(rng.choice(sorted(CONFIGS_DIR.glob("*.toml"))).read_text())
    for _ in range(rng.randint(1, 2)):
        path = rng.choice([p for p in _leaves(data) if p])
        node = data
        for key in path[:-1]:
            node = node[key]
        old = node[path[-1]]
        if isinstance(old, int | float) and not isinstance(old, bool) and rng.random() < 0.8:
            new = old * rng.choice([0.1, 0.5, 1.3, 2, 10])
            node[path[-1]] = max(0, round(new)) + rng.choice([-1, 0, 1]) if isinstance(old, int) else new
        else:
            node[path[-1]] = copy.deepcopy(rng.choice(VALUES))
    workload = data.get("workload")
    if isinstance(workload, dict) and type(workload.get("num_requests")) is int:
        workload["num_requests"] = min(workload["num_requests"], 20)
    return lambda: compose(ExperimentConfig.from_dict(data, base_dir=CONFIGS_DIR, files=DISK)).sim().run()


def _sizes_case(rng: random.Random, work: Path) -> Callable[[], object]:
    from calibration.sizes import resolve_workload
    from easerve.resources import CONFIGS_DIR
    from easerve_core.workload import WorkloadSpec

    key = rng.choice(["images", "videos", "audio_s"])
    items: list[Any] = []
    for _ in range(rng.randint(1, 3)):
        if key == "images":
            items.append([rng.choice(SIZES), rng.choice(SIZES)])
        elif key == "videos":
            clip = {"size": [rng.choice(SIZES), rng.choice(SIZES)]}
            timing = {"frames": rng.choice(SIZES)} if rng.random() < 0.5 else {
                "seconds": rng.choice(SIZES), "fps": rng.choice(SIZES)}
            items.append({**clip, **timing})
        else:
            items.append(rng.choice(SIZES))
    spec = str(CONFIGS_DIR / "specs" / "models" / f"{rng.choice(SPECS)}.json")
    return lambda: resolve_workload(WorkloadSpec.from_dict({"rate_hz": 1.0, key: items}), spec)


def _gpu_case(rng: random.Random, work: Path) -> Callable[[], object]:
    """A shipped GPU spec mutated, imported (``easerve gpu import``'s check) and priced with."""
    from calibration.registry import analytic_profile
    from calibration.specs import SPEC_DIR
    from easerve.cli.gpu_cmd import marked_gpu

    data = json.loads(rng.choice(sorted((SPEC_DIR / "gpus").glob("*.json"))).read_text())
    mutate_spec(data, rng)
    path = work / "gpu.json"
    path.write_text(json.dumps(data))

    def run() -> object:
        out = work / f"imported-{next(_SERIAL)}.json"  # a fresh name: the spec cache keys on path and mtime
        out.write_text(json.dumps(marked_gpu(path, "mutant")))
        profile = analytic_profile("qwen2.5-vl-32b", str(out))
        profile.for_tp(1).encode_s([2000])
        profile.for_tp(2).prefill_s([3000])
        return profile.for_tp(2).decode_step_s(8, 4000)
    return run


def _hf_case(rng: random.Random, work: Path) -> Callable[[], object]:
    """A model's config.json built in code (bench/import_examples.py, through ``transformers``)
    and, for a Qwen-VL one, its processor files, mutated, imported (``easerve model import``) and
    priced with."""
    from bench.import_examples import EXAMPLES, QWEN3_VL_PROCESSOR
    from calibration.importers import import_model
    from calibration.registry import analytic_profile
    from calibration.sizes import resolve_workload
    from easerve_core.workload import WorkloadSpec

    example = rng.choice(EXAMPLES)
    config = _built(example.name, example.build)
    files = {"config.json": copy.deepcopy(config)}
    processor = dict(QWEN3_VL_PROCESSOR) if example.family in ("qwen2_vl", "qwen2_5_vl") else \
        PROCESSOR_FILES.get(example.family, {})
    files.update(copy.deepcopy(processor))
    name = rng.choice(sorted(files))
    mutate_spec(files[name], rng)
    folder = work / f"model-{next(_SERIAL)}"
    folder.mkdir()
    for file, data in files.items():
        (folder / file).write_text(json.dumps(data))
    sizes = {"audio_s": [10]} if "audio" in example.family or "ultravox" in example.family else {
        "images": [[1280, 720]]}

    def run() -> object:
        spec = import_model(folder / "config.json", name=example.name)
        path = folder / "spec.json"
        path.write_text(json.dumps(spec))
        profile = analytic_profile(str(path), "h100-sxm")
        profile.for_tp(1).encode_s([500])
        profile.for_tp(2).prefill_s([2000])
        profile.for_tp(2).decode_step_s(8, 4000)
        return resolve_workload(WorkloadSpec.from_dict({"rate_hz": 1.0, **sizes}), str(path))
    return run


#: processor files of the tiled families, with the keys the import reads
PROCESSOR_FILES = {
    "internvl": {"preprocessor_config.json": {"max_patches": 12, "min_patches": 1}},
    "idefics3": {"preprocessor_config.json": {"size": {"longest_edge": 1456},
                                              "max_image_size": {"longest_edge": 364}}},
    "smolvlm": {"preprocessor_config.json": {"size": {"longest_edge": 1536},
                                             "max_image_size": {"longest_edge": 384}}},
}
_BUILT: dict[str, Any] = {}


def _built(name: str, build: Callable[[], Any]) -> dict[str, Any]:
    """An example's config.json as a dict (built once: ``transformers`` config classes are slow)."""
    if name not in _BUILT:
        config = build()
        _BUILT[name] = config if isinstance(config, dict) else config.to_dict()
    return _BUILT[name]


#: one small file of each benchmark schema calibration.bench.readers takes (keys as
#: tests/calibration_bench/schemas.py cites them)
BENCH = {
    "vllm": ("vllm.json", json.dumps({
        "request_rate": 2.0, "burstiness": 1.0, "max_concurrency": None, "duration": 3.0, "completed": 2,
        "input_lens": [300, 420], "output_lens": [3, 2], "ttfts": [0.21, 0.35],
        "itls": [[0.02, 0.03], [0.025]], "errors": ["", ""], "start_times": [0.0, 0.6]})),
    "sglang": ("sglang.jsonl", json.dumps({
        "request_rate": 2.0, "duration": 3.0, "completed": 2, "input_lens": [300, 420],
        "output_lens": [3, 2], "ttfts": [0.21, 0.35], "itls": [[0.02, 0.03], [0.025]],
        "errors": ["", ""]}) + "\n"),
    "genai-perf": ("profile_export.json", json.dumps({
        "experiments": [{"experiment": {"mode": "request_rate", "value": 2.0}, "requests": [
            {"timestamp": 1_000_000_000, "request_inputs": {"payload": "{}"},
             "response_timestamps": [1_210_000_000, 1_230_000_000, 1_260_000_000],
             "response_outputs": [{"response": 'data: {"choices":[{"delta":{"content":"a"}}]}'},
                                  {"response": 'data: {"choices":[{"delta":{"content":"b"}}]}'},
                                  {"response": "data: [DONE]"}]}]}]})),
}


def _bench_case(rng: random.Random, work: Path) -> Callable[[], object]:
    """A benchmark result file of vLLM, SGLang or genai-perf, its text mutated, read."""
    from calibration.bench.readers import read_bench

    name, text = BENCH[rng.choice(sorted(BENCH))]
    path = work / name
    path.write_text(mutate_text(text, rng), encoding="utf-8", errors="surrogatepass")
    return lambda: read_bench(path)


_ENGINE: dict[str, str] = {}


def _engine_files(work: Path) -> dict[str, str]:
    """Each schema's file of one stand-in engine run (tests/calibration_bench/schemas.py: the
    simulator at known scales), and its config's text; built once a process (a simulation)."""
    if not _ENGINE:
        from tests.calibration_bench.schemas import (
            engine_run,
            genai_perf_export,
            sglang_line,
            vllm_result,
            write_config,
        )

        folder = work / "engine"
        folder.mkdir()
        config = write_config(folder, num_requests=24)
        rec = engine_run(config)
        _ENGINE.update({"config.toml": config.read_text(), "vllm.json": json.dumps(vllm_result(rec)),
                        "sglang.jsonl": json.dumps(sglang_line(rec)) + "\n",
                        "profile_export.json": json.dumps(genai_perf_export(rec))})
    return _ENGINE


def _refit_case(rng: random.Random, work: Path) -> Callable[[], object]:
    """A stand-in engine's benchmark file (vLLM, SGLang or genai-perf) mutated, its text or its
    values, and refit end to end: ``easerve calibrate --from-bench`` exits 0, or 2 with one line and
    nothing written."""
    files = _engine_files(work)
    case = work / f"refit-{next(_SERIAL)}"
    case.mkdir()
    config = case / "config.toml"
    config.write_text(files["config.toml"])
    name = rng.choice(["vllm.json", "sglang.jsonl", "profile_export.json"])
    text = files[name]
    if rng.random() < 0.5:
        text = mutate_text(text, rng)
    else:
        data = json.loads(text)
        mutate_spec(data, rng)
        text = json.dumps(data) + ("\n" if name.endswith("jsonl") else "")
    bench = case / name
    bench.write_text(text, encoding="utf-8", errors="surrogatepass")
    argv = ["calibrate", "--from-bench", str(bench), "--config", str(config), "--out", str(case / "p.json")]
    return lambda: _exit_0_or_2(argv, case, keep=(config, bench))


def _recorded_folder(work: Path) -> Path:
    """A ``validate`` folder with one live trial of the tiny Qwen2-Audio on the CPU (about 10 s, once a
    process), and its config and profile beside it."""
    import contextlib
    import io
    import shutil

    from easerve.cli import main
    from easerve.cli.search_cmd import dump_toml
    from tests.cli.test_bad_input import CPU_PROFILE, LIVE

    folder = work / "recorded"
    if not folder.exists():
        folder.mkdir()
        # 24 requests, as tests/calibration_loop runs: the refit leaves out warm-up and pause rows, which
        # a loaded host makes more of, and still needs rows of every stage (with 10 it refused them all)
        workload = {**LIVE["workload"], "num_requests": 24}
        (folder / "live.toml").write_text(dump_toml({**LIVE, "workload": workload}))
        shutil.copy(CPU_PROFILE, folder / "profile.json")
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["validate", str(folder / "live.toml"), "--profile", str(folder / "profile.json"),
                         "--out", str(folder / "report"), "--repeats", "1", "--host-cores", "profile"]) == 0
        summary = json.loads((folder / "report" / "summary.json").read_text())
        summary["host_cores"] = {"base": 1.5}  # what --host-cores auto replays
        (folder / "report" / "summary.json").write_text(json.dumps(summary))
    return folder


def _mutate_records(path: Path, rng: random.Random) -> None:
    """A records table with a column dropped, set to a wild value, or its rows cut or doubled."""
    import pandas as pd

    frame = pd.read_parquet(path)
    column = rng.choice(list(frame.columns))
    op = rng.random()
    if op < 0.25:
        frame = frame.drop(columns=[column])
    elif op < 0.7:
        wild = rng.choice([-1, 0, 1e300, float("nan"), float("inf"), "x", None, True])
        rows = frame.index if rng.random() < 0.5 else frame.index[:1]
        frame[column] = frame[column].astype(object)
        frame.loc[rows, column] = wild
    elif op < 0.85:
        frame = frame.iloc[: rng.randrange(len(frame) + 1)]
    else:
        frame = pd.concat([frame, frame.iloc[:2]])
    try:
        frame.to_parquet(path)
    except Exception:  # a column pyarrow cannot type (mixed objects): write it as text instead
        frame.astype({column: str} if column in frame else {}).to_parquet(path)


def _damage(name: str, folder: Path, rng: random.Random) -> None:
    """``folder / name`` removed, its table's values or JSON's entries mutated, or its bytes."""
    target = folder / name
    op = rng.random()
    if op < 0.1:
        target.unlink()
    elif target.suffix == ".parquet" and op < 0.8:
        _mutate_records(target, rng)
    elif target.suffix == ".json" and op < 0.6:
        data = json.loads(target.read_text())
        mutate_spec(data, rng)
        target.write_text(json.dumps(data))
    else:
        text = mutate_text(target.read_bytes().decode("latin-1"), rng)
        target.write_bytes(text.encode("latin-1", errors="replace"))


def _recorded_case(rng: random.Random, work: Path) -> Callable[[], object]:
    """``validate --live-from`` on an earlier report with one of its files mutated (its summaries, a
    trial's config, records or other tables, as text or as values, or gone): it exits 0, or 2 with one
    line and nothing written."""
    import shutil

    valid = _recorded_folder(work)
    case = work / f"recorded-{next(_SERIAL)}"
    shutil.copytree(valid / "report", case / "report")
    trial = case / "report" / "runs" / "base" / "live-0"
    folder, name = rng.choice([(case / "report", "summary.json"), (trial, "summary.json"),
                               (trial, "config.json"), (trial, "records.parquet"), (trial, "records.parquet"),
                               (trial, "stage_log.parquet")])
    _damage(name, folder, rng)
    cores = rng.choice(["profile", "auto", "2"])
    argv = ["validate", str(valid / "live.toml"), "--profile", str(valid / "profile.json"), "--out",
            str(case / "out"), "--live-from", str(case / "report"), "--host-cores", cores]
    return lambda: _exit_0_or_2(argv, case, keep=(case / "report",))


def _runs_case(rng: random.Random, work: Path) -> Callable[[], object]:
    """``calibrate --from-runs`` on a live trial with one of its files damaged (as in ``recorded``)."""
    import shutil

    valid = _recorded_folder(work)
    case = work / f"runs-{next(_SERIAL)}"
    shutil.copytree(valid / "report" / "runs" / "base" / "live-0", case / "trial")
    _damage(rng.choice(["summary.json", "config.json", "records.parquet", "stage_log.parquet",
                        "stage_log.parquet"]), case / "trial", rng)
    argv = ["calibrate", "--from-runs", str(case / "trial"), "--profile", str(valid / "profile.json"),
            "--out", str(case / "p.json")]
    return lambda: _exit_0_or_2(argv, case, keep=(case / "trial",))


def _live_case(rng: random.Random, work: Path) -> Callable[[], object]:
    """A shipped config's ``[live]`` table mutated, read as the live executor reads it."""
    import tomllib

    from easerve.resources import CONFIGS_DIR
    from live.options import LiveOptions

    files = [f for f in sorted(CONFIGS_DIR.glob("*.toml")) if "[live]" in f.read_text()]
    table = tomllib.loads(rng.choice(files).read_text())["live"]
    if rng.random() < 0.3:
        table[rng.choice(["device", "start_method", "partition_backend", "weights_dir", "nope"])] = "x"
    mutate_spec(table, rng)
    return lambda: LiveOptions.from_dict(table)


#: a small config the CLI cases run (20 requests of the paper's image model)
CLI_CONFIG = {
    "seed": 0, "model": {"name": "llava-v1.6-34b"}, "cluster": {"gpu": "rtx6000ada", "num_gpus": 8},
    "deployment": {"encode": {"num_workers": 1, "tp": 2}, "prefill": {"num_workers": 1, "tp": 2},
                   "decode": {"num_workers": 2, "tp": 2}, "max_encode_batch": 8, "remote_fraction": 0.5},
    "workload": {"mix": "llava-image", "rate_hz": 1.0, "num_requests": 20},
}
#: valid command lines (CONFIG, OUT and SHOW stand for the config, a fresh output path and a profile)
COMMANDS = [
    ["sim", "CONFIG", "--out", "OUT", "--preset", "easerve", "--rate", "1.5", "--no-plots"],
    ["sim", "CONFIG", "--out", "OUT", "--preset", "vllm", "--no-plots", "--force"],
    ["workload", "CONFIG", "--out", "OUT.csv", "--seed", "3", "--rate", "2"],
    ["capacity", "CONFIG", "--out", "OUT", "--tier", "moderate", "--start-rate", "0.5", "--max-rate", "2",
     "--tolerance", "0.5", "--max-steps", "2", "--trial-s", "10", "--seeds", "0", "--no-plots"],
    ["recipe", "CONFIG", "--engine", "vllm", "--out", "OUT"],
    ["recipe", "CONFIG", "--engine", "dynamo", "--out", "OUT", "--force"],
    ["profile", "analytic", "--model", "qwen2.5-vl-32b", "--gpu", "h100-sxm", "--tp", "2",
     "--out", "OUT.json"],
    ["profile", "show", "SHOW", "--prompt-tokens", "100", "--output-tokens", "20", "--items", "576,2928"],
    ["model", "list"], ["gpu", "list"],
]
#: what a mutation puts in a command line
ARGS = ["", "-1", "0", "nan", "inf", "-inf", "1e400", "x", "1.5", "99999999999999999999", "--force", "-",
        "--nope", "--out", "1,2", ",", "0.0001", "1e-300", "moderate,strict", "vllm", "/", ".", "é", "true"]


def _cli_case(rng: random.Random, work: Path) -> Callable[[], object]:
    """A valid command line mutated (a token replaced, dropped, doubled or inserted) and run: it
    exits 0, or 2 with one line and nothing written under its output path."""
    import contextlib
    import io

    from easerve.cli import main
    from easerve.cli.search_cmd import dump_toml

    case = work / f"cli-{next(_SERIAL)}"
    case.mkdir()
    config = case / "config.toml"
    config.write_text(dump_toml(CLI_CONFIG))
    show = work / "show.json"
    if not show.exists():
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["profile", "analytic", "--model", "llava-v1.6-34b", "--gpu", "rtx6000ada", "--out",
                         str(show)]) == 0
    out = case / "out"
    names = {"CONFIG": str(config), "OUT": str(out), "OUT.csv": f"{out}.csv", "OUT.json": f"{out}.json",
             "SHOW": str(show)}
    argv = [names.get(token, token) for token in rng.choice(COMMANDS)]
    for _ in range(rng.choice([1, 1, 2])):
        op, at = rng.random(), rng.randrange(1, len(argv) + 1)
        if op < 0.5 and at < len(argv):
            argv[at] = rng.choice(ARGS)
        elif op < 0.65 and at < len(argv):
            del argv[at]
        elif op < 0.8 and at < len(argv):
            argv.insert(at, argv[at])
        else:
            argv.insert(at, rng.choice(ARGS))

    return lambda: _exit_0_or_2(argv, case, keep=(config,))


def _exit_0_or_2(argv: list[str], case: Path, *, keep: tuple[Path, ...]) -> int:
    """Run ``easerve argv``: 0 is taken; 2 must print one line and write nothing in ``case`` but
    ``keep`` (raised as that line's ``ValueError``); anything else is a finding."""
    import contextlib
    import io

    from easerve.cli import main

    err, here = io.StringIO(), Path.cwd()
    os.chdir(case)  # a relative output (a mutated --out) lands where it is looked for
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = main(argv)
    finally:
        os.chdir(here)
    said = err.getvalue().strip()
    staged = [p.name for p in case.rglob("*") if ".tmp-" in p.name or ".old-" in p.name]
    if staged:
        raise RuntimeError(f"exit {status} left {staged[:3]}: {argv[:3]}")
    if status == 2:
        written = [p for p in case.iterdir() if p not in keep]
        if written:
            raise RuntimeError(f"exit 2 but wrote {[p.name for p in written]}: {argv[:3]}")
        raise ValueError(said.removeprefix(f"easerve {argv[0]}: error: "))
    if status != 0:
        raise RuntimeError(f"exit {status}: {said[-200:]} ({argv})")
    return status


def _plan_table_case(rng: random.Random, work: Path) -> Callable[[], object]:
    """A plan table (two bands and the controller's settings, as ``easerve plan-table`` writes)
    mutated and run by ``easerve sim --controller``: exit 0, or 2 with one line, nothing written."""
    from easerve.cli.search_cmd import dump_toml
    from easerve_core.config import ExperimentConfig
    from easerve_core.controller import Band, ControllerSettings, PlanTable

    case = work / f"table-{next(_SERIAL)}"
    case.mkdir()
    config = case / "config.toml"
    config.write_text(dump_toml(CLI_CONFIG))
    start = ExperimentConfig.from_dict(copy.deepcopy(CLI_CONFIG)).deployment
    table = PlanTable((Band(rate_hz=1.0, deployment=start),
                       Band(rate_hz=3.0, deployment=start.with_(max_encode_batch=4))))
    data = {**table.to_dict(), "settings": ControllerSettings().to_dict()}
    mutate_spec(data, rng)
    path = case / "plan_table.json"
    path.write_text(json.dumps(data))
    argv = ["sim", str(config), "--controller", str(path), "--out", str(case / "out"), "--no-plots"]
    return lambda: _exit_0_or_2(argv, case, keep=(config, path))


#: a shipped config of each shipped profile's model, run on the profile
PROFILE_CONFIGS = {"llava-v1.6-34b": "llava34b_rtx6000ada.toml",
                   "qwen2.5-vl-32b": "qwen25vl32b_rtx6000ada.toml",
                   "ultravox-v0.6-gemma3-27b": "ultravox27b_rtx6000ada.toml",
                   "qwen2-audio": "small_qwen2audio_confirm_cpu.toml"}


def _profile_case(rng: random.Random, work: Path) -> Callable[[], object]:
    """A shipped profile (analytic or fitted, calibration/profiles) mutated, loaded, priced with
    and simulated on (20 requests of a shipped config of its model, on its GPU)."""
    import tomllib

    from calibration.registry import load_profile
    from calibration.session import compose
    from easerve.resources import CONFIGS_DIR
    from easerve_core.config import ExperimentConfig
    from easerve_core.profile import profile_for_tp
    from runtime.configs import DISK

    shipped = sorted((Path(__file__).resolve().parents[2] / "calibration" / "profiles").rglob("*.json"))
    data = json.loads(rng.choice(shipped).read_text())
    model, gpu = data["model"], data["gpu"]
    mutate_spec(data, rng)
    path = work / f"profile-{next(_SERIAL)}.json"
    path.write_text(json.dumps(data))
    config = tomllib.loads((CONFIGS_DIR / PROFILE_CONFIGS[model]).read_text())
    config["profile"] = {**config.get("profile", {}), "path": str(path)}
    config["cluster"]["gpu"] = gpu
    config["workload"]["num_requests"] = 20

    def run() -> object:
        profile = load_profile(path)
        for tp in (1, 2):
            stage = profile_for_tp(profile, tp)
            stage.encode_s([500, 900])
            stage.prefill_s([2000])
            stage.decode_step_s(8, 4000)
        return compose(ExperimentConfig.from_dict(config, base_dir=CONFIGS_DIR, files=DISK)).sim().run()
    return run


def _samples_case(rng: random.Random, work: Path) -> Callable[[], object]:
    """Stage samples (as ``easerve calibrate`` writes them; tests/calibration/test_fit.py's synthetic
    ones) mutated, read, fitted and made a profile (``easerve profile fit``)."""
    import numpy as np

    from calibration.fit import fit_samples, load_samples
    from calibration.registry import fitted_doc
    from tests.calibration.test_fit import TRUE, synthetic_samples

    data = synthetic_samples(TRUE, np.random.default_rng(rng.randrange(4)), noise=0.02)
    if rng.random() < 0.3:
        data["typical_mm_tokens_per_item"] = [500]
    mutate_spec(data, rng)
    path = work / f"samples-{next(_SERIAL)}.json"
    path.write_text(json.dumps(data))

    def run() -> object:
        samples = load_samples(path)
        return fitted_doc(fit_samples(samples), samples, created="2026-12-03")
    return run


CASES = {"traces": _trace_case, "specs": _spec_case, "shifts": _shift_case, "configs": _config_case,
         "sizes": _sizes_case, "gpus": _gpu_case, "models": _hf_case, "bench": _bench_case,
         "live": _live_case, "cli": _cli_case, "profiles": _profile_case,
         "tables": _plan_table_case, "samples": _samples_case, "refits": _refit_case,
         "recorded": _recorded_case, "runs": _runs_case}


def failures(kind: str, cases: int, seed: int) -> tuple[dict[str, str], int]:
    """What went wrong, by kind of failure (the first case of each), and how many cases were taken."""
    rng, found, taken = random.Random(seed), {}, 0
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # notices of sorted rows and the like
        for _ in range(cases):
            case = CASES[kind](rng, Path(tmp))
            try:
                case()
                taken += 1
            except ValueError as exc:
                short = str(exc).replace(tmp, "")
                said = re.split(r"; known[\w ]*: ", short)[0]  # a list of the known names is long by design
                if "\n" in short or not short or len(said) > LIMIT:
                    found.setdefault(f"ValueError not one short line: {short[:80]!r}", short)
            except Exception as exc:  # every other exception is the finding
                found.setdefault(f"{type(exc).__name__}: {str(exc)[:80]}", traceback.format_exc())
    return found, taken


if __name__ == "__main__":
    kind, cases, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    found, taken = failures(kind, cases, seed)
    for key, detail in found.items():
        print(key)
        print(detail[-800:])
    print(f"{kind}: {cases} cases, {taken} taken, {len(found)} kind(s) of failure")
    raise SystemExit(1 if found else 0)
