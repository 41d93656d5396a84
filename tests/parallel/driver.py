"""A driver for the interrupt tests: ``python -m tests.parallel.driver BACKEND``.

Opens ``local`` with two processes or ``ray`` with two jobs, prints
``ready`` and maps two tasks that sleep a minute, so a test can interrupt
or kill it while its workers are busy.
"""

from __future__ import annotations

import sys

from runtime.parallel import BackendSettings, open_backend
from tests.parallel import tasks

if __name__ == "__main__":
    name = sys.argv[1]
    with open_backend(BackendSettings(name=name, num_jobs=2, poll_s=0.05)) as backend:
        print("ready", flush=True)
        backend.map(tasks.sleep_then, [60.0, 60.0])
