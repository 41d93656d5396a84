"""Where embarrassingly parallel work runs: this process, a local pool, or Ray.

:func:`~easerve_core.parallel.backend.open_backend` turns
:class:`~easerve_core.parallel.backend.BackendSettings` (``local`` with N
jobs, or ``ray`` at an address) into a :class:`~easerve_core.parallel.base.Backend`
whose ``map`` returns the results in the tasks' order, whichever backend ran
them. Pool workers die with their parent (:mod:`~easerve_core.parallel.lifeline`).
Background, what travels to a worker and a Ray cluster set-up: docs/scaling.md.
"""

from easerve_core.parallel.backend import BACKENDS, BackendSettings, open_backend
from easerve_core.parallel.base import IN_PROCESS, Backend, BackendError, InProcess, run_tasks
from easerve_core.parallel.local_pool import LocalPool

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
