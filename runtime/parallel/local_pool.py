"""``local`` with N jobs: N spawned processes on this machine, tied to this one.

``start_method="fork"`` forks them instead: no worker imports anything, so
a short map whose parent already holds what its tasks need (HAS's recheck
of a few long streams) gains the cores without a second of imports per
worker. A forked worker closes its copy of the lifeline's write end first,
so the parent still holds the only one.

The workers die with this process (:mod:`~runtime.parallel.lifeline`)
and ignore Ctrl-C: this process gets it, and leaving the pool's ``with``
block on any exception closes the lifeline first, so the workers end at
once, mid-task, instead of finishing what they hold. A worker that dies
fails the map with one :class:`~runtime.parallel.base.BackendError`.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import signal
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from multiprocessing.connection import Connection
from types import TracebackType

from easerve_core import checks
from runtime.parallel.base import BackendError, Poll, R, T
from runtime.parallel.lifeline import die_with_parent, lifeline_ends


def _init_worker(reader: Connection, writer: Connection | None = None) -> None:
    """Pool initializer: die with the parent; leave Ctrl-C to the parent, which ends us.

    ``writer``: a forked worker's inherited copy of the lifeline's write end, closed here.
    """
    if writer is not None:
        writer.close()
    die_with_parent(reader)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


#: how a local pool may start its workers
START_METHODS = ("spawn", "fork")


class LocalPool:
    """N spawned worker processes; use it as a context manager (see the module docstring)."""

    name = "local"

    def __init__(self, num_jobs: int, *, poll_s: float = 0.5, start_method: str = "spawn") -> None:
        self.num_jobs = checks.integer("jobs", num_jobs, minimum=1)
        self._poll_s = checks.positive("poll_s", poll_s)
        self._start = checks.one_of("start_method", start_method, START_METHODS)
        self._stack = ExitStack()
        self._pool: cf.ProcessPoolExecutor | None = None

    def __enter__(self) -> LocalPool:
        ctx = multiprocessing.get_context(self._start)
        reader, writer = self._stack.enter_context(lifeline_ends(ctx))
        initargs = (reader, writer) if self._start == "fork" else (reader,)
        self._pool = cf.ProcessPoolExecutor(max_workers=self.num_jobs, mp_context=ctx,
                                            initializer=_init_worker, initargs=initargs)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if exc_type is None:
            pool.shutdown(wait=True)
            self._stack.close()
        else:
            self._stack.close()  # the workers see the pipe close and exit now
            pool.shutdown(wait=True, cancel_futures=True)

    def map(self, fn: Callable[[T], R], items: Sequence[T], *, poll: Poll | None = None) -> list[R]:
        if self._pool is None:
            raise RuntimeError("LocalPool.map outside its with block")
        futures = [self._pool.submit(fn, item) for item in items]
        pending: set[cf.Future[R]] = set(futures)
        try:
            while pending:
                done, pending = cf.wait(pending, timeout=self._poll_s, return_when=cf.FIRST_EXCEPTION)
                if poll:
                    poll()
                for future in done:
                    _raise_failure(future, len(futures))
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return [f.result() for f in futures]


def _raise_failure(future: cf.Future[R], num_tasks: int) -> None:
    error = future.exception()
    if error is None:
        return
    if isinstance(error, cf.process.BrokenProcessPool):
        raise BackendError(
            f"backend local: a worker process died while running {num_tasks} tasks (killed by a "
            "signal, the OOM killer or os._exit); the run is stopped and its workers ended") from None
    raise error
