"""A driver for the interrupt tests: ``python -m tests.parallel.driver BACKEND``.

Opens ``local`` with two processes or ``ray`` with two jobs, prints
``ready`` and maps two tasks that sleep a minute, so a test can interrupt
or kill it while its workers are busy. SIGTERM is an interrupt, as under the CLI:
the driver says ``terminated`` and exits 143.
"""

from __future__ import annotations

import sys

from easerve.cli import Terminated, sigterm_as_interrupt
from runtime.parallel import BackendSettings, open_backend
from tests.parallel import tasks

if __name__ == "__main__":
    name = sys.argv[1]
    settings = BackendSettings(name=name, num_jobs=2, poll_s=0.05)
    try:  # as the CLI runs a command (easerve.cli.main): SIGTERM stops it as Ctrl-C does
        with sigterm_as_interrupt(), open_backend(settings) as backend:
            print("ready", flush=True)
            backend.map(tasks.sleep_then, [60.0, 60.0])
    except Terminated:
        print("terminated", file=sys.stderr)
        sys.exit(143)
