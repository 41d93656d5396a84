"""The SM-share table: smallest share within tolerance, lookup for any size."""

from __future__ import annotations

import pytest

from easerve_core.sm_share import SMShareTable

LEVELS = (0.2, 0.4, 0.6, 0.8, 1.0)


def measurements():
    # batch 1 barely slows until 0.2; batch 8 needs 0.8; batch 32 needs all
    exclusive = {1: 1.0, 8: 4.0, 32: 10.0}
    knee = {1: 0.2, 8: 0.8, 32: 1.0}
    out = {}
    for b, ex in exclusive.items():
        for s in LEVELS:
            out[(b, s)] = ex if s >= knee[b] else ex * knee[b] / s
    return out


def test_smallest_share_within_tolerance():
    table = SMShareTable.from_measurements(measurements(), tolerance=0.05)
    assert table.shares == {1: 0.2, 8: 0.8, 32: 1.0}


def test_tolerance_admits_slower_shares():
    m = measurements()
    m[(8, 0.6)] = 4.0 * 1.08
    assert SMShareTable.from_measurements(m, tolerance=0.05).share_for(8) == 0.8
    assert SMShareTable.from_measurements(m, tolerance=0.10).share_for(8) == 0.6


def test_unprofiled_sizes_take_the_next_larger_and_the_largest_caps():
    table = SMShareTable.from_measurements(measurements())
    assert table.share_for(2) == 0.8
    assert table.share_for(9) == 1.0
    assert table.share_for(1000) == 1.0


def test_needs_exclusive_latency_for_each_size():
    m = measurements()
    del m[(8, 1.0)]
    with pytest.raises(ValueError, match="exclusive"):
        SMShareTable.from_measurements(m)


@pytest.mark.parametrize("bad", [{(0, 1.0): 1.0}, {(1, 1.5): 1.0}, {(1, 1.0): -1.0}, {}])
def test_bad_measurements(bad):
    with pytest.raises(ValueError):
        SMShareTable.from_measurements(bad)


def test_dict_round_trip():
    table = SMShareTable.from_measurements(measurements())
    assert SMShareTable.from_dict(table.to_dict()) == table
