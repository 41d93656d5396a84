"""Backends for the parallel tests: each built once per module (a local Ray takes seconds to start).

``backend`` runs a test on ``local`` in this process, ``local`` with two
processes, and ``ray`` with two jobs on a local Ray (skipped, with the
reason, where Ray is not installed: ``pip install -e '.[ray]'``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from easerve_core.parallel import Backend, BackendSettings, open_backend

RAY_MISSING = importlib.util.find_spec("ray") is None
needs_ray = pytest.mark.skipif(RAY_MISSING, reason="Ray is not installed (pip install -e '.[ray]')")

SETTINGS = {
    "local-1": BackendSettings(),
    "local-2": BackendSettings(num_jobs=2, poll_s=0.05),
    "ray-2": BackendSettings(name="ray", num_jobs=2, poll_s=0.05),
}


@pytest.fixture(scope="module", params=[
    "local-1", "local-2", pytest.param("ray-2", marks=needs_ray)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    with open_backend(SETTINGS[request.param]) as b:
        yield b
