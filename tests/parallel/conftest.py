"""``backend``: each parallel test on every backend of tests/backends.py, one per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runtime.parallel import Backend
from tests.backends import BACKEND_PARAMS, open_for


@pytest.fixture(scope="module", params=BACKEND_PARAMS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    yield from open_for(request, request.param)
