"""Fixtures every test folder may use (a no-orphans check, one local Ray), and the serial mark.

``make test`` runs the suite in two passes: every test not marked ``serial`` on
two processes (pytest-xdist, one file per process at a time, so a module's
fixture is built once), then the ``serial`` ones alone. :data:`SERIAL` names
the tests that time real processes against the wall clock: killed and
signalled workers, process trees that must be gone within a deadline,
deadlines themselves. A second test process on the same two cores
would stretch their timings, so they keep the machine to themselves. A plain
``pytest`` runs everything in one process, as before.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Iterator
from pathlib import Path

import pytest

#: folders and files (relative to tests/) whose tests get the ``serial`` mark
SERIAL = (
    "live/test_faults.py",  # a worker killed 0.8 s in, a signal 3 s in
    "live/test_fanin.py",  # queues read within a deadline
    "live/test_host_probe_orphans.py",  # children gone within 10 s of a killed parent
    "parallel/",  # Ctrl-C, killed drivers and cancelled tasks, each with its exit deadline
    "has/test_killed_search.py",  # a search killed mid-study, its workers gone within 10 s
    "gpu/test_timing.py",  # clocks and deadlines
)
_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.resolve().relative_to(_TESTS).as_posix()
        if where.startswith(SERIAL):
            item.add_marker(pytest.mark.serial)


@pytest.fixture
def no_orphans():
    """After the test: no multiprocessing child of this process is left running."""
    yield
    leftover = [p for p in multiprocessing.active_children() if p.is_alive()]
    assert not leftover, f"child processes left behind: {leftover}"


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """A local Ray of two CPUs, started on first use and stopped at the session's end.

    Every ``ray`` backend a test opens joins it instead of starting its own
    (:class:`runtime.parallel.ray_pool.RayPool` only disconnects from a
    Ray it did not start). Skipped where Ray is not installed.
    """
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield
    finally:
        ray.shutdown()
