"""Public trace formats: Azure, BurstGPT and Mooncake files as workloads.

Small files in each format are written here; a good one imports, maps onto
the mix by the documented rule and round-trips through our own trace format;
each kind of bad row is one line naming the file, the line and the field.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from easerve.cli import main
from easerve_core.request import Modality
from easerve_core.workload import MIXES, RequestMix, WorkloadSpec, generate
from runtime.traces import (
    TRACE_FORMATS,
    load_trace,
    read_azure,
    read_burstgpt,
    read_mooncake,
    read_trace,
    write_trace,
)

AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.6805900,374,44\n"
    "2023-11-16 18:15:50.9951690,3960,109\n"
    "2023-11-16 18:15:47.1805900,8790,55\n"  # out of order: sorted on import
    "2023-11-16 18:15:56.6805900,91,0\n"     # no output: served as one token
)
BURSTGPT = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "5,ChatGPT,472,18,490,Conversation log\n"
    "45,ChatGPT,10870,0,10870,Conversation log\n"
    "110.5,GPT-4,4170,505,4675,API log\n"
)
MOONCAKE = (
    '{"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": [0, 1, 2]}\n'
    '{"timestamp": 0, "input_length": 7319, "output_length": 490, "hash_ids": [0, 3]}\n'
    "\n"
    '{"timestamp": 3052, "input_length": 2287, "output_length": 316, "hash_ids": [0, 4]}\n'
)
NL = "\n"
REPO = Path(__file__).resolve().parents[2]
FILES = {"azure": ("azure.csv", AZURE), "burstgpt": ("burstgpt.csv", BURSTGPT),
         "mooncake": ("mooncake.jsonl", MOONCAKE)}


def write(tmp_path, fmt, text=None):
    name, default = FILES[fmt]
    path = tmp_path / name
    path.write_text(default if text is None else text)
    return path


def spec_for(path, fmt, mix="llava-image", **extra):
    table = {"mix": mix, "trace": str(path), "trace_format": fmt, **extra}
    return WorkloadSpec.from_dict(table, traces=load_trace)


def test_azure_rows_sorted_and_timed_from_the_earliest(tmp_path):
    trace = read_azure(write(tmp_path, "azure"))
    assert trace.arrival_s == (0.0, 0.5, 4.314579, 10.0)
    assert trace.input_tokens == (374, 8790, 3960, 91)
    assert trace.output_tokens == (44, 55, 109, 0)


def test_burstgpt_seconds_from_the_first_row(tmp_path):
    trace = read_burstgpt(write(tmp_path, "burstgpt"))
    assert trace.arrival_s == (0.0, 40.0, 105.5)
    assert trace.input_tokens == (472, 10870, 4170) and trace.output_tokens == (18, 0, 505)


def test_mooncake_milliseconds_and_ties_keep_file_order(tmp_path):
    trace = read_mooncake(write(tmp_path, "mooncake"))
    assert trace.arrival_s == (0.0, 0.0, 3.052)
    assert trace.input_tokens == (6755, 7319, 2287)


def test_azure_utc_offsets_are_taken_in_utc(tmp_path):
    path = write(tmp_path, "azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                 "2024-05-10 00:00:01+00:00,10,1\n2024-05-10 02:00:00+02:00,10,1\n")
    assert read_azure(path).arrival_s == (0.0, 1.0)


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_mapping_rule_splits_the_input_around_the_mix_items(tmp_path, fmt):
    path = write(tmp_path, fmt)
    trace = load_trace(path, fmt)
    reqs = generate(spec_for(path, fmt), np.random.default_rng(3))
    assert [r.request_id for r in reqs] == list(range(len(reqs)))
    for r, inp, out in zip(reqs, trace.input_tokens, trace.output_tokens, strict=True):
        assert r.modality is Modality.IMAGE and r.num_items == 1
        assert set(r.mm_tokens_per_item) <= set(MIXES["llava-image"].item_tokens)
        assert r.prompt_tokens == max(1, inp - r.mm_tokens)
        assert r.output_tokens == max(1, out)
    assert [r.arrival_s for r in reqs] == list(trace.arrival_s)


def test_text_mix_keeps_the_whole_input_as_prompt(tmp_path):
    path = write(tmp_path, "burstgpt")
    reqs = generate(spec_for(path, "burstgpt", mix="text"), np.random.default_rng(0))
    assert [r.prompt_tokens for r in reqs] == [472, 10870, 4170]
    assert all(r.num_items == 0 for r in reqs)


def test_items_per_request_override_applies_to_a_trace(tmp_path):
    path = write(tmp_path, "mooncake")
    spec = spec_for(path, "mooncake", mix="qwen-image", items_per_request=[2, 2])
    assert all(r.num_items == 2 for r in generate(spec, np.random.default_rng(0)))


def test_same_seed_same_requests_other_seed_other(tmp_path):
    lines = [json.dumps({"timestamp": 100 * i, "input_length": 20000, "output_length": 9})
             for i in range(40)]
    path = write(tmp_path, "mooncake", "\n".join(lines) + "\n")
    spec = spec_for(path, "mooncake", mix="qwen-video")
    a = generate(spec, np.random.default_rng(7))
    assert a == generate(spec, np.random.default_rng(7))
    assert a != generate(spec, np.random.default_rng(8))


@pytest.mark.parametrize("fmt", sorted(FILES))
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_import_round_trips_through_our_format(tmp_path, fmt, suffix):
    reqs = generate(spec_for(write(tmp_path, fmt), fmt), np.random.default_rng(1))
    ours = write_trace(reqs, tmp_path / f"ours{suffix}")
    assert read_trace(ours) == reqs
    replay = WorkloadSpec.from_dict({"trace": str(ours), "trace_format": "easerve"}, traces=load_trace)
    assert generate(replay, np.random.default_rng(99)) == reqs


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_with_rate_time_scales_and_keeps_the_items(tmp_path, fmt):
    spec = spec_for(write(tmp_path, fmt), fmt)
    fast = spec.with_rate(4 * spec.mean_rate_hz)
    assert fast.mean_rate_hz == pytest.approx(4 * spec.mean_rate_hz)
    slow_reqs = generate(spec, np.random.default_rng(2))
    fast_reqs = generate(fast, np.random.default_rng(2))
    assert [r.arrival_s / 4 for r in slow_reqs] == pytest.approx([r.arrival_s for r in fast_reqs])
    assert [r.mm_tokens_per_item for r in slow_reqs] == [r.mm_tokens_per_item for r in fast_reqs]


AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n"
BURST_HEAD = ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
              "5,ChatGPT,472,18,490,Conversation log\n")
MOON_HEAD = '{"timestamp": 0, "input_length": 6755, "output_length": 500}\n'

BAD_ROWS = [
    ("azure", AZURE_HEAD + "2023-11-16 18:15:47.0,,44\n", "ContextTokens", "missing"),
    ("azure", AZURE_HEAD + "2023-11-16 18:15:47.0,374\n", "GeneratedTokens", "missing"),
    ("azure", AZURE_HEAD + "2023-11-16 18:15:47.0,abc,44\n", "ContextTokens", "not a number"),
    ("azure", AZURE_HEAD + "2023-11-16 18:15:47.0,374,-4\n", "GeneratedTokens", ">= 0"),
    ("azure", AZURE_HEAD + "2023-11-16 18:15:47.0,37.5,4\n", "ContextTokens", "whole number"),
    ("azure", AZURE_HEAD + "yesterday,374,44\n", "TIMESTAMP", "date-time"),
    ("azure", AZURE_HEAD + ",374,44\n", "TIMESTAMP", "missing"),
    ("burstgpt", BURST_HEAD + "x,ChatGPT,472,18,490,Conversation log\n", "Timestamp", "not a number"),
    ("burstgpt", BURST_HEAD + "-1,ChatGPT,472,18,490,Conversation log\n", "Timestamp", ">= 0"),
    ("burstgpt", BURST_HEAD + "nan,ChatGPT,472,18,490,Conversation log\n", "Timestamp", "finite"),
    ("burstgpt", BURST_HEAD + "6,ChatGPT,472,,490,Conversation log\n", "Response tokens", "missing"),
    ("burstgpt", BURST_HEAD + "6,ChatGPT,-2,18,490,Conversation log\n", "Request tokens", ">= 0"),
    ("mooncake", MOON_HEAD + '{"timestamp": 5, "output_length": 5}\n', "input_length", "missing"),
    ("mooncake", MOON_HEAD + '{"timestamp": "soon", "input_length": 1, "output_length": 5}\n',
     "timestamp", "not a number"),
    ("mooncake", MOON_HEAD + '{"timestamp": -5, "input_length": 1, "output_length": 5}\n',
     "timestamp", ">= 0"),
    ("mooncake", MOON_HEAD + '{"timestamp": 5, "input_length": [1], "output_length": 5}\n',
     "input_length", "not a number"),
    ("mooncake", MOON_HEAD + '{"timestamp": 5, "input_length": true, "output_length": 5}\n',
     "input_length", "not a number"),
    ("mooncake", MOON_HEAD + '{"timestamp": 5, "input_length": 1, "output_length": 5.5}\n',
     "output_length", "whole number"),
    # a count over the limit is named as written, not as 31 digits of float
    ("burstgpt", BURST_HEAD + "6,ChatGPT,1e30,18,490,Conversation log\n", "Request tokens",
     "must be <= 1,048,576 (the longest context of public LLMs), got '1e30'"),
]


@pytest.mark.parametrize(
    ("fmt", "text", "what"),
    [
        # a row longer than the header: DictReader would file the rest under None, unread
        ("azure", AZURE_HEAD + "2023-11-16 18:15:47.0,374,44,9\n", ":3: 1 more field(s) than the header's 3"),
        ("burstgpt", BURST_HEAD + "6,ChatGPT,472,18,490,Conversation log,x,y\n",
         ":3: 2 more field(s) than the header's 6"),
        # a column twice: DictReader would keep the last one's values
        ("burstgpt", "Timestamp,Timestamp,Request tokens,Response tokens\n1,2,10,5\n",
         ":1: column 'Timestamp' appears 2 times"),
        ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens,ContextTokens\n2023-11-16 18:15:46,4,5,6\n",
         ":1: column 'ContextTokens' appears 2 times"),
        # a key twice in one JSON object: json.loads would keep the last value
        ("mooncake", MOON_HEAD + '{"timestamp": 5, "input_length": 1, "output_length": 5, "timestamp": 9}\n',
         ":2: key 'timestamp' is named twice"),
        # a quote left open: the csv reader would run it on through the file (the header's names
        # then held every line, and the error printed them all)
        ("burstgpt", '"' + BURST_HEAD, ":1-2: a quoted field runs past the end of its line"),
        ("azure", AZURE_HEAD + '"2023-11-16 18:15:47.0,374,44\n2023-11-16 18:15:48.0,5,6\n',
         ":3-4: a quoted field runs past the end of its line"),
        # a span past the limit, said in a few digits
        ("burstgpt", BURST_HEAD + "1e300,ChatGPT,472,18,490,Conversation log\n",
         ": the trace spans 1e+300 s; at most 31,536,000 s"),
    ],
)
def test_malformed_table_is_one_line_naming_the_file(tmp_path, fmt, text, what):
    path = write(tmp_path, fmt, text)
    with pytest.raises(ValueError) as info:
        spec_for(path, fmt)
    assert str(info.value).startswith(f"{path}{what}")
    # short after the file's name (the temporary folder's path grows with pytest's run count)
    assert "\n" not in str(info.value) and len(str(info.value).removeprefix(str(path))) < 150


@pytest.mark.parametrize(("fmt", "text", "field", "what"), BAD_ROWS)
def test_bad_row_is_one_line_naming_file_line_and_field(tmp_path, fmt, text, field, what):
    path = write(tmp_path, fmt, text)
    with pytest.raises(ValueError) as info:
        spec_for(path, fmt)
    msg = str(info.value)
    bad_line = text.count(NL)  # the bad row is the file's last line
    assert msg.startswith(f"{path}:{bad_line}: ") and f"'{field}'" in msg and what in msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ('{"timestamp": 0, "input_length": 1, "output_length": 1}\n{oops\n', "not valid JSON"),
        ('{"timestamp": 0, "input_length": 1, "output_length": 1}\n[1, 2]\n', "JSON object"),
    ],
)
def test_bad_jsonl_line(tmp_path, text, what):
    path = write(tmp_path, "mooncake", text)
    with pytest.raises(ValueError, match=what) as info:
        read_mooncake(path)
    assert str(info.value).startswith(f"{path}:2: ")


@pytest.mark.parametrize(
    ("fmt", "text", "what"),
    [
        ("azure", "", "empty file"),
        ("azure", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,4\n", "missing column 'GeneratedTokens'"),
        ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "holds no requests"),
        ("burstgpt", "Timestamp,Model,Request tokens,Total tokens\n1,a,2,3\n",
         "missing column 'Response tokens'"),
        ("burstgpt", "\n", "empty file"),
        ("mooncake", "", "holds no requests"),
        ("mooncake", "\n\n", "holds no requests"),
    ],
)
def test_empty_file_or_missing_column_is_one_clear_error(tmp_path, fmt, text, what):
    path = write(tmp_path, fmt, text)
    with pytest.raises(ValueError, match=what) as info:
        spec_for(path, fmt)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        spec_for(tmp_path / "nope.csv", "azure")


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"trace": "t.csv", "trace_format": "sharegpt"}, "trace_format"),
        ({"arrival": "poisson", "rate_hz": 1.0, "trace": "t.csv"}, "workload.trace"),
        ({"rate_hz": 1.0, "trace_format": "azure"}, "workload.trace_format"),
        ({"arrival": "trace", "trace_format": "azure"}, "workload.trace"),
        ({"trace": "t.csv", "period_s": 60.0}, "workload.period_s is not a field of arrival 'trace'"),
    ],
)
def test_bad_trace_tables(table, field):
    with pytest.raises(ValueError, match=field):
        WorkloadSpec.from_dict(table, traces=load_trace)


def test_unknown_format_lists_the_known():
    with pytest.raises(ValueError) as info:
        WorkloadSpec.from_dict({"trace": "t.csv", "trace_format": "sharegpt"}, traces=load_trace)
    assert all(name in str(info.value) for name in TRACE_FORMATS)


def test_a_trace_file_alone_means_arrival_trace(tmp_path):
    reqs = generate(spec_for(write(tmp_path, "azure"), "azure"), np.random.default_rng(0))
    ours = write_trace(reqs, tmp_path / "ours.csv")
    spec = WorkloadSpec.from_dict({"trace": str(ours)}, traces=load_trace)
    assert generate(spec, np.random.default_rng(0)) == reqs


def cli_config(tmp_path, fmt, text=None, seed=3):
    trace = write(tmp_path, fmt, text)
    cfg = tmp_path / "w.toml"
    cfg.write_text(f'seed = {seed}\n[workload]\nmix = "qwen-image"\n'
                   f'trace = "{trace.name}"\ntrace_format = "{fmt}"\n')
    return cfg, trace


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_cli_converts_a_public_trace_to_ours(tmp_path, fmt, capsys):
    cfg, trace = cli_config(tmp_path, fmt)
    out = tmp_path / "ours.csv"
    assert main(["workload", str(cfg), "--out", str(out)]) == 0
    expected = generate(spec_for(trace, fmt, mix="qwen-image"), np.random.default_rng(3))
    assert read_trace(out) == expected
    assert f"wrote {len(expected)} requests" in capsys.readouterr().out


def test_cli_rate_rescales_a_public_trace(tmp_path):
    cfg, _ = cli_config(tmp_path, "burstgpt")
    out = tmp_path / "ours.jsonl"
    assert main(["workload", str(cfg), "--out", str(out), "--rate", "2.0"]) == 0
    assert WorkloadSpec.from_dict({"trace": str(out)}, traces=load_trace).mean_rate_hz == pytest.approx(2.0)


@pytest.mark.parametrize(("fmt", "text", "field", "what"), [BAD_ROWS[2], BAD_ROWS[8], BAD_ROWS[13]])
def test_cli_bad_row_is_exit_2_one_line_and_writes_nothing(tmp_path, fmt, text, field, what):
    cfg, trace = cli_config(tmp_path, fmt, text)
    out = tmp_path / "ours.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "easerve", "workload", str(cfg), "--out", str(out)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert f"{trace.name}:{text.count(NL)}: " in lines[0] and f"'{field}'" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([cfg.name, trace.name])


def test_cli_unknown_format_is_exit_2(tmp_path, capsys):
    cfg, _ = cli_config(tmp_path, "azure")
    cfg.write_text(cfg.read_text().replace('"azure"', '"sharegpt"'))
    assert main(["workload", str(cfg), "--out", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trace_format" in err[0] and "mooncake" in err[0]
    assert not (tmp_path / "o.csv").exists()


def test_item_lists_drawn_at_once_follow_the_mix():
    image = RequestMix(modality="image", item_tokens=(10, 20, 30), item_weights=(0.0, 1.0, 1.0),
                       items_per_request=(1, 3))
    pairs = image.draw_item_lists(3_000, np.random.default_rng(0))
    lists = [items for items, _ in pairs]
    assert {len(items) for items in lists} == {1, 2, 3}
    assert {t for items in lists for t in items} == {20, 30}
    assert {tower for _, tower in pairs} == {()}  # the mix pools nothing
    assert pairs == image.draw_item_lists(3_000, np.random.default_rng(0))
    assert MIXES["text"].draw_item_lists(4, np.random.default_rng(0)) == [((), ())] * 4
    pooled = replace(image, item_encode_tokens=(11, 40, 90))
    assert [(items, tuple({20: 40, 30: 90}[t] for t in items))
            for items in lists] == pooled.draw_item_lists(3_000, np.random.default_rng(0))
