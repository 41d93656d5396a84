"""``easerve controller-eval``: the controller study as a subcommand, and its old door as an alias."""

from __future__ import annotations

import re

import pytest

from easerve.cli import main
from easerve.experiments import controller_eval


def _flags(text: str) -> set[str]:
    return set(re.findall(r"--[a-z][a-z-]*", text.split("options:")[-1]))


def test_help_through_the_easerve_command_lists_the_same_flags_as_the_alias(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["controller-eval", "--help"]) == 0
    ours = capsys.readouterr().out
    assert ours.startswith("usage: easerve controller-eval")
    with pytest.raises(SystemExit) as done:
        controller_eval.main(["--help"])
    assert done.value.code == 0
    alias = capsys.readouterr().out
    assert _flags(ours) == _flags(alias)
    assert {"--quick", "--mix-shifts", "--replan", "--shapes", "--trace", "--out"} <= _flags(ours)


def test_bad_input_is_one_line_named_for_the_command_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["controller-eval", "--quick", "--shapes", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["easerve controller-eval: error: --shapes: unknown model(s) nope; "
                   "known: image, video, audio"]
    assert controller_eval.main(["--quick", "--shapes", "nope"]) == 2
    assert capsys.readouterr().err.startswith("controller_eval: error: --shapes: unknown model(s) nope")
