"""What every backend is: the :class:`Backend` protocol, its error, and the in-process one.

See :mod:`runtime.parallel.backend` for the contract (results in the
items' order, whatever ran them) and how a backend is chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")
Poll = Callable[[], None]


class BackendError(RuntimeError):
    """The backend lost a worker (or could not run a task at all); no result was kept."""


class Backend(Protocol):
    """Runs ``fn`` over items, results in the items' order."""

    @property
    def name(self) -> str: ...

    @property
    def num_jobs(self) -> int: ...

    def map(self, fn: Callable[[T], R], items: Sequence[T], *, poll: Poll | None = None) -> list[R]:
        """``[fn(item) for item in items]``; ``poll`` is called now and then while it waits."""
        ...


class InProcess:
    """``local`` with one job: every task in this process, in order (the serial path)."""

    name = "local"
    num_jobs = 1

    def map(self, fn: Callable[[T], R], items: Sequence[T], *, poll: Poll | None = None) -> list[R]:
        out = []
        for item in items:
            out.append(fn(item))
            if poll:
                poll()
        return out


#: the default backend of functions that take one: every task here, in order
IN_PROCESS = InProcess()


def run_tasks(backend: Backend, tasks: Sequence[Callable[[], R]], *, poll: Poll | None = None) -> list[R]:
    """Call each picklable zero-argument task on ``backend``; results in the tasks' order.

    For tasks of different kinds in one map (``functools.partial`` of
    module-level functions, or frozen dataclasses with ``__call__``).
    """
    return backend.map(_call, tasks, poll=poll)


def _call(task: Callable[[], R]) -> R:
    return task()
