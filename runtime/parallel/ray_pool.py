"""``ray``: tasks on a Ray cluster, at most ``num_jobs`` at once, results in order.

Ray is an optional extra (``pip install 'easerve[ray]'``) and is imported
only when a pool opens. With no address the pool starts a local Ray on this
machine (``num_jobs`` CPUs, default all) and stops it on leaving; with one
it joins that cluster and only disconnects. Each task is one Ray task of one
CPU that calls ``fn(item)``; ``fn`` travels by reference (every node needs
easerve installed, or a ``runtime_env``: docs/scaling.md) and the item
pickled. Tasks are not retried (``max_retries=0``): a lost worker or node
fails the map with one :class:`~runtime.parallel.base.BackendError`,
and an exception a task raised is raised again here as itself.

SIGTERM keeps the handler the process had before the pool started Ray (the
CLI's: stop as on Ctrl-C), not the one ``ray.init`` installs.

Leaving a map early (an error, Ctrl-C) force-cancels the tasks still running,
but only after a short grace (:data:`CANCEL_GRACE_S`) in which the tasks that
are finishing anyway may finish. Ray's cancel races a task's completion: a
cancel that lands while the task's reply is being handled fails a check in
Ray's task manager ("Tried to complete task that was not pending") and the
check ends the driver with exit status 1 (Ray 2.60; the repro is
``tests/parallel/test_ray_cancel.py``). A task still running after the
grace is a long one, far from its end.
"""

from __future__ import annotations

import importlib
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from types import ModuleType, TracebackType
from typing import Any

from easerve_core import checks
from runtime.parallel.base import BackendError, Poll, R, T

CANCEL_GRACE_S = 0.2
"""Seconds the tasks in flight get to finish before the rest are cancelled."""


def _apply(fn: Callable[[T], R], item: T) -> R:
    return fn(item)


def import_ray() -> ModuleType:
    """The ``ray`` module, or a ``ValueError`` saying how to install it."""
    try:
        return importlib.import_module("ray")
    except ModuleNotFoundError:
        raise ValueError("backend ray: Ray is not installed (pip install 'easerve[ray]')") from None


def _keep_handler(signum: int, handler: Any) -> None:
    """Put ``handler`` back for ``signum``. ``ray.init`` installs Abseil's failure handler in the
    driver, and on SIGTERM it prints a C++ stack and ends the process at once; the command's own
    handler (the CLI's SIGTERM as an interrupt: the run stops as on Ctrl-C, exit 143) comes back.
    Only the main thread can set one; Python's view of the handler never saw Abseil's."""
    if handler is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signum, handler)


class RayPool:
    """Ray tasks, a window of ``num_jobs`` in flight; use it as a context manager."""

    name = "ray"

    def __init__(self, *, num_jobs: int | None = None, address: str | None = None,
                 poll_s: float = 0.5) -> None:
        self._want_jobs = None if num_jobs is None else checks.integer("jobs", num_jobs, minimum=1)
        self._address = address
        self._poll_s = checks.positive("poll_s", poll_s)
        self._ray: ModuleType | None = None
        self._owns = False
        self.num_jobs = self._want_jobs or 1
        self._task: Any = None

    def __enter__(self) -> RayPool:
        ray = import_ray()
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING}
            if self._address is None:
                kwargs["num_cpus"] = self._want_jobs
            on_term = signal.getsignal(signal.SIGTERM)
            try:
                ray.init(address=self._address, **kwargs)
            except (ConnectionError, RuntimeError) as exc:
                raise ValueError(f"backend ray: cannot reach a cluster at {self._address!r}: "
                                 f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
            finally:
                _keep_handler(signal.SIGTERM, on_term)
            self._owns = True
        self._ray = ray
        self.num_jobs = self._want_jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._task = ray.remote(num_cpus=1, max_retries=0)(_apply)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        ray, self._ray = self._ray, None
        if ray is not None and self._owns:
            ray.shutdown()

    def map(self, fn: Callable[[T], R], items: Sequence[T], *, poll: Poll | None = None) -> list[R]:
        ray = self._ray
        if ray is None:
            raise RuntimeError("RayPool.map outside its with block")
        results: list[Any] = [None] * len(items)
        pending: dict[Any, int] = {}
        queued = iter(range(len(items)))
        try:
            for i in queued:
                pending[self._task.remote(fn, items[i])] = i
                if len(pending) >= self.num_jobs:
                    break
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1, timeout=self._poll_s)
                for ref in done:
                    results[pending.pop(ref)] = self._get(ray, ref, len(items))
                    nxt = next(queued, None)
                    if nxt is not None:
                        pending[self._task.remote(fn, items[nxt])] = nxt
                if poll:
                    poll()
        except BaseException:
            self._cancel(ray, list(pending))
            raise
        return results

    @staticmethod
    def _cancel(ray: ModuleType, refs: list[Any]) -> None:
        """Force-cancel the tasks of ``refs`` that are still running after the grace."""
        if not refs:
            return
        _, running = ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S, fetch_local=False)
        for ref in running:
            ray.cancel(ref, force=True)

    @staticmethod
    def _get(ray: ModuleType, ref: Any, num_tasks: int) -> Any:
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as error:
            cause = error.cause
            if isinstance(cause, Exception) and not isinstance(cause, ray.exceptions.RayError):
                raise cause from error
            raise BackendError(f"backend ray: a task of {num_tasks} failed in Ray: {cause}") from None
        except ray.exceptions.RayError as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise BackendError(f"backend ray: a worker died while running {num_tasks} tasks "
                               f"({type(error).__name__}: {first}); the run is stopped") from None
