"""Session-wide fixtures: one local Ray for every test that runs on Ray."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """A local Ray of two CPUs, started on first use and stopped at the session's end.

    Every ``ray`` backend a test opens joins it instead of starting its own
    (:class:`easerve_core.parallel.ray_pool.RayPool` only disconnects from a
    Ray it did not start). Skipped where Ray is not installed.
    """
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield
    finally:
        ray.shutdown()
