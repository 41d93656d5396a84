"""Fixtures for the HAS tests: a throw-away PostgreSQL server (tests/has/postgres.py).

``pg_server`` starts one server for the session (skipped, with the reason,
where PostgreSQL or the psycopg driver is missing) and always stops it;
``pg_url`` is a fresh, empty database on it, as a SQLAlchemy URL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.has import postgres


@pytest.fixture(scope="session")
def pg_server() -> Iterator[postgres.Server]:
    reason = postgres.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    server = postgres.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def pg_url(pg_server: postgres.Server) -> str:
    return pg_server.create_database()
