"""A driver for the cancel test: ``python -m tests.parallel.cancel_driver ROUNDS``.

Opens ``ray`` with two jobs (its own local Ray) and, ``ROUNDS`` times, maps
six tasks of which one raises at once while its siblings finish at the same
moment, so leaving the map cancels tasks whose replies are on their way.
Each round must raise that task's ``ValueError`` (not a ``BackendError`` for
a worker a stale cancel killed); then a last map must run whole. Prints
``rounds N ok`` and exits 0, or Ray ends this process (a failed check in
Ray's task manager exits with status 1).
"""

from __future__ import annotations

import sys

from runtime.parallel import BackendSettings, open_backend
from tests.parallel import tasks

if __name__ == "__main__":
    rounds = int(sys.argv[1])
    with open_backend(BackendSettings(name="ray", num_jobs=2, poll_s=0.05)) as backend:
        for _ in range(rounds):
            try:
                backend.map(tasks.fail_on_two_at_once, list(range(6)))
            except ValueError:
                pass
            else:
                raise SystemExit("the map did not raise the task's error")
        assert backend.map(tasks.draw, [1, 2]) == [tasks.draw(1), tasks.draw(2)]
    print(f"rounds {rounds} ok", flush=True)
