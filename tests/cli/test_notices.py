"""Choices easerve makes for the user are one line on stderr ("easerve CMD: note: ..."), and the run goes on.

docs/cli.md lists them: a trace out of arrival order is sorted, a config
without ``[deployment]`` runs the default deployment, missing parent folders
of ``--out`` are created. Each is checked here as a user sees it: exit 0,
the note named once, the outputs written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from easerve.cli import main
from easerve.cli.search_cmd import dump_toml
from tests.cli.test_bad_input import SIM, TRACE_HEADER, _set


def _run(argv: list[str], capsys) -> tuple[int, list[str]]:
    status = main(argv)
    err = capsys.readouterr().err
    return status, [line for line in err.splitlines() if line.strip()]


def _write(tmp: Path, data: dict, name: str = "c.toml") -> str:
    (tmp / name).write_text(dump_toml(data))
    return str(tmp / name)


def _sim_on_trace(tmp: Path, rows: str, capsys) -> tuple[int, list[str]]:
    """``easerve sim`` over a trace of ``rows`` (written to t.csv) into ``out``."""
    (tmp / "t.csv").write_text(TRACE_HEADER + rows)
    config = _write(tmp, _set(SIM, "workload", {"mix": "llava-image", "trace": "t.csv"}))
    return _run(["sim", config, "--out", "out", "--no-plots"], capsys)


def test_an_unsorted_trace_is_sorted_with_a_note(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    status, lines = _sim_on_trace(tmp_path, "1.0,image,10,4,2928\n0.5,image,10,4,2928\n", capsys)
    assert status == 0, lines
    assert lines == [f"easerve sim: note: {tmp_path / 't.csv'}:3: rows are not in arrival order "
                     "(arrival_s 0.5 after 1.0); sorted by arrival_s"]
    assert (tmp_path / "out" / "records.parquet").is_file()


def test_a_sorted_trace_gets_no_note(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    status, lines = _sim_on_trace(tmp_path, "0.5,image,10,4,2928\n1.0,image,10,4,2928\n", capsys)
    assert (status, lines) == (0, [])


def test_a_config_without_deployment_runs_the_default_with_a_note(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    status, lines = _run(["sim", _write(tmp_path, _set(SIM, "deployment", None)), "--out", "out",
                          "--no-plots"], capsys)
    assert status == 0, lines
    assert len(lines) == 1 and lines[0].startswith("easerve sim: note: "), lines
    assert "no [deployment] table; running the default deployment E1x1 P1x2 D1x2" in lines[0]


def test_missing_out_parents_are_created_with_a_note(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config = _write(tmp_path, SIM)
    status, lines = _run(["sim", config, "--out", "a/b/run", "--no-plots"], capsys)
    assert status == 0, lines
    assert lines == ["easerve sim: note: --out a/b/run: creating the missing folders a, a/b"]
    assert (tmp_path / "a" / "b" / "run" / "summary.json").is_file()
    status, lines = _run(["workload", config, "--out", "w/t.csv"], capsys)
    assert status == 0, lines
    assert lines == ["easerve workload: note: --out w/t.csv: creating the missing folder w"]
    assert (tmp_path / "w" / "t.csv").is_file()
    status, lines = _run(["sim", config, "--out", "a/b/again", "--no-plots"], capsys)
    assert (status, lines) == (0, [])  # the folders exist now: nothing to say


def test_outputs_past_the_context_stop_there_with_a_note_and_the_summary_counts_them(tmp_path, monkeypatch,
                                                                                     capsys):
    monkeypatch.chdir(tmp_path)  # LLaVA-1.6-34B's 4,096: 10 + 2,928 + 1,200 runs past, 10 + 2,928 + 4 not
    status, lines = _sim_on_trace(tmp_path, "0.5,image,10,1200,2928\n1.0,image,10,4,2928\n", capsys)
    assert status == 0, lines
    assert lines == ["easerve sim: note: workload: 1 of 2 outputs end at the model's context of 4,096 tokens "
                     "(prompt, items and output); they stop there, as an engine stops them"]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["outputs_at_context"], summary["max_context_tokens"]) == (1, 4096)
    records = pd.read_parquet(tmp_path / "out" / "records.parquet")
    assert sorted(records["output_tokens"]) == [4, 4096 - 10 - 2928]


def test_a_public_trace_whose_inputs_the_items_exceed_is_told(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # BurstGPT rows of 100-5,000 input tokens beside llava-image's items
    (tmp_path / "b.csv").write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                                    "0,ChatGPT,100,20,120,Conversation log\n"
                                    "1,ChatGPT,3500,20,3520,Conversation log\n")
    config = _write(tmp_path, _set(SIM, "workload", {"mix": "llava-image", "trace": "b.csv",
                                                     "trace_format": "burstgpt"}))
    status, lines = _run(["sim", config, "--out", "out", "--no-plots"], capsys)
    assert status == 0, lines
    assert lines == ["easerve sim: note: workload.trace: 1 of 2 rows have no more input tokens than the "
                     "items drawn for them; each of those prompts is 1 token, and its input is longer than "
                     "the trace's (the trace's input counts text and items together)"]
    records = pd.read_parquet(tmp_path / "out" / "records.parquet").sort_values("arrival_s")
    assert records["prompt_tokens"].iloc[0] == 1 and records["prompt_tokens"].iloc[1] > 1
