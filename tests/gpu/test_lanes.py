"""SM levels and lane lookup (pure), and the green backend under live.partition's policies."""

from __future__ import annotations

import pytest

from easerve_core.sm_share import SMShareTable
from live.gpu.green import GreenContextBackend
from live.gpu.lanes import Lane, LanePool, StreamPair, null_pool, plan_levels
from live.partition import DynamicPartitioner, StaticPartitioner, TimeSlicePartitioner


def test_plan_levels_on_an_h200_shape() -> None:
    # 132 SMs in groups of 8: 0.2, 0.35, 0.5, 0.65, 0.8 -> 24, 48, 64, 88, 104 encode SMs
    assert plan_levels(132, 8) == (3, 6, 8, 11, 13)


def test_plan_levels_keeps_a_group_for_prefill_and_drops_duplicates() -> None:
    assert plan_levels(32, 8, (0.01, 0.02, 0.99)) == (1, 3)


@pytest.mark.parametrize(("args", "field"), [
    ((0, 8), "total_sms"), ((132, 0), "granularity"), ((12, 8), "granularity"),
    ((132, 8, ()), "encode_fracs"), ((132, 8, (1.0,)), "encode_fracs"),
])
def test_plan_levels_rejects_bad_arguments(args: tuple, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        plan_levels(*args)


def test_null_pool_rows_are_complementary() -> None:
    pool = null_pool()
    rows = pool.rows()
    assert [r["encode_sms"] for r in rows] == [24, 48, 64, 88, 104, 132]
    assert all(r["encode_sms"] + r["prefill_sms"] == 132 for r in rows[:-1])
    assert pool.encode_shares[-1] == 1.0


def test_lane_for_picks_nearest_and_complementary_lanes() -> None:
    pool = null_pool()
    assert pool.lane_for("encode", 0.5).name == "g64/encode"  # 64/132 is nearest to one half
    assert pool.lane_for("prefill", 0.5).name == "g64/prefill"  # 68/132: the same level's other side
    assert pool.lane_for("encode", 1.0).name == "full/encode"
    assert pool.lane_for("prefill", 1.0).name == "full/prefill"
    for pair in pool.pairs:
        assert pool.lane_for("encode", pair.encode_share) is pair.encode
        assert pool.lane_for("prefill", 1.0 - pair.encode_share) is pair.prefill


@pytest.mark.parametrize(("role", "share", "field"), [("decode", 0.5, "role"), ("encode", 0.0, "share"),
                                                      ("prefill", 1.5, "share")])
def test_lane_for_rejects_bad_arguments(role: str, share: float, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        null_pool().lane_for(role, share)


def test_pool_and_lane_validation() -> None:
    with pytest.raises(ValueError, match="sms"):
        Lane(name="x", sms=0)
    full = null_pool().full
    with pytest.raises(ValueError, match="pairs"):
        LanePool(pairs=(), full=full, granularity=8, backend="null")
    a, b = null_pool().pairs[:2]
    with pytest.raises(ValueError, match="ascending"):
        LanePool(pairs=(b, a), full=full, granularity=8, backend="null")
    with pytest.raises(ValueError, match="total_sms"):
        StreamPair(level="x", encode=a.encode, prefill=a.prefill, total_sms=0)


def test_dynamic_policy_over_green_backend_uses_one_level_per_micro_batch() -> None:
    pool = null_pool()
    table = SMShareTable({1: pool.pairs[0].encode_share, 8: pool.pairs[3].encode_share, 32: 1.0})
    backend = GreenContextBackend(pool)
    policy = DynamicPartitioner(backend, table=table)
    seen = []
    for b in (1, 8, 32):
        with policy.encode_slot(b), policy.prefill_slot():
            seen.append((backend.last["encode"].name, backend.last["prefill"].name))
    assert seen == [("g24/encode", "g24/prefill"), ("g88/encode", "g88/prefill"),
                    ("full/encode", "full/prefill")]


def test_static_and_time_slice_policies_over_green_backend() -> None:
    backend = GreenContextBackend(null_pool())
    with StaticPartitioner(backend, encode_share=0.5).encode_slot(4):
        assert backend.last["encode"].name == "g64/encode"
    with TimeSlicePartitioner(backend).prefill_slot():
        assert backend.last["prefill"].name == "full/prefill"
