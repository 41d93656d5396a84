"""Fixtures of the calibration-loop tests: one quick calibration of the tiny model, shared."""

from __future__ import annotations

import pytest

from easerve.cli import main


@pytest.fixture(scope="session")
def profile_path(tmp_path_factory):
    """A fitted profile of the tiny Qwen2-Audio on this CPU (``easerve calibrate --quick``)."""
    out = tmp_path_factory.mktemp("cal") / "tiny.json"
    assert main(["calibrate", "--model", "qwen2-audio", "--size", "tiny", "--quick", "--out", str(out)]) == 0
    return out
