"""The lifeline pipe alone ends a worker: closing the parent's end makes the worker exit.

(The kill -9 tests in test_killed_search.py exercise both ties together; on
Linux the parent-death signal would hide a broken pipe watch there.)
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import threading
from multiprocessing.connection import Connection

from runtime.parallel.lifeline import ORPHAN_EXIT_STATUS, die_with_parent, lifeline

EXIT_WITHIN_S = 10.0


def _worker(reader: Connection, ready: multiprocessing.synchronize.Event) -> None:
    die_with_parent(reader)
    ready.set()
    threading.Event().wait()  # a worker hung on a lock, for ever


def test_closing_the_lifeline_ends_the_worker() -> None:
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    with lifeline(ctx) as reader:
        worker = ctx.Process(target=_worker, args=(reader, ready), daemon=True)
        worker.start()
        assert ready.wait(EXIT_WITHIN_S)
        assert worker.is_alive()
    worker.join(EXIT_WITHIN_S)
    assert worker.exitcode == ORPHAN_EXIT_STATUS
