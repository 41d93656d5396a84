"""A reader that closes ``easerve``'s output early (``| head``) ends the command quietly, exit 141;
a broken pipe that is not standard output's is an error like any other."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from easerve.cli import main


def test_a_closed_stdout_is_exit_141_and_no_error_line() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first line: every write breaks
    try:
        done = subprocess.run([sys.executable, "-m", "easerve", "model", "list"], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, "")


def test_another_broken_pipe_is_an_error_line(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import easerve.cli.gpu_cmd as gpu_cmd

    def broken(args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")  # a worker's pipe, say: stdout is fine

    monkeypatch.setattr(gpu_cmd, "run_list", broken)  # set_defaults reads it when the parser is built
    status = main(["gpu", "list"])
    assert status == 2 and "easerve gpu: error: " in capsys.readouterr().err
