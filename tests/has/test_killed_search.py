"""A ``kill -9`` of ``easerve search --workers 2``: its workers die with it, and a rerun finishes.

Each test starts the command as a child process, on SQLite (the default
``OUT/study.db``) and on PostgreSQL, waits until the study holds a few
COMPLETE trials and SIGKILLs the command. Then:

* every process the command started (two pool workers and multiprocessing's
  resource tracker; recorded from /proc before the kill) exits within 10 s;
* no COMPLETE trial is lost, and rerunning the same command (plain, without
  ``--join``: a plain rerun marks the killed run's RUNNING trials FAIL) ends
  with exactly the planned number of COMPLETE trials.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState

from easerve_core.has import finished_trials
from runtime.has import open_storage

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "llava34b_rtx6000ada.toml"
NUM_TRIALS = 24
KILL_AFTER_COMPLETE = 3
EXIT_WITHIN_S = 10.0
START_WITHIN_S = 60.0
RERUN_WITHIN_S = 120.0

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(),
                                reason="needs Linux /proc to find the search's child processes")


@dataclass(frozen=True, slots=True)
class Proc:
    """A process, told apart from a later one with the same pid by its start time."""

    pid: int
    start_ticks: str


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat fields from the state on (field 3 of proc(5) is index 0), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def _children(parent: int) -> set[Proc]:
    found = set()
    for entry in Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and int(fields[1]) == parent:
            found.add(Proc(int(entry.name), fields[19]))
    return found


def _alive(proc: Proc) -> bool:
    """Running, not a zombie (a dead orphan stays one where PID 1 does not reap)."""
    fields = _stat(proc.pid)
    return fields is not None and fields[19] == proc.start_ticks and fields[0] not in "ZX"


def _cmdline(proc: Proc) -> str:
    try:
        return Path(f"/proc/{proc.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "?"


def _record(parent: int, procs: dict[Proc, str]) -> None:
    """Add ``parent``'s children to ``procs`` with their command lines (read while alive)."""
    for proc in _children(parent):
        procs[proc] = _cmdline(proc)


def _num_workers(procs: dict[Proc, str]) -> int:
    return sum("spawn_main" in cmdline for cmdline in procs.values())


@pytest.fixture()
def started() -> Iterator[dict[Proc, str]]:
    """Processes a test started; any still alive at the end are killed (a failing test)."""
    procs: dict[Proc, str] = {}
    yield procs
    for proc in procs:
        if _alive(proc):
            os.kill(proc.pid, signal.SIGKILL)


@pytest.fixture(params=["sqlite", "postgres"])
def storage_args(request: pytest.FixtureRequest) -> list[str]:
    """No ``--storage`` (the default OUT/study.db), or a fresh PostgreSQL database."""
    return [] if request.param == "sqlite" else ["--storage", request.getfixturevalue("pg_url")]


def _command(out: Path, storage_args: list[str]) -> list[str]:
    return [sys.executable, "-m", "easerve", "search", str(CONFIG), "--rate", "2",
            "--trials", str(NUM_TRIALS), "--trial-s", "10", "--sampler", "random",
            "--workers", "2", *storage_args, "--out", str(out)]


def _env() -> dict[str, str]:
    """This checkout first on the path, in the command and in its spawned workers."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _study(url: str) -> optuna.Study:
    storage = open_storage(url)
    names = optuna.study.get_all_study_names(storage)
    assert len(names) == 1, names
    return optuna.load_study(study_name=names[0], storage=storage)


def _count(study: optuna.Study, state: TrialState) -> int:
    return len(study.get_trials(deepcopy=False, states=(state,)))


def _wait_for(what: str, done: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_WITHIN_S
    while not done():
        if proc.poll() is not None:
            pytest.fail(f"search exited ({proc.returncode}) before {what}; raise NUM_TRIALS? "
                        + log.read_text()[-2000:])
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {START_WITHIN_S} s: " + log.read_text()[-2000:])
        time.sleep(0.05)


def _start_and_kill(cmd: list[str], url: str, log: Path, started: dict[Proc, str]) -> None:
    """Start ``cmd``, SIGKILL it once the study holds a few COMPLETE trials; record its children."""
    with log.open("wb") as sink:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=sink, stderr=subprocess.STDOUT)
    try:
        def workers_up() -> bool:
            _record(proc.pid, started)
            return _num_workers(started) >= 2
        _wait_for("two pool workers", workers_up, proc, log)
        study = _study(url)  # the command created it before starting the pool
        _wait_for(f"{KILL_AFTER_COMPLETE} COMPLETE trials",
                  lambda: _count(study, TrialState.COMPLETE) >= KILL_AFTER_COMPLETE, proc, log)
        _record(proc.pid, started)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _wait_until_gone(children: dict[Proc, str]) -> set[Proc]:
    deadline = time.monotonic() + EXIT_WITHIN_S
    while (alive := {p for p in children if _alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def _storage_url(out: Path, storage_args: list[str]) -> str:
    return storage_args[1] if storage_args else str(out / "study.db")


def test_killed_search_takes_its_workers_with_it(tmp_path: Path, storage_args: list[str],
                                                started: dict[Proc, str]) -> None:
    out = tmp_path / "out"
    _start_and_kill(_command(out, storage_args), _storage_url(out, storage_args),
                    tmp_path / "search.log", started)
    assert _num_workers(started) == 2
    alive = _wait_until_gone(started)
    assert not alive, "orphans: " + "; ".join(f"{p.pid} {started[p]}" for p in alive)


def test_killed_search_loses_no_trial_and_a_rerun_finishes(tmp_path: Path, storage_args: list[str],
                                                           started: dict[Proc, str]) -> None:
    out = tmp_path / "out"
    cmd, url = _command(out, storage_args), _storage_url(out, storage_args)
    _start_and_kill(cmd, url, tmp_path / "search.log", started)
    assert not _wait_until_gone(started)
    before = _study(url).get_trials(deepcopy=False)
    complete = {t.number: t.value for t in before if t.state == TrialState.COMPLETE}
    running = {t.number for t in before if t.state == TrialState.RUNNING}
    assert len(complete) >= KILL_AFTER_COMPLETE

    rerun = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True,
                           timeout=RERUN_WITHIN_S, check=False)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    after = {t.number: t for t in _study(url).get_trials(deepcopy=False)}
    states = [t.state for t in after.values()]
    finished = finished_trials(_study(url))  # COMPLETE, and PRUNED on the ladder (not surplus)
    assert len(finished) == NUM_TRIALS
    assert set(states) <= {TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL}
    assert {n: after[n].value for n in complete} == complete  # none lost, none rerun
    assert {n for n, t in after.items() if t.state == TrialState.FAIL} == running
    assert len(pd.read_csv(out / "trials.csv")) == NUM_TRIALS
