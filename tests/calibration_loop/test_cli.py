"""``easerve calibrate`` and ``easerve validate`` end to end on the tiny models (about a minute)."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from calibration import load_profile
from calibration.fit import FittedProfile
from calibration.loop.fidelity import METRICS, TABLE_COLUMNS
from calibration.loop.runner import _matching, requests_for, setup
from easerve.cli import main
from easerve.cli.validate_cmd import recorded_live
from runtime.configs import load_experiment
from runtime.profiles import load_profile_doc
from tests.calibration_loop.helpers import tiny_config

# 24 requests: the refit drops warm-up and pause rows, which a loaded host makes more of, and still
# needs five rows per stage for its held-out check
CONFIG = tiny_config(num_requests=24)



@pytest.fixture(scope="module")
def validated(tmp_path_factory, profile_path):
    folder = tmp_path_factory.mktemp("val")
    config = folder / "tiny.toml"
    config.write_text(textwrap.dedent(CONFIG))
    out = folder / "report"
    code = main(["validate", str(config), "--profile", str(profile_path), "--out", str(out), "--repeats", "1",
                 "--host-cores", "profile", "--sweep", "b1-s1-none", "b2-s0.5-dynamic"])
    assert code == 0
    return out


def test_calibrate_writes_a_loadable_profile(profile_path):
    doc = load_profile_doc(profile_path)
    assert doc.kind == "fitted" and doc.model == "qwen2-audio"
    assert set(doc.fit_error) == {"encode", "prefill", "decode"}
    assert doc.sm_share_table is not None and doc.sm_share_table.shares
    assert set(doc.params["held_out_error"]) >= {"encode", "prefill", "decode", "all"}
    assert doc.params["host"]["num_host_cores"] > 0
    assert {"median", "max"} <= set(doc.params["measured"]["spread"]["encode"])
    profile = load_profile(profile_path)
    assert isinstance(profile, FittedProfile) and profile.share_steps == 1
    assert profile.encode_s([8]) > 0


def test_validate_sweep_writes_table_plot_and_ranking(validated):
    table = pd.read_csv(validated / "fidelity.csv")
    assert list(table.columns) == TABLE_COLUMNS
    assert set(table["metric"]) == set(METRICS)
    assert set(table["deployment"]) == {"b1-s1-none", "b2-s0.5-dynamic"}
    rank = json.loads((validated / "summary.json").read_text())["ranking"]
    tau = rank["kendall_tau"]
    assert tau != tau or -1.0 <= tau <= 1.0  # NaN when one side ties
    assert rank["live_best_sim_rank"] in (1, 2)
    assert (validated / "latency_cdf.png").stat().st_size > 0
    assert "Kendall tau" in (validated / "fidelity.md").read_text()


def test_refit_from_live_runs(validated, profile_path, tmp_path):
    runs = sorted((validated / "runs").glob("*/live-0"))
    out = tmp_path / "refit.json"
    assert main(["calibrate", "--from-runs", *map(str, runs), "--profile", str(profile_path),
                 "--out", str(out)]) == 0
    doc = load_profile_doc(out)
    assert set(doc.fit_error) == {"encode", "prefill", "decode"}
    assert doc.params["host"]["decode_step_overhead_s"] >= 0
    joins = doc.params["measured"]["joins"]  # the batch-change costs, refitted from the runs' records
    assert joins["boundaries"] > 0
    assert doc.params["host"]["decode_join_s"] == joins["decode_join_s"] >= 0
    assert doc.params["host"]["decode_leave_s"] == joins["decode_leave_s"] >= 0
    handoffs = doc.params["measured"]["handoffs"]  # hand-offs to an idle receiver, beyond the link
    assert handoffs["handoff_prefill_count"] + handoffs["handoff_decode_count"] > 0
    assert doc.params["host"]["handoff_decode_s"] == handoffs["handoff_decode_s"] >= 0
    assert load_profile(out).decode_step_s(1, 10) > 0


@pytest.mark.parametrize("argv, needle", [
    (["calibrate", "--model", "nope", "--out", "x.json"], "nope"),
    (["calibrate", "--model", "qwen2-audio", "--size", "huge", "--out", "x.json"], "huge"),
    (["calibrate", "--model", "qwen2-audio", "--device", "tpu", "--out", "x.json"], "--device"),
    (["validate", "configs/tiny_qwen2audio_cpu.toml", "--profile", "missing.json", "--out", "x"], "missing"),
    (["validate", "configs/tiny_qwen2audio_cpu.toml", "--device", "tpu", "--profile", "missing.json",
      "--out", "x"], "--device"),
])
def test_bad_input_is_one_line_exit_2(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(_repo())
    argv = [str(tmp_path / a) if a in ("x.json", "x") else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_from_runs_rejects_a_folder_that_is_not_a_run(tmp_path, capsys):
    assert main(["calibrate", "--from-runs", str(tmp_path), "--out", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a run folder" in err


def _repo() -> Path:
    return Path(__file__).resolve().parents[2]


def test_validate_against_recorded_live_trials(validated, profile_path, tmp_path):
    """``--live-from``: the same live side as the earlier report, no new trial; other requests refused."""
    config = validated.parent / "tiny.toml"
    out = tmp_path / "again"
    code = main(["validate", str(config), "--profile", str(profile_path), "--out", str(out),
                 "--host-cores", "3", "--live-from", str(validated),
                 "--sweep", "b1-s1-none", "b2-s0.5-dynamic"])
    assert code == 0
    before, after = pd.read_csv(validated / "fidelity.csv"), pd.read_csv(out / "fidelity.csv")
    assert after["live"].tolist() == pytest.approx(before["live"].tolist())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["repeats"] == {"b1-s1-none": 1, "b2-s0.5-dynamic": 1}
    assert "--live-from" in summary["command"]
    # --host-cores auto replays the cores measured before the recorded trials, not the host now
    trials = tmp_path / "trials"
    shutil.copytree(validated, trials)
    recorded_cores = {"b1-s1-none": 1.23, "b2-s0.5-dynamic": 1.77}
    meta = json.loads((trials / "summary.json").read_text())
    (trials / "summary.json").write_text(json.dumps({**meta, "host_cores": recorded_cores}))
    replay = tmp_path / "replay"
    assert main(["validate", str(config), "--profile", str(profile_path), "--out", str(replay),
                 "--live-from", str(trials), "--sweep", "b1-s1-none", "b2-s0.5-dynamic"]) == 0
    assert json.loads((replay / "summary.json").read_text())["host_cores"] == recorded_cores
    other = tmp_path / "other.toml"
    other.write_text(config.read_text().replace("num_requests = 24", "num_requests = 10"))
    recorded = recorded_live([validated], ["b1-s1-none"])["b1-s1-none"]
    with pytest.raises(ValueError, match="other requests"):
        session = setup(load_experiment(other), load_profile_doc(profile_path))
        _matching(recorded, requests_for(session), "b1-s1-none")
    assert main(["validate", str(config), "--profile", str(profile_path), "--out", str(tmp_path / "x"),
                 "--live-from", str(tmp_path), "--sweep", "b1-s1-none", "b2-s0.5-dynamic"]) == 2


def test_auto_host_cores_also_keeps_the_hosts_speed(monkeypatch):
    """--host-cores auto: the contention test's cores, and its one-process rate kept per deployment."""
    from easerve.cli import validate_cmd

    monkeypatch.setattr(validate_cmd, "CONTENTION_PROCS", 2)
    probe = validate_cmd._Remeasure()
    cores = probe("b1-s1-none")
    assert 1.0 <= cores <= 2.0
    assert set(probe.speed_hz) == {"b1-s1-none"} and probe.speed_hz["b1-s1-none"] > 0
