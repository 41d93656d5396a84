"""``easerve controller-eval``: the controller study as a subcommand, and its old door as an alias."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from easerve.cli import main
from easerve.cli.outputs import write_tables
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


@pytest.mark.parametrize(("args", "says"), [
    (["--out", "OUT"], "--out: read only by the mix shifts (--mix-shifts, --shift or --trace); "
                       "this run is the rate shift"),
    (["--seeds", "0,1"], "--seeds: read only by the mix shifts"),
    (["--no-linger"], "--[no-]linger: read only by the mix shifts"),
    (["--interim-share"], "--[no-]interim-share: read only by the mix shifts"),
    (["--no-standby"], "--[no-]standby: read only by the mix shifts"),
    (["--forecaster", "ewma", "--shapes"], "--forecaster: read only by the mix shifts (--mix-shifts, --shift "
                                           "or --trace); this run is the shapes (--shapes)"),
    (["--mix-shifts", "resolution", "--frugal", "--out", "OUT"],
     "--frugal: read only by the rate shift (no study flag); this run is the mix shifts (--mix-shifts)"),
    (["--mix-shifts", "resolution", "--shapes", "--out", "OUT"],
     "--shapes: not with --mix-shifts (one study a run)"),
    (["--shapes", "--ceiling"], "--ceiling: not with --shapes (one study a run)"),
    (["--ceiling", "--quick"], "--quick: read only by the rate shift (no study flag), the shapes "
                               "(--shapes) or the mix shifts (--mix-shifts, --shift or --trace); "
                               "this run is the ceiling"),
    (["--trace-format", "azure"], "--trace-format: goes with --trace"),
    (["--mix-shifts", "resolution,resolution", "--out", "OUT"],
     "--mix-shifts: each shift runs once; resolution is named twice"),
    (["--mix-shifts", ",resolution", "--out", "OUT"],
     "--mix-shifts: unknown shift(s) ''; known: output-length"),
])
def test_a_flag_the_study_does_not_read_is_refused_not_left_unread(
        args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each study reads its own flags; one it does not read is one line and exit 2, before any run,
    and nothing is written (``--out``'s folder is not made)."""
    out = tmp_path / "out"
    assert main(["controller-eval", *[str(out) if a == "OUT" else a for a in args]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("easerve controller-eval: error: ") and says in err[0]
    assert list(tmp_path.iterdir()) == []


def test_an_out_that_cannot_be_a_folder_is_refused_before_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "taken").write_text("a file")
    out = tmp_path / "taken" / "out"
    assert main(["controller-eval", "--mix-shifts", "resolution", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"easerve controller-eval: error: --out {tmp_path / 'taken' / 'out'}: "
                   f"{tmp_path / 'taken'} is a file, not a folder"]
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]


class _Unwritable:
    def to_csv(self, path: Path, index: bool) -> None:
        raise OSError(28, "No space left on device")


def test_tables_replace_their_earlier_runs_whole_or_not_at_all(tmp_path: Path) -> None:
    write_tables(tmp_path / "t", {"a": pd.DataFrame({"x": [1]}), "b": pd.DataFrame({"y": [2]})})
    write_tables(tmp_path / "t", {"a": pd.DataFrame({"x": [3]})})
    assert (tmp_path / "t" / "a.csv").read_text() == "x\n3\n"  # replaced
    assert (tmp_path / "t" / "b.csv").read_text() == "y\n2\n"  # another table stays
    with pytest.raises(OSError, match="No space left"):
        write_tables(tmp_path / "t", {"a": pd.DataFrame({"x": [4]}), "b": _Unwritable()})  # type: ignore[dict-item]
    assert (tmp_path / "t" / "a.csv").read_text() == "x\n3\n"  # nothing moved in: a set is never mixed
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["a.csv", "b.csv"]  # no staging left
