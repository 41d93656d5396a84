"""A run folder replaced with ``--force`` is swapped whole, or the earlier run stays (easerve.cli.outputs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from easerve.cli import outputs
from easerve.cli.outputs import RunFolder


def test_a_swap_that_fails_puts_the_earlier_run_back_and_leaves_no_sibling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "records.parquet").write_text("earlier")
    real = os.replace

    def replace(src: os.PathLike[str] | str, dst: os.PathLike[str] | str) -> None:
        if Path(src).name.startswith(".run.tmp-"):  # the new run's move into place
            raise OSError(16, "Device or resource busy", str(src))
        real(src, dst)

    monkeypatch.setattr(outputs.os, "replace", replace)
    with pytest.raises(OSError, match="busy"), RunFolder(out, force=True) as staging:
        (staging / "records.parquet").write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert (out / "records.parquet").read_text() == "earlier"


def test_the_working_folder_is_refused_before_anything_is_made(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x").write_text("kept")
    for given in (".", "..", "/", str(tmp_path)):
        with pytest.raises(ValueError, match="is the working folder or holds it"):
            RunFolder(Path(given), force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]
