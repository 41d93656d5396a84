"""Steps of the serving check: one command each, under a cap, logged, never raising.

A step is a module with a ``main(argv) -> int`` (``easerve.cli`` or a bench
module) and its arguments. :class:`Runner` runs it one of two ways:

* ``subprocess`` (the device): ``python -m MODULE ARGV`` in its own process
  group, its output copied line by line to ``log.txt`` and the console. At
  the cap it gets SIGTERM (easerve turns it into an interrupt: a trial stops,
  a confirmation writes its partial report), then SIGKILL for the group after
  a grace. A CUDA fault or a hang in one step cannot take the next one down.
* ``inprocess`` (the CPU dry run): ``MODULE.main(ARGV)`` in this process, the
  cap an interval timer whose SIGALRM raises :class:`easerve.cli.Terminated`,
  the same interrupt. It saves the seconds of importing torch and starting a
  forkserver per step, which is what lets the dry run join ``make test``.
"""

from __future__ import annotations

import importlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from easerve.cli import Terminated

RUNNERS = ("subprocess", "inprocess")
#: for ``inprocess``: where the ``main`` of ``python -m MODULE`` lives, when not in MODULE itself
ENTRY_POINTS = {"easerve": "easerve.cli"}
#: seconds a step has between SIGTERM and SIGKILL (a trial's workers take a few to stop)
GRACE_S = 15.0


class StepResult(NamedTuple):
    """How one step ended: exit status (124 at the cap), seconds, the command."""

    name: str
    rc: int
    secs: float
    timed_out: bool
    command: str

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "rc": self.rc, "secs": round(self.secs, 2), "timed_out": self.timed_out,
                "command": self.command}


class Runner:
    """Runs steps (see the module docstring); appends to ``log_path``."""

    def __init__(self, *, mode: str, log_path: Path, python: str = sys.executable,
                 cwd: Path | None = None) -> None:
        if mode not in RUNNERS:
            raise ValueError(f"unknown runner {mode!r}; known: {', '.join(RUNNERS)}")
        self.mode = mode
        self.log_path = log_path
        self.python = python
        self.cwd = cwd

    def log(self, line: str) -> None:
        stamp = time.strftime("%H:%M:%S", time.gmtime())
        text = f"[serve-check] {stamp} {line}"
        print(text, flush=True)
        with open(self.log_path, "a") as fh:
            fh.write(text + "\n")

    def run(self, name: str, module: str, argv: Sequence[str], cap_s: float) -> StepResult:
        command = " ".join(shlex.quote(a) for a in ("python", "-m", module, *argv))
        self.log(f"{name}: {command} (cap {cap_s:.0f} s)")
        t0 = time.monotonic()
        if self.mode == "subprocess":
            rc, timed_out = self._subprocess(module, argv, cap_s)
        else:
            rc, timed_out = self._inprocess(module, argv, cap_s)
        result = StepResult(name=name, rc=rc, secs=time.monotonic() - t0, timed_out=timed_out,
                            command=command)
        self.log(f"{name}: exit {rc}{' (cap reached)' if timed_out else ''} after {result.secs:.1f} s")
        return result

    def _subprocess(self, module: str, argv: Sequence[str], cap_s: float) -> tuple[int, bool]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen([self.python, "-m", module, *argv], cwd=self.cwd, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        copier = threading.Thread(target=_copy, args=(proc.stdout, self.log_path), daemon=True)
        copier.start()
        timed_out = False
        try:
            rc = proc.wait(timeout=max(1.0, cap_s))
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            rc = 124
        copier.join(timeout=5.0)
        return rc, timed_out

    def _inprocess(self, module: str, argv: Sequence[str], cap_s: float) -> tuple[int, bool]:
        fired = threading.Event()

        def alarm(signum: int, frame: Any) -> None:
            fired.set()
            raise Terminated()

        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, max(1.0, cap_s))
        try:
            entry = importlib.import_module(ENTRY_POINTS.get(module, module))
            rc = int(entry.main(list(argv)) or 0)
        except KeyboardInterrupt:
            rc = 143
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except Exception as exc:  # a bench module's bug: recorded, the check goes on
            self.log(f"  {type(exc).__name__}: {exc}")
            rc = 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return (124 if fired.is_set() else rc), fired.is_set()


def prestart_forkserver() -> None:
    """Start this process's forkserver with the live workers preloaded (``inprocess`` only).

    Every in-process step then forks its workers and echo children from one
    server that has torch and transformers imported, as one ``easerve``
    process's trials do; without it the first step to fork (calibrate's
    transfer test) starts a server without the workers' modules, and each
    trial's workers import them again after the fork.
    """
    import multiprocessing.forkserver as forkserver

    import torch.multiprocessing as tmp

    tmp.get_context("forkserver").set_forkserver_preload(["live.workers", "live.profiling_host"])
    forkserver.ensure_running()


def _copy(stream: TextIO | None, log_path: Path) -> None:
    if stream is None:
        return
    with open(log_path, "a") as log:
        for line in stream:
            sys.stdout.write(line)
            log.write(line)
            log.flush()
