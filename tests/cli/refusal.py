"""The shared check for refused command lines: exit 2, one line naming the culprit, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from easerve.cli import main


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> None:
    """``easerve argv`` exits 2, one stderr line holds every needle, nothing is written under ``tmp_path``."""
    before = sorted(tmp_path.rglob("*"))
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    assert sorted(tmp_path.rglob("*")) == before
