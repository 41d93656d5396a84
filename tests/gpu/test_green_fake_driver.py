"""GreenContextPool.build against a fake cuda.bindings driver: the call sequence and bookkeeping."""

from __future__ import annotations

from typing import Any

import pytest

from live.gpu.green import DriverError, GreenContextPool, GreenOptions, device_granularity
from tests.gpu.fake_driver import FakeDriver, _Sm


def _build(drv: FakeDriver, **opts: Any) -> GreenContextPool:
    return GreenContextPool.build(GreenOptions(**opts), driver=drv, wrap_stream=lambda h, d: ("ext", h, d),
                                  plain_stream=lambda d: ("plain", d), capability_major=9)


def test_one_split_gives_disjoint_complementary_pairs() -> None:
    drv = FakeDriver()
    pool = _build(drv)
    lanes = pool.lanes
    assert pool.report["strategy"] == "regroup-one-split"
    assert pool.report["groups"] == 16 and pool.report["remainder_sms"] == 4
    assert [(p.encode.sms, p.prefill.sms) for p in lanes.pairs] == [(24, 108), (48, 84), (64, 68),
                                                                     (88, 44), (104, 28)]
    by_handle = {1000 + i: set(ids) for i, ids in enumerate(drv.contexts)}
    for pair in lanes.pairs:
        enc, pre = by_handle[pair.encode.stream[1]], by_handle[pair.prefill.stream[1]]
        assert not enc & pre and len(enc | pre) == 132
    assert lanes.full.encode.stream == ("plain", 0) and lanes.full.encode.sms == 132
    assert lanes.backend == "green-context" and lanes.granularity == 8


def test_refused_remainder_is_recorded_and_prefill_runs_without_it() -> None:
    pool = _build(FakeDriver(refuse_remainder=True))
    assert [p.prefill.sms for p in pool.lanes.pairs] == [104, 80, 64, 40, 24]
    assert len(pool.report["remainder_refused"]) == 5


def test_falls_back_to_one_split_per_level() -> None:
    class NoRegroup(FakeDriver):
        def cuDevSmResourceSplitByCount(self, n, full, flags, min_count):
            if n > 1:
                return self.CUresult.CUDA_ERROR_INVALID_VALUE, [], 0, None
            return super().cuDevSmResourceSplitByCount(n, full, flags, min_count)

    pool = _build(NoRegroup())
    assert pool.report["strategy"] == "split-per-level"
    assert "regroup-one-split" in pool.report["strategy_errors"]
    first = pool.lanes.pairs[0]
    assert (first.encode.sms, first.prefill.sms) == (24, 108)


def test_every_strategy_failing_raises_naming_the_call() -> None:
    with pytest.raises(DriverError, match="cuGreenCtxCreate"):
        _build(FakeDriver(fail_calls={"cuGreenCtxCreate"}))


def test_close_destroys_streams_then_contexts_once() -> None:
    drv = FakeDriver()
    pool = _build(drv)
    pool.close()
    pool.close()
    assert len(drv.destroyed) == 2 * len(drv.contexts)
    assert drv.destroyed[:2] == [f"stream{1000 + len(drv.contexts) - 1}", f"ctx{len(drv.contexts) - 1}"]


def test_forced_granularity_and_injected_driver_needs() -> None:
    pool = _build(FakeDriver(), granularity=16)
    assert pool.report["granularity"] == 16 and all(p.encode.sms % 16 == 0 for p in pool.lanes.pairs)
    with pytest.raises(ValueError, match="wrap_stream"):
        GreenContextPool.build(driver=FakeDriver())
    with pytest.raises(ValueError, match="encode_fracs"):
        GreenOptions(encode_fracs=(0.5, 1.0))


def test_device_granularity_prefers_the_driver_report() -> None:
    assert device_granularity(_Sm([], minSmPartitionSize=8, smCoscheduledAlignment=16), 9) == 16
    assert device_granularity(object(), 9) == 8
    assert device_granularity(object(), 8) == 4
