"""Fixtures every test folder may use: a no-orphans check, and one local Ray for the Ray tests."""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Iterator

import pytest


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
