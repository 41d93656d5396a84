"""On a CUDA device only: green-context levels are built and confine a matmul (skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

from live.gpu.green import GreenContextPool  # noqa: E402


@pytest.fixture(scope="module")
def pool() -> GreenContextPool:
    built = GreenContextPool.build()
    yield built
    built.close()


def test_levels_are_built_with_actual_counts(pool: GreenContextPool) -> None:
    lanes = pool.lanes
    assert len(lanes.pairs) >= 3
    for pair in lanes.pairs:
        assert pair.encode.sms % lanes.granularity == 0
        assert pair.encode.sms + pair.prefill.sms <= lanes.total_sms


def test_a_matmul_on_few_sms_is_slower(pool: GreenContextPool) -> None:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()

    def ms(lane) -> float:
        with lane.activate():
            a @ a
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
            for _ in range(5):
                a @ a
            t1.record()
        torch.cuda.synchronize()
        return t0.elapsed_time(t1) / 5

    small = pool.lanes.pairs[0].encode
    assert ms(small) > 2.0 * ms(pool.lanes.full.encode)
