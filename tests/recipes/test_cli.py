"""``easerve recipe``: the folder written whole, and bad input as one line naming the flag, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from easerve.cli import main
from easerve.resources import config_path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(["recipe", *argv])
    return status, capsys.readouterr().err


def test_writes_the_recipe_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r"
    status, err = _run(capsys, str(config_path("llava34b_rtx6000ada.toml")), "--engine", "vllm",
                       "--out", str(out))
    assert status == 0 and err == ""
    assert sorted(p.name for p in out.iterdir()) == ["RECIPE.md", "launch.sh"]


def test_unknown_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = _run(capsys, "llava34b_rtx6000ada.toml", "--engine", "trt", "--out", str(tmp_path / "r"))
    assert status == 2 and len(err.strip().splitlines()) == 1 and "--engine" in err
    assert list(tmp_path.iterdir()) == []


def test_config_without_deployment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text('[model]\nname = "llava-v1.6-34b"\n[cluster]\ngpu = "rtx6000ada"\n')
    status, err = _run(capsys, str(toml), "--engine", "sglang", "--out", str(tmp_path / "r"))
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert "emit: the config has no [deployment] to write" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]


def test_out_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "taken"
    target.write_text("x")
    status, err = _run(capsys, "llava34b_rtx6000ada.toml", "--engine", "dynamo", "--out", str(target))
    assert status == 2 and len(err.strip().splitlines()) == 1 and "--out" in err
    assert target.read_text() == "x"


def test_non_empty_out_needs_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r"
    out.mkdir()
    (out / "old.txt").write_text("old")
    status, err = _run(capsys, "llava34b_rtx6000ada.toml", "--engine", "vllm", "--out", str(out))
    assert status == 2 and "--force" in err and (out / "old.txt").exists()
    status, _ = _run(capsys, "llava34b_rtx6000ada.toml", "--engine", "vllm", "--out", str(out), "--force")
    assert status == 0 and sorted(p.name for p in out.iterdir()) == ["RECIPE.md", "launch.sh"]


def test_missing_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = _run(capsys, str(tmp_path / "none.toml"), "--engine", "vllm", "--out", str(tmp_path / "r"))
    assert status == 2 and len(err.strip().splitlines()) == 1 and "config file not found" in err
    assert not (tmp_path / "r").exists()
