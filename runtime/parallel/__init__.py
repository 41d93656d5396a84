"""Where embarrassingly parallel work runs: this process, a local pool, or Ray.

:func:`~runtime.parallel.backend.open_backend` turns
:class:`~runtime.parallel.backend.BackendSettings` (``local`` with N
jobs, or ``ray`` at an address) into a :class:`~runtime.parallel.base.Backend`
whose ``map`` returns the results in the tasks' order, whichever backend ran
them. Pool workers die with their parent (:mod:`~runtime.parallel.lifeline`).
Background, what travels to a worker and a Ray cluster set-up: docs/scaling.md.
"""

from runtime.parallel.backend import BACKENDS, BackendSettings, open_backend
from runtime.parallel.base import IN_PROCESS, Backend, BackendError, InProcess, run_tasks
from runtime.parallel.local_pool import LocalPool

__all__ = [
    "BACKENDS",
    "IN_PROCESS",
    "Backend",
    "BackendError",
    "BackendSettings",
    "InProcess",
    "LocalPool",
    "open_backend",
    "run_tasks",
]
