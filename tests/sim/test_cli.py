"""``easerve sim``: a run writes its files; bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from easerve.cli import main

pytest.importorskip("calibration")

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SHIPPED = ["llava34b_rtx6000ada.toml", "qwen25vl32b_rtx6000ada.toml", "ultravox27b_rtx6000ada.toml"]
SMALL = {"num_requests = 1000": "num_requests = 60", "num_requests = 500": "num_requests = 60"}


def _config(tmp: Path, name: str, replace: dict[str, str] | None = None) -> Path:
    text = (CONFIGS / name).read_text()
    for old, new in {**SMALL, **(replace or {})}.items():
        text = text.replace(old, new)
    path = tmp / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_run(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["sim", str(_config(tmp_path, name)), "--out", str(out)]) == 0
    for file in ("records.parquet", "utilization.parquet", "stage_log.parquet", "queues.parquet",
                 "summary.json", "config.json", "latency.png", "encoder_utilization.png"):
        assert (out / file).is_file(), file
    records = pd.read_parquet(out / "records.parquet")
    assert len(records) == 60 and (records["status"] == "ok").all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["slo_tier"] == "moderate" and summary["preset"] == "easerve"
    assert json.loads((out / "config.json").read_text())["deployment"]["preset"] == "easerve"
    assert "easerve:" in capsys.readouterr().out


@pytest.mark.parametrize("preset", ["dynamo", "fixed-batch", "vllm"])
def test_presets_from_the_command_line(tmp_path: Path, preset: str) -> None:
    out = tmp_path / "out"
    cfg = _config(tmp_path, SHIPPED[0])
    assert main(["sim", str(cfg), "--out", str(out), "--preset", preset, "--rate", "1.5",
                 "--no-plots"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["deployment"]["preset"] == preset and config["workload"]["rate_hz"] == 1.5


BAD = [
    ({'name = "llava-v1.6-34b"': 'name = "llava-9000"'}, [], "llava-9000"),
    ({'gpu = "rtx6000ada"': 'gpu = "gtx480"'}, [], "gtx480"),
    ({"decode = { num_workers = 2, tp = 2 }": "decode = { num_workers = 4, tp = 2 }"}, [], "GPUs"),
    ({"decode = { num_workers = 2, tp = 2 }": "decode = { num_workers = 2, tp = 1 }"}, [], "decode.tp"),
    ({"max_encode_batch = 8": "max_encode_batch = 0"}, [], "max_encode_batch"),
    ({"remote_fraction = 0.5": "remote_fraction = 1.5"}, [], "remote_fraction"),
    ({"rate_hz = 2.0\nnum": "rate_hz = -2.0\nnum"}, [], "rate_hz"),
    ({"rate_hz = 2.0\nnum": "rate_hz = nan\nnum"}, [], "rate_hz"),
    ({}, ["--rate", "-1"], "--rate"),
    ({}, ["--preset", "sglang"], "preset"),
    ({'arrival = "poisson"': 'arrival = "trace"\ntrace = "bad.csv"'}, [], "prompt_tokens"),
]


@pytest.mark.parametrize(("replace", "extra", "field"), BAD)
def test_bad_input_is_one_line_exit_2_nothing_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], replace: dict[str, str],
        extra: list[str], field: str) -> None:
    (tmp_path / "bad.csv").write_text("arrival_s,modality,prompt_tokens,output_tokens,"
                                      "mm_tokens_per_item\n0.5,image,lots,10,2928\n")
    out = tmp_path / "out"
    assert main(["sim", str(_config(tmp_path, SHIPPED[0], replace)), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err, err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def _plan_table(path: Path) -> Path:
    from easerve_core.controller import Band, ControllerSettings, PlanTable
    from runtime.configs import load_experiment

    dep = load_experiment(CONFIGS / "llava34b_rtx6000ada.toml").deployment
    table = PlanTable((Band(rate_hz=1.0, deployment=dep),
                       Band(rate_hz=3.0, deployment=dep.with_(max_encode_batch=4))))
    path.write_text(json.dumps({**table.to_dict(), "settings": ControllerSettings().to_dict()}))
    return path


def test_controller_flag_runs_the_plan_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 1 req/s, then 3 req/s from t = 200 s: the controller starts on the 1 req/s band and moves up once
    config = _config(tmp_path, "llava34b_rtx6000ada.toml", {
        'arrival = "poisson"': 'arrival = "step"\nrate_before_hz = 1.0\nrate_after_hz = 3.0\nat_s = 200.0',
        "rate_hz = 2.0\n": "", "num_requests = 60": "num_requests = 900"})
    out = tmp_path / "out"
    assert main(["sim", str(config), "--controller", str(_plan_table(tmp_path / "pt.json")),
                 "--out", str(out)]) == 0
    decisions = json.loads((out / "summary.json").read_text())["controller"]["decisions"]
    assert [(d["from_band"], d["band"]) for d in decisions] == [(0, 1)] and decisions[0]["at_s"] > 200
    records = pd.read_parquet(out / "records.parquet")
    assert len(records) == 900 and records["request_id"].is_unique
    assert set(records["controller_band"]) == {0, 1} and (out / "controller.png").is_file()
    assert "controller: 1 decision(s)" in capsys.readouterr().out


@pytest.mark.parametrize("text, message", [
    ("{", "not valid JSON"), ('{"rows": []}', "not a plan table"),
    ('{"bands": [{"rate_hz": -1, "deployment": {}}]}', "rate_hz"),
])
def test_controller_flag_bad_table(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                   message: str) -> None:
    table = tmp_path / "pt.json"
    table.write_text(text)
    out = tmp_path / "out"
    assert main(["sim", str(_config(tmp_path, "llava34b_rtx6000ada.toml")), "--controller", str(table),
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and not out.exists()


def test_plan_table_searches_phase_long_streams_and_cross_checks(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plans"
    args = ["plan-table", str(CONFIGS / "llava34b_rtx6000ada.toml"), "--rates", "1,3", "--trials", "3",
            "--horizon-s", "60", "--samples", "2", "--cross-check", "--out", str(out)]
    assert main(args) == 0
    from easerve_core.controller import PlanTable

    data = json.loads((out / "plan_table.json").read_text())
    table = PlanTable.from_dict(data)
    scores = pd.read_csv(out / "cross_check.csv")
    # every distinct searched deployment told each band's rate, judged at each band's rate
    assert len(scores) == 2 * scores["candidate"].nunique() and set(scores["told_hz"]) <= {1.0, 3.0}
    chosen = scores[scores["chosen"]].sort_values("band")
    assert [b.deployment.rate_hint_hz for b in table.bands] == list(chosen["told_hz"])
    for band, (_, row) in zip(table.bands, chosen.iterrows(), strict=True):  # the best, within 2%
        best = scores.loc[scores["band"] == row["band"], "score"].max()
        assert row["score"] >= best * 0.98 and band.deployment.label() == row["deployment"]
    csv = pd.read_csv(out / "plan_table.csv")
    assert list(csv["table_deployment"]) == [b.deployment.label() for b in table.bands]
    assert "cross-checked band 3 req/s" in capsys.readouterr().out
    # the same command again reuses the cached studies and writes the same table
    assert main(args) == 0
    assert json.loads((out / "plan_table.json").read_text()) == data
    written = sorted(p.name for p in out.iterdir() if p.suffix != ".db")
    assert written == ["cross_check.csv", "plan_table.csv", "plan_table.json"]  # each moved in whole
