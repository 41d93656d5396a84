"""Encode batchers: unit tests with explicit ``now``, a shared contract, properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from easerve_core.batcher import AdaptiveBatcher, DispatchReason, FixedBatcher


def drive(batcher, arrivals):
    """Offer items at ``arrivals`` and poll at every deadline, as a driver would.

    Returns the batches with, per item, its arrival time.
    """
    batches = []
    for i, t in enumerate(arrivals):
        while (d := batcher.next_deadline()) is not None and d <= t:
            out = batcher.poll(d)
            assert out is not None, "poll at next_deadline() must dispatch"
            batches.append(out)
        out = batcher.offer((i, t), t)
        if out is not None:
            batches.append(out)
    while (d := batcher.next_deadline()) is not None:
        out = batcher.poll(d)
        assert out is not None
        batches.append(out)
    return batches


# ---- AdaptiveBatcher semantics -------------------------------------------------------------

def test_size_dispatch_at_max_batch():
    b = AdaptiveBatcher(3, rate_hz=1.0)
    assert b.offer("a", 0.0) is None
    assert b.offer("b", 0.1) is None
    batch = b.offer("c", 0.2)
    assert batch.items == ("a", "b", "c")
    assert batch.reason is DispatchReason.SIZE
    assert batch.dispatched_s == 0.2
    assert len(b) == 0 and b.next_deadline() is None


def test_gap_threshold_is_gap_factor_over_rate():
    b = AdaptiveBatcher(8, gap_factor=0.5, rate_hz=10.0, max_wait_s=1.0)
    b.offer("a", 1.0)
    assert b.next_deadline() == pytest.approx(1.05)
    assert b.poll(1.04) is None
    batch = b.poll(1.05)
    assert batch.reason is DispatchReason.GAP and batch.items == ("a",)


def test_each_arrival_resets_the_gap_timer():
    b = AdaptiveBatcher(8, rate_hz=10.0)  # threshold 0.1 s
    b.offer("a", 0.0)
    b.offer("b", 0.08)
    assert b.poll(0.1) is None
    assert b.next_deadline() == pytest.approx(0.18)


def test_age_caps_the_oldest_wait():
    b = AdaptiveBatcher(100, rate_hz=100.0, gap_factor=50.0, max_wait_s=1.0)  # gap 0.5 s
    t = 0.0
    for i in range(4):  # arrivals at 0, 0.3, 0.6, 0.9
        b.offer(i, t)
        t += 0.3
    # gap never expires (arrivals every 0.3 s < 0.5 s) but the oldest hits 1 s
    assert b.next_deadline() == 1.0
    batch = b.poll(1.0)
    assert batch.reason is DispatchReason.AGE and batch.items == (0, 1, 2, 3)


def test_age_wins_a_tie_with_gap():
    b = AdaptiveBatcher(8, rate_hz=1.0, max_wait_s=1.0)  # gap threshold 1 s
    b.offer("a", 2.0)
    assert b.poll(3.0).reason is DispatchReason.AGE


def test_no_rate_estimate_means_size_and_age_only():
    b = AdaptiveBatcher(8, max_wait_s=0.7)
    b.offer("a", 0.0)
    assert b.gap_threshold_s() is None
    assert b.next_deadline() == 0.7


def test_online_rate_is_the_mean_of_recent_gaps():
    b = AdaptiveBatcher(100, rate_window=4, max_wait_s=100.0)
    for t in (0.0, 1.0, 2.0, 3.0, 4.0, 4.5, 5.0, 5.5, 6.0):
        b.offer(t, t)
    # last four gaps are 0.5 s -> 2 req/s
    assert b.estimated_rate_hz() == pytest.approx(2.0)
    assert b.gap_threshold_s() == pytest.approx(0.5)


def test_time_going_backwards_is_refused():
    b = AdaptiveBatcher(4)
    b.offer("a", 1.0)
    with pytest.raises(ValueError, match="backwards"):
        b.offer("b", 0.5)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_batch": 0}, "max_batch"),
        ({"max_batch": 2.5}, "max_batch"),
        ({"max_batch": 4, "rate_hz": -1.0}, "rate_hz"),
        ({"max_batch": 4, "rate_hz": math.nan}, "rate_hz"),
        ({"max_batch": 4, "max_wait_s": -0.1}, "max_wait_s"),
        ({"max_batch": 4, "gap_factor": 0.0}, "gap_factor"),
    ],
)
def test_adaptive_rejects_bad_arguments(kwargs, field):
    with pytest.raises(ValueError, match=field):
        AdaptiveBatcher(**kwargs)


def test_fixed_rejects_bad_arguments():
    with pytest.raises(ValueError, match="max_batch"):
        FixedBatcher(0, timeout_s=0.1)
    with pytest.raises(ValueError, match="timeout_s"):
        FixedBatcher(4, timeout_s=-1)


def test_fixed_batch_one_is_request_at_a_time():
    b = FixedBatcher(1, timeout_s=0.5)
    batch = b.offer("a", 3.0)
    assert batch.items == ("a",) and batch.reason is DispatchReason.SIZE


def test_fixed_timeout():
    b = FixedBatcher(8, timeout_s=0.5)
    b.offer("a", 1.0)
    b.offer("b", 1.4)
    assert b.next_deadline() == 1.5
    assert b.poll(1.5).reason is DispatchReason.TIMEOUT


# ---- shared contract: every batcher ------------------------------------------------------

FACTORIES = {
    "adaptive-given-rate": lambda B, w: AdaptiveBatcher(B, rate_hz=2.0, max_wait_s=w),
    "adaptive-online": lambda B, w: AdaptiveBatcher(B, max_wait_s=w),
    "adaptive-slow-gap": lambda B, w: AdaptiveBatcher(B, rate_hz=0.01, max_wait_s=w),
    "fixed": lambda B, w: FixedBatcher(B, timeout_s=w),
}

arrival_lists = st.lists(st.floats(0, 5, allow_nan=False), min_size=0, max_size=60).map(
    lambda gaps: [sum(gaps[: i + 1]) for i in range(len(gaps))]
)


@pytest.mark.parametrize("name", sorted(FACTORIES))
@settings(max_examples=60, deadline=None)
@given(arrivals=arrival_lists, B=st.integers(1, 12), max_wait=st.floats(0, 3))
def test_batcher_contract(name, arrivals, B, max_wait):
    batcher = FACTORIES[name](B, max_wait)
    batches = drive(batcher, arrivals)
    items = [item for batch in batches for item in batch.items]
    # no item lost or duplicated, arrival order preserved
    assert [i for i, _ in items] == list(range(len(arrivals)))
    for batch in batches:
        assert 1 <= len(batch) <= B
        # no item waits past max_wait when polled at next_deadline()
        oldest = batch.items[0][1]
        assert batch.dispatched_s - oldest <= max_wait + 1e-12
        assert all(t <= batch.dispatched_s for _, t in batch.items)
    assert len(batcher) == 0
