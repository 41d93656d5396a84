"""Written configs hold paths relative to where they are written, so they load on any machine."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from easerve.cli.search_cmd import dump_toml
from runtime.configs import load_experiment, portable_dict

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "calibration" / "profiles" / "cpu" / "qwen2-audio-small--cpu.json"


def test_to_dict_relative_to_the_output_folder_loads_back_to_the_same_files(tmp_path):
    (tmp_path / "in").mkdir()
    trace = tmp_path / "in" / "t.csv"
    trace.write_text("arrival_s,modality,prompt_tokens,output_tokens,mm_tokens_per_item\n0,audio,8,2,30\n")
    source = tmp_path / "in" / "c.toml"
    source.write_text(dump_toml({"model": {"name": "qwen2-audio", "size": "small"},
                                 "cluster": {"gpu": "cpu"}, "profile": {"path": str(PROFILE)},
                                 "workload": {"mix": "ultravox-audio", "trace": "t.csv"}}))
    config = load_experiment(source)
    assert Path(config.to_dict()["profile"]["path"]).is_absolute()  # absolute, as resolved
    out = tmp_path / "study"
    out.mkdir()
    data = portable_dict(config, out)
    assert not Path(data["profile"]["path"]).is_absolute()
    assert data["workload"]["trace"] == "../in/t.csv"
    (out / "best.toml").write_text(dump_toml(data))
    again = load_experiment(out / "best.toml")
    assert again.profile_path == PROFILE.resolve()
    assert again.workload_table["trace"] == str(trace.resolve())


def test_the_committed_confirmed_best_config_loads_its_profile():
    config = load_experiment(ROOT / "docs" / "results" / "confirm-cpu" / "best.toml")
    assert config.profile_path is not None and config.profile_path.is_file()


def test_no_committed_doc_or_config_names_a_machine_folder():
    try:
        found = subprocess.run(["git", "grep", "-nE", "/work/", "--", "*.md", "*.toml", "*.json",
                                ":!bench/gpu/results/"], cwd=ROOT, capture_output=True, text=True,
                               check=False)
    except OSError:
        pytest.skip("git is not available")
    if found.returncode not in (0, 1) or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    assert found.stdout == "", found.stdout


def test_a_model_spec_by_path_is_written_relative_too(tmp_path):
    (tmp_path / "in").mkdir()
    spec = tmp_path / "in" / "m.json"
    spec.write_text((ROOT / "calibration" / "specs" / "models" / "llava-v1.6-34b.json").read_text())
    source = tmp_path / "in" / "c.toml"
    source.write_text(dump_toml({"model": {"spec": "m.json"}, "cluster": {"gpu": "rtx6000ada"},
                                 "workload": {"mix": "llava-image", "rate_hz": 2.0}}))
    config = load_experiment(source)
    assert config.to_dict()["model"]["spec"] == str(spec.resolve())  # absolute, as resolved
    out = tmp_path / "study"
    out.mkdir()
    data = portable_dict(config, out)
    assert data["model"]["spec"] == "../in/m.json"
    (out / "best.toml").write_text(dump_toml(data))
    assert load_experiment(out / "best.toml").model == str(spec.resolve())
