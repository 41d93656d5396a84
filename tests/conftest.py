"""Fixtures every test folder may use."""

from __future__ import annotations

import multiprocessing

import pytest


@pytest.fixture
def no_orphans():
    """After the test: no multiprocessing child of this process is left running."""
    yield
    leftover = [p for p in multiprocessing.active_children() if p.is_alive()]
    assert not leftover, f"child processes left behind: {leftover}"
