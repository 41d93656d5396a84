"""Bad input to every subcommand: one stderr line naming the culprit, exit status 2, nothing written.

Each case builds its bad files inside the test, runs ``easerve`` in-process
(the one error boundary, easerve.cli.main) and checks: status 2, exactly
one line on stderr that names the file, field or flag, no traceback, and no
file or folder created or changed under the test's folder (the ``--out``
target above all). Classes: unreadable or malformed files (missing, a
folder, binary, bad TOML/JSON, malformed trace rows), config fields (unknown
names, wrong types, out of range, over the size limits), flags (argparse
types, ranges, combinations), outputs that cannot be written (an existing
file, a path under a file, an unwritable place, a non-empty folder without
--force), and deployments the live executor cannot place.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from easerve.cli import main
from easerve.cli.search_cmd import dump_toml

ROOT = Path(__file__).resolve().parents[2]
CPU_PROFILE = ROOT / "calibration" / "profiles" / "cpu" / "qwen2-audio-small--cpu.json"
ANALYTIC = ROOT / "calibration" / "profiles" / "llava-v1.6-34b--rtx6000ada.json"
SIM = {
    "seed": 0, "model": {"name": "llava-v1.6-34b"}, "cluster": {"gpu": "rtx6000ada", "num_gpus": 8},
    "deployment": {"encode": {"num_workers": 1, "tp": 2}, "prefill": {"num_workers": 1, "tp": 2},
                   "decode": {"num_workers": 2, "tp": 2}, "max_encode_batch": 8, "remote_fraction": 0.5},
    "workload": {"mix": "llava-image", "rate_hz": 2.0, "num_requests": 50},
}
LIVE = {
    "seed": 0, "model": {"name": "qwen2-audio", "size": "tiny"}, "cluster": {"gpu": "cpu", "num_gpus": 8},
    "deployment": {"encode": {"num_workers": 1}, "prefill": {"num_workers": 1},
                   "decode": {"num_workers": 1}, "max_encode_batch": 4, "remote_fraction": 0.5},
    "workload": {"mix": "ultravox-audio", "rate_hz": 20.0, "num_requests": 10, "prompt_tokens": [8, 16],
                 "output_tokens": [2, 4]},
    "profile": {"sm_share_table": {"1": 0.5, "4": 1.0}},
    "live": {"mm_token_scale": 0.25},
}


def _set(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``data`` with ``a.b.c`` set to ``value`` (None removes it)."""
    out = copy.deepcopy(data)
    *head, last = path.split(".")
    node = out
    for key in head:
        node = node.setdefault(key, {})
    if value is None:
        node.pop(last, None)
    else:
        node[last] = value
    return out


Setup = Callable[[Path], list[str]]


@dataclass(frozen=True)
class Case:
    name: str
    setup: Setup
    culprit: str


def config(base: dict[str, Any], *changes: tuple[str, Any], name: str = "c.toml") -> Callable[[Path], Path]:
    def write(tmp: Path) -> Path:
        data = base
        for path, value in changes:
            data = _set(data, path, value)
        (tmp / name).write_text(dump_toml(data))
        return tmp / name
    return write


def sim(*changes: tuple[str, Any], extra: tuple[str, ...] = ()) -> Setup:
    return lambda tmp: ["sim", str(config(SIM, *changes)(tmp)), "--out", "out", "--no-plots", *extra]


def live(*changes: tuple[str, Any]) -> Setup:
    return lambda tmp: ["live", str(config(LIVE, *changes)(tmp)), "--out", "out"]


def raw(name: str, content: bytes | str) -> Callable[[Path], Path]:
    def write(tmp: Path) -> Path:
        path = tmp / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return path
    return write


BINARY = bytes(range(256)) * 4
TRACE_HEADER = "arrival_s,modality,prompt_tokens,output_tokens,mm_tokens_per_item\n"


def with_file(make: Callable[[Path], Path], argv: Callable[[Path], list[str]]) -> Setup:
    return lambda tmp: (make(tmp), argv(tmp))[1]


def run_folder(config: str) -> Setup:
    """``calibrate --from-runs r`` on a folder whose config.json holds ``config`` (an internal error
    before: a TypeError or KeyError, or json's message naming no file)."""
    def setup(tmp: Path) -> list[str]:
        (tmp / "r").mkdir()
        (tmp / "r" / "stage_log.parquet").write_bytes(b"PAR1")
        (tmp / "r" / "config.json").write_text(config)
        return ["calibrate", "--from-runs", "r", "--out", "p.json"]
    return setup


def sim_trace(content: bytes | str, name: str = "t.csv") -> Setup:
    """``sim`` over a trace file ``name`` that holds ``content``."""
    return with_file(raw(name, content), sim(("workload.trace", name)))


def search(*flags: str, changes: tuple[tuple[str, Any], ...] = ()) -> Setup:
    return lambda tmp: ["search", str(config(SIM, *changes)(tmp)), "--out", "out", "--trials", "2",
                        "--trial-s", "5", "--min-requests", "20", *flags]


def capacity(*flags: str, changes: tuple[tuple[str, Any], ...] = ()) -> Setup:
    return lambda tmp: ["capacity", str(config(SIM, *changes)(tmp)), "--out", "out", "--no-plots", *flags]


def validate(*flags: str) -> Setup:
    small = _set(_set(LIVE, "model.size", "small"), "profile", None)
    return lambda tmp: ["validate", str(config(small)(tmp)), "--profile", str(CPU_PROFILE), "--out", "out",
                        *flags]


CASES = [
    # -- sim: files ------------------------------------------------------------------------------
    Case("sim-config-missing", lambda tmp: ["sim", "nope.toml", "--out", "out"],
         "config file not found: nope"),
    Case("sim-config-is-folder", lambda tmp: (os.mkdir(tmp / "d.toml"), ["sim", "d.toml", "--out", "out"])[1],
         "d.toml: not a text config file"),
    Case("sim-config-binary", with_file(raw("b.toml", BINARY), lambda tmp: ["sim", "b.toml", "--out", "out"]),
         "b.toml: not a text config file"),
    Case("sim-config-bad-toml", with_file(raw("t.toml", "[model\nname = 1"),
                                          lambda tmp: ["sim", "t.toml", "--out",
                                                       "out"]), "t.toml: not valid TOML"),
    Case("sim-unknown-table", sim(("gpus", {"a": 1})), "unknown config table(s): gpus"),
    Case("sim-unknown-model", sim(("model.name", "llava-9000")), "unknown model 'llava-9000'"),
    # a name or path that is not a string ran str()'d: a table became a model called '{}'
    Case("sim-model-name-table", sim(("model.name", {"a": 1})), "model.name must be a string, got {'a': 1}"),
    Case("sim-trace-number", sim(("workload.trace", 5)), "workload.trace must be a string, got 5"),
    Case("sim-unknown-gpu", sim(("cluster.gpu", "rtx9000")), "unknown GPU 'rtx9000'"),
    Case("sim-num-gpus-text", sim(("cluster.num_gpus", "eight")), "cluster.num_gpus must be an integer"),
    Case("sim-num-gpus-zero", sim(("cluster.num_gpus", 0)), "cluster.num_gpus must be >= 1"),
    Case("sim-num-gpus-huge", sim(("cluster.num_gpus", 100_000)), "cluster.num_gpus must be <= 4,096"),
    Case("sim-bandwidth-zero", sim(("cluster.link_bytes_per_s", 0)), "cluster.link_bytes_per_s must be > 0"),
    Case("sim-nic-bandwidth-zero", sim(("cluster.num_nodes", 2), ("cluster.nic_bytes_per_s", 0)),
         "cluster.nic_bytes_per_s must be > 0"),
    Case("sim-nic-bandwidth-negative", sim(("cluster.num_nodes", 2), ("cluster.nic_bytes_per_s", -1e9)),
         "cluster.nic_bytes_per_s must be > 0"),
    Case("sim-nic-latency-negative", sim(("cluster.nic_latency_s", -1)),
         "cluster.nic_latency_s must be >= 0"),
    Case("sim-num-nodes-uneven", sim(("cluster.num_nodes", 3)), "cluster.num_nodes must divide num_gpus"),
    Case("sim-link-sharing", sim(("cluster.link_sharing", "greedy")), "unknown link_sharing 'greedy'"),
    Case("sim-placement-no-node", sim(("cluster.num_gpus", 16), ("cluster.num_nodes", 2),
                                      ("deployment.placement", {"encode": [0], "prefill": [0],
                                                                "decode": [1, 2]})),
         "deployment.placement.decode[1] is node 2 but the cluster has 2 node(s)"),
    Case("sim-placement-count", sim(("cluster.num_gpus", 16), ("cluster.num_nodes", 2),
                                    ("deployment.placement", {"encode": [0], "prefill": [0], "decode": [1]})),
         "deployment.placement.decode names 1 node(s) for 2 decode worker(s)"),
    Case("sim-placement-full-node", sim(("cluster.num_gpus", 16), ("cluster.num_nodes", 2),
                                        ("deployment.placement", {"encode": [0], "prefill": [0],
                                                                  "decode": [0, 0, 0, 0]}),
                                        ("deployment.decode.num_workers", 4)),
         "deployment.placement puts more than 8 GPUs on node 0"),
    Case("sim-placement-strategy", sim(("deployment.placement", "scatter")),
         "unknown placement.strategy 'scatter'"),
    Case("sim-tp-across-nodes", sim(("cluster.num_nodes", 8)),
         "deployment.encode.tp is 2 but a node has 1 GPUs: a TP group cannot span nodes"),
    Case("sim-stage-typo", sim(("deployment.encode", {"num_worker": 1})),
         "unknown deployment.encode field(s): num_worker"),
    Case("sim-stage-no-workers", sim(("deployment.decode", {"tp": 2})), "deployment.decode.num_workers"),
    Case("sim-tp-three", sim(("deployment.prefill.tp", 3)), "deployment.prefill.tp must be a power of two"),
    Case("sim-tp-huge", sim(("deployment.prefill.tp", 128)), "deployment.prefill.tp must be <= 64"),
    Case("sim-batch-zero", sim(("deployment.max_encode_batch", 0)),
         "deployment.max_encode_batch must be >= 1"),
    Case("sim-batch-huge", sim(("deployment.max_encode_batch", 100_000_000)),
         "deployment.max_encode_batch must be <= 1,024"),
    Case("sim-remote-fraction", sim(("deployment.remote_fraction", 1.5)), "deployment.remote_fraction"),
    Case("sim-sharing-name", sim(("deployment.sm_sharing", "fast")), "unknown sm_sharing 'fast'"),
    Case("sim-router-name", sim(("deployment.router", "rr")), "unknown router 'rr'"),
    Case("sim-unknown-deployment-key", sim(("deployment.speed", 2)), "unknown deployment field(s): speed"),
    Case("sim-too-many-gpus", sim(("deployment.decode.num_workers", 4)),
         "needs 12 GPUs but the cluster has 8"),
    Case("sim-preset", sim(extra=("--preset", "sglang")), "unknown preset 'sglang'"),
    Case("sim-rate-text", sim(extra=("--rate", "abc")), "argument --rate: invalid float value: 'abc'"),
    Case("sim-rate-negative", sim(extra=("--rate", "-1")), "--rate must be a positive number"),
    Case("sim-requests-huge", sim(("workload.num_requests", 100_000_000_000)),
         "workload.num_requests must be <= 2,000,000"),
    Case("sim-requests-zero", sim(("workload.num_requests", 0)), "workload.num_requests must be >= 1"),
    Case("sim-unknown-mix", sim(("workload.mix", "llava-gif")), "unknown mix 'llava-gif'"),
    Case("sim-no-rate", sim(("workload.rate_hz", None)), "workload.rate_hz is required"),
    Case("sim-prompt-huge", sim(("workload.prompt_tokens", [5, 20_000_000])),
         "prompt_tokens[1] must be <= 1,048,576"),
    Case("sim-items-huge", sim(("workload.items_per_request", [1, 5000])), "items_per_request[1] must be <="),
    Case("sim-unknown-workload-key", sim(("workload.rps", 2)), "unknown workload field(s): rps"),
    Case("sim-encode-tokens-count",
         sim(("workload.item_tokens", [576]), ("workload.item_encode_tokens", [576, 9])),
         "item_encode_tokens must hold one count per item_tokens choice (1), got 2"),
    Case("sim-encode-tokens-zero", sim(("workload.item_tokens", [576]), ("workload.item_encode_tokens", [0])),
         "item_encode_tokens[0] must be >= 1"),
    Case("sim-trace-missing", sim(("workload.trace", "nope.csv")), "trace file not found"),
    Case("sim-trace-binary", sim_trace(BINARY), "t.csv: not a text trace file"),
    Case("sim-trace-bad-row", sim_trace(TRACE_HEADER + "0.5,image,x,4,2928\n"), "prompt_tokens"),
    # trace rows are held to the rules a mix follows (easerve_core.limits), and to their header
    Case("sim-trace-prompt-huge", sim_trace(TRACE_HEADER + "0.5,image,1000000000000,4,2928\n"),
         "t.csv:2: prompt_tokens must be <= 1,048,576"),
    Case("sim-trace-output-huge", sim_trace(TRACE_HEADER + "0.5,image,10,2000000,2928\n"),
         "t.csv:2: output_tokens must be <= 1,048,576"),
    Case("sim-trace-item-huge", sim_trace(TRACE_HEADER + "0.5,image,10,4,3000000\n"),
         "t.csv:2: mm_tokens_per_item[0] must be <= 1,048,576"),
    Case("sim-trace-items-many", sim_trace(TRACE_HEADER + "0.5,image,10,4," + ";".join(["5"] * 300) + "\n"),
         "t.csv:2: number of mm_tokens_per_item must be <= 256"),
    Case("sim-trace-arrival-huge", sim_trace(TRACE_HEADER + "0.5,image,10,4,2928\n1e300,image,10,4,2928\n"),
         "t.csv:3: arrival_s must be <= 31,536,000 s"),
    Case("sim-trace-arrival-inf", sim_trace(TRACE_HEADER + "inf,image,10,4,2928\n"),
         "t.csv:2: arrival_s must be finite"),
    Case("sim-trace-extra-field", sim_trace(TRACE_HEADER + "0.5,image,10,4,2928,99\n"),
         "t.csv:2: 1 more field(s) than the header's 5"),
    Case("sim-trace-open-quote", sim_trace(TRACE_HEADER + '0.5,"image,10,4,2928\n1.0,image,10,4,2928\n'),
         "t.csv:2-3: a quoted field runs past the end of its line"),
    Case("sim-trace-column-twice", sim_trace(TRACE_HEADER.strip() + ",modality\n0.5,image,10,4,2928,image\n"),
         "t.csv:1: column 'modality' appears 2 times"),
    Case("sim-trace-empty-item", sim_trace(TRACE_HEADER + "0.5,image,10,4,2928;;2928\n"),
         "t.csv:2: field 'mm_tokens_per_item' is malformed: '2928;;2928'"),
    Case("sim-trace-id-twice", sim_trace("request_id," + TRACE_HEADER + "7,0.5,image,10,4,2928\n"
                                         "7,0.9,image,10,4,2928\n"),
         "t.csv:3: request_id values must be unique; 7 is on line 2 too"),
    # a stream the model has no tower for: refused by both engines, not simulated at an image's cost
    Case("sim-trace-other-modality", sim_trace(TRACE_HEADER + "0.5,audio,10,4,60\n"),
         "workload.trace: audio requests, but model llava-v1.6-34b takes image input"),
    # an input past LLaVA-34B's 4,096-token context: an engine refuses it (outputs are capped instead)
    Case("sim-trace-past-context", sim_trace(TRACE_HEADER + "0.5,image,2000,4,2928\n"),
         "workload.trace: 1 request(s) have an input (prompt and items) at or past the model's context of "
         "4,096 tokens (request 0: 4,928)"),
    # a range whose longest input reaches the context: the stream drawn may miss it, another seed's not
    Case("sim-mix-range-past-context", sim(("workload.prompt_tokens", [128, 1168])),
         "workload.mix: inputs (prompt and items) of up to 4,096 tokens can be drawn, at or past the model's "
         "context of 4,096, which an engine refuses"),
    # a trace is one stream: a recheck over several would replay it several times, an interval of 0
    Case("search-trace-recheck-seeds",
         with_file(raw("t.csv", TRACE_HEADER + "0.5,image,10,4,2928\n1.0,image,10,4,2928\n"),
                   search("--rate", "2", "--recheck-seeds", "3", changes=(("workload.trace", "t.csv"),))),
         "--recheck-seeds 3: the workload is a trace, one stream, which the recheck replays once"),
    Case("search-mix-range-past-context",
         search("--rate", "2", changes=(("workload.prompt_tokens", [128, 1168]),)),
         "workload.mix: inputs (prompt and items) of up to 4,096 tokens can be drawn"),
    Case("sim-mix-other-modality", sim(("workload.mix", "ultravox-audio")),
         "workload.mix: audio requests, but model llava-v1.6-34b takes image input; choose a mix"),
    Case("sim-video-on-an-image-model", sim(("workload.mix", "qwen-video")),
         "workload.mix: video requests, but model llava-v1.6-34b takes image input"),
    Case("search-mix-other-modality", search("--rate", "2", changes=(("workload.mix", "ultravox-audio"),)),
         "workload.mix: audio requests, but model llava-v1.6-34b takes image input"),
    Case("sim-burstgpt-long-row",
         with_file(raw("b.csv", "Timestamp,Request tokens,Response tokens\n1,10,5\n2,10,5,7\n"),
                   sim(("workload.trace", "b.csv"), ("workload.trace_format", "burstgpt"))),
         "b.csv:3: 1 more field(s) than the header's 3"),
    Case("sim-trace-unknown-column", sim_trace(TRACE_HEADER.strip() + ",note\n0.5,image,10,4,2928,x\n"),
         "t.csv:1: unknown trace column(s): 'note'"),
    Case("sim-trace-jsonl-unknown-key",
         sim_trace('{"arrival_s": 0.5, "modality": "image", "prompt_tokens": 10, '
                   '"output_tokens": 4, "mm_tokens_per_item": [2928], "prio": 1}\n', name="t.jsonl"),
         "t.jsonl:1: unknown field(s) 'prio'"),
    Case("sim-trace-jsonl-key-twice",
         sim_trace('{"arrival_s": 0.5, "modality": "image", "prompt_tokens": 10, '
                   '"output_tokens": 4, "mm_tokens_per_item": [2928], "output_tokens": 9}\n', name="t.jsonl"),
         "t.jsonl:1: key 'output_tokens' is named twice"),
    Case("workload-trace-prompt-huge",
         with_file(raw("t.csv", TRACE_HEADER + "0.5,image,1000000000000,4,2928\n"),
                   lambda tmp: ["workload", str(config(SIM, ("workload.trace", "t.csv"))(tmp)),
                                "--out", "o.csv"]),
         "t.csv:2: prompt_tokens must be <= 1,048,576"),
    Case("workload-seed-recorded-trace",
         with_file(raw("t.csv", TRACE_HEADER + "0.5,image,10,4,2928\n"),
                   lambda tmp: ["workload", str(config(SIM, ("workload.trace", "t.csv"))(tmp)),
                                "--seed", "5", "--out", "o.csv"]),
         "--seed: a recorded trace carries every request whole, so nothing is drawn with it"),
    Case("sim-rate-tiny", sim(extra=("--rate", "1e-9")), "rate_hz 1e-09: 50 requests would arrive over"),
    Case("sim-workload-rate-tiny", sim(("workload.rate_hz", 1e-300)), "more than 31,536,000 s"),
    Case("sim-rate-huge", sim(extra=("--rate", "1e300")), "rate_hz must be <= 1e+06 req/s"),
    Case("sim-workload-rate-huge", sim(("workload.rate_hz", 1e300)), "rate_hz must be <= 1e+06 req/s"),
    Case("search-rate-huge", search("--rate", "1e300"), "rate must be <= 1e+06 req/s"),
    # keys that moved between releases name their old place and their new one
    Case("sim-moved-share-table-live", sim(("live.sm_share_table", {"1": 0.5})),
         "[live] sm_share_table has moved to [profile] sm_share_table"),
    Case("sim-moved-share-table-sim", sim(("sim.sm_share_table", {"1": 0.5})),
         "[sim] sm_share_table has moved to [profile] sm_share_table"),
    Case("sim-moved-share-table-deployment", sim(("deployment.sm_share_table", {"1": 0.5})),
         "[deployment] sm_share_table has moved to [profile] sm_share_table"),
    Case("sim-profile-missing", sim(("profile.path", "nope.json")), "profile file not found"),
    Case("sim-profile-binary", with_file(raw("p.json", BINARY), sim(("profile.path", "p.json"))),
         "p.json: not a text profile file"),
    Case("sim-profile-bad-json", with_file(raw("p.json", "{oops"), sim(("profile.path", "p.json"))),
         "p.json: not valid JSON"),
    Case("sim-profile-other-model", sim(("profile.path", str(CPU_PROFILE))),
         "profile.path is for qwen2-audio"),
    Case("sim-share-table", sim(("profile.sm_share_table", {"1": 1.5})), "profile.sm_share_table"),
    Case("sim-tier", sim(("slo.tier", "heroic")), "unknown slo.tier 'heroic'"),
    Case("sim-slo-ttft-negative", sim(("slo.ttft_s", -1.0)), "slo.ttft_s must be > 0, got -1.0"),
    Case("sim-slo-tpot-text", sim(("slo.tpot_s", "fast")), "slo.tpot_s must be a number, got 'fast'"),
    Case("sim-slo-attainment-zero", sim(("slo.attainment", 0)), "slo.attainment must be in (0, 1], got 0"),
    Case("sim-slo-attainment-big", sim(("slo.attainment", 1.5)), "slo.attainment must be in (0, 1]"),
    Case("sim-slo-unknown-key", sim(("slo.ttft_p99", 3.0)), "unknown slo field(s): ttft_p99"),
    Case("sim-seed", sim(("seed", -1)), "seed must be >= 0"),
    Case("sim-option-key", sim(("sim.speed", 2)), "unknown sim field(s): speed"),
    Case("sim-option-flat-host", sim(("sim.num_host_cores", 2)), "host effects live in [sim.host]"),
    Case("sim-host-value", sim(("sim.host", {"stall_s": -1.0})), "host.stall_s must be >= 0"),
    Case("sim-scheduler-budget", sim(("sim.scheduler", {"step_token_budget": 0})),
         "sim.scheduler.step_token_budget must be >= 1"),
    Case("sim-scheduler-kv", sim(("sim.scheduler", {"decode_kv": "swap"})), "sim.scheduler.decode_kv"),
    Case("sim-scheduler-flag", sim(("sim.scheduler", {"chunked_prefill": "yes"})),
         "sim.scheduler.chunked_prefill must be true or false"),
    Case("sim-scheduler-prefill-flag", sim(("sim.scheduler", {"prefill_chunked": 1})),
         "sim.scheduler.prefill_chunked must be true or false, got 1"),
    Case("sim-scheduler-key", sim(("sim.scheduler", {"max_num_batched_tokens": 8})),
         "unknown sim.scheduler field(s): max_num_batched_tokens"),
    Case("sim-out-is-file", with_file(raw("out", "x"), sim()), "--out out: exists and is not a folder"),
    Case("sim-out-under-file", lambda tmp: (raw("f", "x")(tmp), [*sim()(tmp)[:2], "--out", "f/run"])[1],
         "--out f/run: f is a file, not a folder"),
    Case("sim-out-unwritable", lambda tmp: [*sim()(tmp)[:2], "--out", "/sys/easerve-test/run"],
         "is not writable"),
    Case("sim-out-not-empty", lambda tmp: ((tmp / "out").mkdir(), raw("out/old.png", "x")(tmp),
                                           sim()(tmp))[2],
         "--out out: exists and is not empty; pass --force"),
    # found by tests/core/mutation.py (kind cli): "--out . --force" failed to swap the working folder
    # (EBUSY) and left its ..tmp-* and ..old-* siblings behind
    Case("sim-out-working-folder", lambda tmp: [*sim()(tmp)[:2], "--out", ".", "--force"],
         "--out .: is the working folder or holds it"),
    Case("sim-out-above-working-folder", lambda tmp: [*sim()(tmp)[:2], "--out", "..", "--force"],
         "--out ..: is the working folder or holds it"),
    Case("recipe-out-working-folder", lambda tmp: ["recipe", str(config(SIM)(tmp)), "--engine", "dynamo",
                                                   "--out", ".", "--force"],
         "--out .: is the working folder or holds it"),
    # -- workload --------------------------------------------------------------------------------
    Case("workload-suffix", lambda tmp: ["workload", str(config(SIM)(tmp)), "--out", "t.txt"],
         "--out must end in .csv or .jsonl"),
    Case("workload-out-folder", lambda tmp: ((tmp / "t.csv").mkdir(),
                                             ["workload", str(config(SIM)(tmp)), "--out", "t.csv"])[1],
         "--out t.csv: is a folder"),
    Case("workload-no-table", with_file(raw("w.toml", "seed = 1\n"),
                                        lambda tmp: ["workload", "w.toml", "--out", "t.csv"]),
         "no [workload] table"),
    Case("workload-trace-format", lambda tmp: ["workload", str(config(SIM, ("workload.trace", "x.csv"),
                                                                      ("workload.trace_format",
                                                                       "azur"))(tmp)),
                                               "--out", "t.csv"], "trace_format"),
    Case("workload-azure-row", with_file(raw("az.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                                       "2023-11-16 18:15:46.6805900,374,44\n"
                                                       "2023-11-16 18:15:47.0,abc,44\n"),
                                         lambda tmp: ["workload", str(config(SIM, ("workload.trace",
                                                                                   "az.csv"),
                                                                             ("workload.trace_format",
                                                                              "azure"))(tmp)),
                                                      "--out", "t.csv"]), "az.csv:3"),
    Case("workload-azure-tokens-huge",
         with_file(raw("az.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                 "2023-11-16 18:15:46.6805900,10000000000,44\n"),
                                                 lambda tmp: ["workload", str(config(
                                                     SIM, ("workload.trace", "az.csv"),
                                                     ("workload.trace_format", "azure"))(tmp)),
                                                              "--out", "t.csv"]),
         "az.csv:2: field 'ContextTokens' must be <= 1,048,576"),
    Case("workload-seed-flag", lambda tmp: ["workload", str(config(SIM)(tmp)), "--out", "t.csv", "--seed",
                                            "x"],
         "argument --seed"),
    # -- search ----------------------------------------------------------------------------------
    Case("search-rate-zero", search("--rate", "0"), "rate must be > 0"),
    Case("search-rate-missing", lambda tmp: ["search", str(config(SIM)(tmp)), "--out", "out"],
         "the following arguments are required: --rate"),
    Case("search-tier", search("--rate", "1", "--tier", "heroic"), "unknown tier 'heroic'"),
    Case("search-grid-join", search("--rate", "1", "--sampler", "grid", "--join"), "--join: the grid"),
    Case("search-trials-zero", search("--rate", "1", "--trials", "0"), "trials must be >= 1"),
    Case("search-workers-zero", search("--rate", "1", "--workers", "0"), "workers must be >= 1"),
    Case("search-sampler", search("--rate", "1", "--sampler", "bayes"), "unknown sampler 'bayes'"),
    Case("search-sampler-compare", search("--rate", "1", "--sampler", "tpe", "--compare"),
         "--sampler: not with --compare, which runs tpe, random and grid"),
    Case("search-repeats-alone", search("--rate", "1", "--repeats", "3"),
         "--repeats: read only by a live confirmation; add --confirm K"),
    Case("search-refit-alone", search("--rate", "1", "--refit"), "--refit: read only by a live confirmation"),
    Case("search-baselines-alone", search("--rate", "1", "--baselines", "vllm"),
         "--baselines: read only by a live confirmation"),
    Case("search-force-alone", search("--rate", "1", "--force"), "--force: read only by a live confirmation"),
    Case("search-recheck-seeds-unread", search("--rate", "1", "--recheck-top", "0", "--recheck-seeds", "2"),
         "--recheck-seeds: --recheck-top 0 runs no recheck to read it"),
    Case("search-recheck-jobs-unread", search("--rate", "1", "--recheck-top", "0", "--recheck-jobs", "2"),
         "--recheck-jobs: --recheck-top 0 runs no recheck to read it"),
    Case("search-requests-text", search("--rate", "1", "--num-requests", "many"), "argument --num-requests"),
    Case("search-out-is-file", with_file(raw("out", "x"), search("--rate", "1")),
         "--out out: exists and is not"),
    Case("search-bad-config", search("--rate", "1", changes=(("deployment.max_encode_batch", 0),)),
         "deployment.max_encode_batch must be >= 1"),
    # -- capacity --------------------------------------------------------------------------------
    Case("capacity-seeds-zero", capacity("--seeds", "0"), "--seeds must be >= 1, got 0"),
    Case("capacity-seeds-huge", capacity("--seeds", "101"), "--seeds must be <= 100"),
    Case("capacity-seeds-on-a-trace",
         with_file(raw("t.csv", TRACE_HEADER + "0.5,image,10,4,2928\n1.0,image,10,4,2928\n"),
                   capacity("--seeds", "2", changes=(("workload.trace", "t.csv"),))),
         "--seeds 2: the workload is a trace, one stream; drop the flag"),
    Case("capacity-tolerance-zero", capacity("--tolerance", "0"), "--tolerance must be > 0, got 0.0"),
    Case("capacity-tolerance-one", capacity("--tolerance", "1"), "--tolerance must be < 1"),
    Case("capacity-start-rate", capacity("--start-rate", "-1"), "--start-rate must be > 0, got -1.0"),
    Case("capacity-max-rate", capacity("--max-rate", "1"), "--max-rate must be >= --start-rate (2.0)"),
    Case("capacity-max-steps", capacity("--max-steps", "0"), "--max-steps must be >= 1"),
    Case("capacity-steps-text", capacity("--max-steps", "many"), "argument --max-steps"),
    Case("capacity-tier", capacity("--tier", "heroic"), "unknown --tier 'heroic'"),
    Case("capacity-bad-slo", capacity(changes=(("slo.attainment", 2),)), "slo.attainment must be in (0, 1]"),
    Case("capacity-out-not-empty", lambda tmp: ((tmp / "out").mkdir(), raw("out/capacity.csv", "x")(tmp),
                                                capacity()(tmp))[2],
         "--out out: exists and is not empty; pass --force"),
    # -- profile ---------------------------------------------------------------------------------
    Case("profile-analytic-model", lambda tmp: ["profile", "analytic", "--model", "gpt-9", "--gpu", "h200",
                                                "--out", "p.json"], "unknown model 'gpt-9'"),
    Case("profile-analytic-tp", lambda tmp: ["profile", "analytic", "--model", "llava-v1.6-34b", "--gpu",
                                             "h200",
                                             "--tp", "0", "--out", "p.json"], "--tp must be >= 1"),
    Case("profile-analytic-out-folder", lambda tmp: ((tmp / "p.json").mkdir(), [
        "profile", "analytic", "--model", "llava-v1.6-34b", "--gpu", "h200", "--out", "p.json"])[1],
         "--out p.json: is a folder"),
    Case("profile-analytic-tp-three", lambda tmp: ["profile", "analytic", "--model", "llava-v1.6-34b",
                                                   "--gpu", "h200", "--tp", "3", "--out", "p.json"],
         "--tp must be a power of two, got 3"),
    Case("profile-analytic-tp-heads", lambda tmp: ["profile", "analytic", "--model", "llava-v1.6-34b",
                                                   "--gpu", "h200", "--tp", "16", "--out", "p.json"],
         "--tp 16 does not split llava-v1.6-34b's 56 attention heads evenly"),
    Case("profile-analytic-tp-huge", lambda tmp: ["profile", "analytic", "--model", "llava-v1.6-34b",
                                                  "--gpu", "h200", "--tp", "128", "--out", "p.json"],
         "--tp must be <= 64"),
    Case("profile-show-missing", lambda tmp: ["profile", "show", "nope.json"], "profile file not found"),
    Case("profile-show-binary", with_file(raw("p.json", BINARY), lambda tmp: ["profile", "show", "p.json"]),
         "p.json: not a text profile file"),
    Case("profile-show-items", lambda tmp: ["profile", "show", str(ANALYTIC), "--items", "abc"],
         "--items must be comma-separated whole numbers"),
    Case("profile-fit-missing", lambda tmp: ["profile", "fit", "nope.json", "--out", "p.json"], "nope.json"),
    Case("profile-no-action", lambda tmp: ["profile"], "the following arguments are required"),
    # -- live ------------------------------------------------------------------------------------
    Case("live-tp", live(("deployment.prefill.tp", 2), ("cluster.num_gpus", 8)),
         "deployment.prefill.tp = 2: the live executor runs workers of one device"),
    Case("live-too-many-workers", live(("cluster.num_gpus", 400), ("deployment.decode.num_workers", 300)),
         "302 worker processes need about"),
    Case("live-no-table", live(("profile", None)), "'dynamic' needs an SM-share table"),
    Case("live-moved-share-table", live(("profile", None), ("live.sm_share_table", {"1": 0.5})),
         "[live] sm_share_table has moved to [profile] sm_share_table"),
    Case("live-mix-other-modality", live(("workload.mix", "llava-image")),
         "workload.mix: image requests, but model qwen2-audio takes audio input"),
    Case("live-option-key", live(("live.threads", 2)), "unknown live field(s): threads"),
    Case("live-option-table", live(("live.sm_share_table", {"1": 0.5})), "[profile] sm_share_table"),
    Case("live-device", live(("live.device", "tpu")), "live.device must be one of"),
    Case("live-out-is-file", with_file(raw("out", "x"), live()), "--out out: exists and is not a folder"),
    Case("live-unknown-family", live(("model.name", "gpt-9")), "gpt-9"),
    # -- validate --------------------------------------------------------------------------------
    Case("validate-repeats", validate("--repeats", "0"), "--repeats must be >= 1"),
    Case("validate-profile-missing", lambda tmp: [*validate()(tmp)[:2], "--profile", "nope.json", "--out",
                                                  "out"],
         "profile file not found"),
    Case("validate-rank-by", validate("--sweep", "--rank-by", "speed"), "--rank-by must be one of"),
    Case("validate-rank-by-one", validate("--rank-by", "ttft_p99_s"),
         "--rank-by: ranks the deployments of a --sweep; this run has one deployment"),
    Case("validate-live-from-repeats", validate("--live-from", "out0", "--repeats", "2"),
         "--repeats: read only by a live run (no --bench or --live-from); this run is --live-from"),
    Case("validate-bench-run-live", validate("--bench-run", "1"), "--bench-run: read only by --bench"),
    Case("validate-bench-host-cores", lambda tmp: ["validate", str(config(SIM)(tmp)), "--bench", "b.json",
                                                   "--host-cores", "2", "--out", "out"],
         "--host-cores: read only by a live run (no --bench or --live-from) and --live-from; this run is "
         "--bench"),
    Case("validate-sweep-token", validate("--sweep", "b4-x9"), "--sweep: bad token 'x9'"),
    # a spec that changed nothing ran the base deployment again, and a key set twice kept the last
    Case("validate-sweep-empty", validate("--sweep", "b4", "-"), "--sweep: '-' changes nothing"),
    Case("validate-sweep-twice", validate("--sweep", "b4", "b4-b8"), "--sweep: 'b4-b8' sets b<...> twice"),
    Case("validate-sweep-modes", validate("--sweep", "b4", "dynamic-static"),
         "--sweep: 'dynamic-static' sets the sharing mode twice"),
    Case("validate-device", validate("--device", "tpu"), "--device must be one of"),
    Case("validate-out-not-empty", lambda tmp: ((tmp / "out").mkdir(), raw("out/a", "x")(tmp),
                                                validate()(tmp))[2],
         "pass --force"),
    Case("validate-no-profile", lambda tmp: [*validate()(tmp)[:2], "--out", "out"], "--profile is required"),
    Case("validate-bench-schema", with_file(raw("b.json", '{"results": []}'), lambda tmp: [
        "validate", str(config(SIM)(tmp)), "--bench", "b.json", "--out", "out"]), "b.json: not a benchmark"),
    Case("validate-bench-missing", lambda tmp: ["validate", str(config(SIM)(tmp)), "--bench", "nope.json",
                                                "--out", "out"], "nope.json: cannot read the benchmark"),
    # -- calibrate -------------------------------------------------------------------------------
    Case("calibrate-bench-no-config", lambda tmp: ["calibrate", "--from-bench", "b.json", "--out", "p.json"],
         "--from-bench needs --config"),
    Case("calibrate-no-model", lambda tmp: ["calibrate", "--out", "p.json"], "give --model"),
    Case("calibrate-device", lambda tmp: ["calibrate", "--model", "qwen2-audio", "--device", "tpu", "--out",
                                          "p.json"], "--device must be one of"),
    Case("calibrate-out-folder", lambda tmp: ((tmp / "p.json").mkdir(), ["calibrate", "--model",
                                                                         "qwen2-audio",
                                                                          "--out", "p.json"])[1],
         "--out p.json: is a folder"),
    Case("calibrate-runs-missing", lambda tmp: ["calibrate", "--from-runs", "nope", "--out", "p.json"],
         "nope"),
    Case("calibrate-runs-config-not-json", run_folder("{x"), "r/config.json: not valid JSON"),
    Case("calibrate-runs-config-list", run_folder("[1]"),
         "r/config.json: not a run's config (no [model] name)"),
    Case("calibrate-runs-config-no-model", run_folder('{"seed": 0}'), "r/config.json: not a run's config"),
    Case("calibrate-runs-deployment-list",
         run_folder('{"model": {"name": "qwen2-audio"}, "deployment": [1]}'),
         "r/config.json: deployment must be a table"),
    Case("calibrate-config-measuring", lambda tmp: ["calibrate", "--model", "qwen2-audio", "--config",
                                                    "c.toml", "--out", "p.json"],
         "--config: read only by --from-bench; this run is measuring (--model)"),
    Case("calibrate-reps-bench", lambda tmp: ["calibrate", "--from-bench", "b.json", "--config", "c.toml",
                                              "--reps", "3", "--out", "p.json"],
         "--reps: read only by measuring (--model); this run is --from-bench"),
    Case("calibrate-size-runs", lambda tmp: ["calibrate", "--from-runs", "r", "--size", "full", "--out",
                                             "p.json"],
         "--size: read only by measuring (--model); this run is --from-runs"),
    Case("calibrate-reps", lambda tmp: ["calibrate", "--model", "qwen2-audio", "--reps", "0", "--out",
                                        "p.json"],
         "--reps must be >= 1"),
    # -- reproduce -------------------------------------------------------------------------------
    Case("reproduce-out-is-file", with_file(raw("out", "x"), lambda tmp: ["reproduce", "--quick", "--out",
                                                                          "out"]),
         "--out out: exists and is not a folder"),
    Case("reproduce-out-not-empty", lambda tmp: ((tmp / "out").mkdir(), raw("out/README.md", "x")(tmp),
                                                 ["reproduce", "--quick", "--out",
                                                  "out"])[2], "pass --force"),
    Case("reproduce-out-unwritable", lambda tmp: ["reproduce", "--quick", "--out", "/sys/easerve-test/eval"],
         "is not writable"),
    Case("reproduce-no-out", lambda tmp: ["reproduce", "--quick"],
         "the following arguments are required: --out"),
    Case("plan-table-rates", lambda tmp: ["plan-table", str(config(SIM)(tmp)), "--rates", "one,two", "--out",
                                          "pt"],
         "--rates must be comma-separated numbers"),
    Case("plan-table-rate-zero", lambda tmp: ["plan-table", str(config(SIM)(tmp)), "--rates", "0", "--out",
                                              "pt"],
         "--rates must be > 0"),
    Case("plan-table-out-file", with_file(raw("pt", "x"), lambda tmp: [
        "plan-table", str(config(SIM)(tmp)), "--rates", "1", "--out", "pt", "--trials", "1"]),
         "--out pt: exists and is not a folder"),
    Case("plan-table-horizon-zero", lambda tmp: ["plan-table", str(config(SIM)(tmp)), "--rates", "1",
                                                 "--horizon-s", "0", "--out", "pt"],
         "horizon-s must be > 0"),
    Case("plan-table-horizon-min-requests", lambda tmp: ["plan-table", str(config(SIM)(tmp)), "--rates", "1",
                                                         "--horizon-s", "60", "--min-requests", "50",
                                                         "--out", "pt"],
         "--min-requests: --horizon-s sets each band's stream length, so nothing reads it"),
    Case("plan-table-samples-zero", lambda tmp: ["plan-table", str(config(SIM)(tmp)), "--rates", "1",
                                                 "--samples", "0", "--out", "pt"],
         "samples must be >= 1"),
    Case("plan-table-horizon-and-requests", lambda tmp: [
        "plan-table", str(config(SIM)(tmp)), "--rates", "1", "--horizon-s", "60", "--num-requests", "50",
        "--out", "pt"],
         "not allowed with argument"),
    Case("unknown-command", lambda tmp: ["simulate"], "invalid choice: 'simulate'"),
]


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for path in sorted(folder.rglob("*")):
        if "__pycache__" in path.parts:
            continue
        out[str(path.relative_to(folder))] = path.read_bytes() if path.is_file() else None
    return out


def test_there_are_enough_cases_and_every_subcommand_has_some():
    assert len(CASES) >= 60
    assert len({c.name for c in CASES}) == len(CASES)
    commands = {c.name.split("-")[0] for c in CASES}
    assert {"sim", "capacity", "workload", "search", "profile", "live", "validate", "calibrate",
            "reproduce", "plan"} <= commands


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_line_exit_2_and_nothing_written(case: Case, tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EASERVE_DEBUG", raising=False)
    argv = case.setup(tmp_path)
    before = _snapshot(tmp_path)
    status = main(argv)
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert status == 2, (status, captured.err[-2000:])
    assert len(lines) == 1, captured.err[-2000:]
    assert "Traceback" not in captured.err and case.culprit in lines[0], lines[0]
    assert lines[0].startswith("easerve"), lines[0]
    assert _snapshot(tmp_path) == before  # nothing created, nothing changed
    assert json.dumps(sorted(before)) == json.dumps(sorted(_snapshot(tmp_path)))


def test_sim_of_a_live_only_config_says_where_a_profile_comes_from(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tiny_llava_cpu.toml names a live model with no spec and no committed profile: the refusal
    says how to get one (it said only "unknown model", listing the three specs)."""
    from easerve.resources import CONFIGS_DIR
    from tests.cli.refusal import refused

    argv = ["sim", str(CONFIGS_DIR / "tiny_llava_cpu.toml"), "--out", str(tmp_path / "o")]
    refused(tmp_path, capsys, argv, "unknown model 'llava-next' to simulate", "size 'tiny' on 'cpu'",
            "[profile] path", "easerve live")
