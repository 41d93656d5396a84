"""The backends the tests run on, and the Ray marker (helpers, no tests).

``BACKEND_PARAMS`` parametrises a fixture over ``local`` in this process,
``local`` with two processes and ``ray`` with two jobs; the Ray case is
skipped, with the reason, where Ray is not installed, and joins the one
local Ray of the session (``ray_session`` in tests/conftest.py: Ray takes
seconds to start, so the session starts it once).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from runtime.parallel import Backend, BackendSettings, open_backend

RAY_MISSING = importlib.util.find_spec("ray") is None
needs_ray = pytest.mark.skipif(RAY_MISSING, reason="Ray is not installed (pip install -e '.[ray]')")

SETTINGS = {
    "local-1": BackendSettings(),
    "local-2": BackendSettings(num_jobs=2, poll_s=0.05),
    "ray-2": BackendSettings(name="ray", num_jobs=2, poll_s=0.05),
}
BACKEND_PARAMS = ["local-1", "local-2", pytest.param("ray-2", marks=needs_ray)]
PARALLEL_PARAMS = BACKEND_PARAMS[1:]


def open_for(request: pytest.FixtureRequest, name: str) -> Iterator[Backend]:
    """Open backend ``name`` for a fixture (the Ray one in the session's Ray)."""
    if SETTINGS[name].name == "ray":
        request.getfixturevalue("ray_session")
    with open_backend(SETTINGS[name]) as backend:
        yield backend
