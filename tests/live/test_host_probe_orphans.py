"""The host probes of ``easerve calibrate`` die with their parent: a kill -9 leaves no spinning child."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.live.conftest import pid_alive

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
from live.profiling_host import measure_contention
measure_contention(2, duration_s=30.0, reps=3)
"""


def test_contention_children_exit_when_the_parent_is_killed():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", PROBE], cwd=ROOT, env=env)
    try:
        deadline, spinners = time.monotonic() + 60, []
        while time.monotonic() < deadline and len(spinners) < 2:
            time.sleep(0.2)
            parent = psutil.Process(proc.pid)
            helpers = {k.pid for k in parent.children()}  # the forkserver and the resource tracker
            spinners = [k.pid for k in parent.children(recursive=True) if k.pid not in helpers]
        assert len(spinners) >= 2, "the probe's children did not start"
        everyone = [k.pid for k in psutil.Process(proc.pid).children(recursive=True)]
        time.sleep(1.0)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(pid_alive(p) for p in everyone) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(pid_alive(p) for p in everyone), [p for p in everyone if pid_alive(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
