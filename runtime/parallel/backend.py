"""The front door: :class:`BackendSettings` in, an open :class:`~runtime.parallel.base.Backend` out.

A sweep (systems x rates x seeds), a set of HAS studies, or one study's
workers are lists of independent tasks. :func:`open_backend` opens the
backend that ``settings.name`` names in :data:`BACKENDS`; its
``map(fn, items)`` returns ``[fn(item) for item in items]``, in the items'
order, however and wherever the calls ran:

* ``local``, one job: in this process, one item after another (the serial
  path; :class:`~runtime.parallel.base.InProcess`);
* ``local``, N jobs: N spawned processes on this machine that die with it
  (:class:`~runtime.parallel.local_pool.LocalPool`);
* ``ray``: Ray tasks, at most N at once; no address starts a local Ray on
  this machine's cores (:class:`~runtime.parallel.ray_pool.RayPool`).

Results never depend on the backend or on N: a task carries everything it
needs, its seed included (seeds belong to tasks, never to workers), and a
worker keeps nothing from one task to the next that a result could depend
on. ``fn`` is a module-level function (or a picklable callable); items and
results travel pickled (plans, profiles, deployments, frames), never
processes, open files or connections.

Failures: an exception raised by ``fn`` is raised again by ``map``, as it
was raised; a worker that dies (a signal, the OOM killer, ``os._exit``, a
lost Ray node) fails the map with one
:class:`~runtime.parallel.base.BackendError`. Either way the other tasks
are cancelled, and leaving the ``with open_backend(...)`` block on an error
ends the workers at once instead of waiting for their running tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from easerve_core import checks
from runtime.parallel.base import Backend, InProcess
from runtime.parallel.local_pool import LocalPool
from runtime.parallel.ray_pool import RayPool


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendSettings:
    """Where to run tasks.

    Args:
        name: ``local`` or ``ray`` (:data:`BACKENDS`).
        num_jobs: tasks at once; None: 1 for ``local`` (in this process),
            every CPU of the cluster for ``ray``.
        address: the Ray cluster to join (``ray`` only: ``auto``,
            ``head:6379``, ``ray://head:10001``); None starts a local Ray
            with ``num_jobs`` CPUs (default: all of this machine's).
        poll_s: how often a waiting ``map`` calls its ``poll`` (progress).
    """

    name: str = "local"
    num_jobs: int | None = None
    address: str | None = None
    poll_s: float = 0.5

    def __post_init__(self) -> None:
        checks.one_of("backend", self.name, BACKENDS)
        if self.num_jobs is not None:
            checks.integer("jobs", self.num_jobs, minimum=1)
        if self.address is not None:
            if self.name != "ray":
                raise ValueError(f"address: only the ray backend joins a cluster, got backend {self.name!r}")
            if not isinstance(self.address, str) or not self.address.strip():
                raise ValueError(f"address must be a non-empty string, got {self.address!r}")
        checks.positive("poll_s", self.poll_s)

    def describe(self) -> str:
        """One line for reports: ``local, 2 jobs``, ``ray (local), all CPUs``, ``ray at auto, 8 jobs``."""
        if self.name == "local":
            return f"local, {_jobs(self.num_jobs or 1)}"
        where = f"ray at {self.address}" if self.address else "ray (local)"
        return f"{where}, {'all CPUs' if self.num_jobs is None else _jobs(self.num_jobs)}"


def _jobs(n: int) -> str:
    return f"{n} job{'s' if n > 1 else ''}"


@contextmanager
def _open_local(settings: BackendSettings) -> Iterator[Backend]:
    jobs = settings.num_jobs or 1
    if jobs == 1:
        yield InProcess()
        return
    with LocalPool(jobs, poll_s=settings.poll_s) as pool:
        yield pool


@contextmanager
def _open_ray(settings: BackendSettings) -> Iterator[Backend]:
    with RayPool(num_jobs=settings.num_jobs, address=settings.address, poll_s=settings.poll_s) as pool:
        yield pool


#: backend name -> how to open it
BACKENDS: Mapping[str, Callable[[BackendSettings], AbstractContextManager[Backend]]] = {
    "local": _open_local,
    "ray": _open_ray,
}


def open_backend(settings: BackendSettings | None = None) -> AbstractContextManager[Backend]:
    """The backend ``settings`` names, as a context manager (default: local, in this process)."""
    settings = settings or BackendSettings()
    return BACKENDS[settings.name](settings)
