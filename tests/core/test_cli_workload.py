"""The front door: --version, --help on each subcommand, and bad input -> exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from easerve.cli import COMMANDS, main, named_command


def test_version(capsys):
    assert main(["--version"]) == 0  # main returns argparse's exit status (in-process callers and tests)
    assert "easerve" in capsys.readouterr().out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_subcommand_has_help(command, capsys):
    assert main([command, "--help"]) == 0
    assert "usage" in capsys.readouterr().out


def test_top_level_help_lists_every_command_with_its_line(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)
    assert "simulate a deployment on a workload (SimPy model)" in out  # sim's line: its module was read


@pytest.mark.parametrize(("argv", "named"), [
    (["workload", "x.toml"], "workload"), (["--debug", "sim", "c"], "sim"), (["--help", "sim"], None),
    (["simulate"], None), ([], None), (["--version"], None)])
def test_the_named_command_is_found_before_the_parser_is_built(argv, named):
    assert named_command(argv) == named


def test_a_command_imports_only_its_own_module():
    """``easerve workload`` does not wait for the simulator's plots or the live executor."""
    code = ("import sys; from easerve.cli import main; main(['workload', '--help']); "
            "print(sorted(m for m in ('easerve.cli.sim_cmd', 'easerve.cli.live_cmd', 'sim.plots', "
            "'live.trial', 'easerve.cli.workload_cmd') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "['easerve.cli.workload_cmd']"


def test_workload_writes_a_trace(tmp_path):
    cfg = tmp_path / "w.toml"
    cfg.write_text('seed = 1\n[workload]\nmix = "ultravox-audio"\nrate_hz = 3.0\nnum_requests = 40\n')
    out = tmp_path / "trace.jsonl"
    assert main(["workload", str(cfg), "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 40


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ('rate_hz = -3.0\nnum_requests = 4', "rate_hz"),
        ('rate_hz = 3.0\nmix = "smell"', "mix"),
        ('rate_hz = 3.0\nnum_requests = 0', "num_requests"),
    ],
)
def test_bad_workload_is_one_line_exit_2_and_writes_nothing(tmp_path, table, field):
    cfg = tmp_path / "w.toml"
    cfg.write_text(f"[workload]\n{table}\n")
    out = tmp_path / "trace.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "easerve", "workload", str(cfg), "--out", str(out)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in proc.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == [cfg]
