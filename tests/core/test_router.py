"""Routers: the deficit counter's bound at every prefix, and the random baseline."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from easerve_core.router import DeficitRouter, RandomRouter, Route


@settings(max_examples=200, deadline=None)
@given(s=st.floats(0, 1, allow_nan=False), n=st.integers(1, 2000))
def test_deficit_stays_within_one_request_at_every_prefix(s, n):
    router = DeficitRouter(s)
    remote = 0
    for i in range(1, n + 1):
        remote += router.route() is Route.REMOTE
        assert abs(remote - s * i) < 1
    assert router.num_remote == remote


def test_deficit_exact_sequence_for_half():
    router = DeficitRouter(0.5)
    assert [router.route().value for _ in range(6)] == [
        "remote", "local", "remote", "local", "remote", "local"
    ]


@pytest.mark.parametrize(("s", "expected"), [(0.0, Route.LOCAL), (1.0, Route.REMOTE)])
def test_deficit_extremes(s, expected):
    router = DeficitRouter(s)
    assert {router.route() for _ in range(100)} == {expected}


@pytest.mark.parametrize("bad", [-0.1, 1.01, math.nan, "x", None])
def test_bad_fraction_names_the_field(bad):
    with pytest.raises(ValueError, match="remote_fraction"):
        DeficitRouter(bad)
    with pytest.raises(ValueError, match="remote_fraction"):
        RandomRouter(bad, np.random.default_rng(0))


def test_random_router_is_seeded_and_drifts():
    a = RandomRouter(0.3, np.random.default_rng(7))
    b = RandomRouter(0.3, np.random.default_rng(7))
    seq_a = [a.route() for _ in range(500)]
    assert seq_a == [b.route() for _ in range(500)]
    remote = np.cumsum([r is Route.REMOTE for r in seq_a])
    worst = max(abs(remote[i] - 0.3 * (i + 1)) for i in range(500))
    assert worst >= 1  # the baseline does not keep the deficit bound
