"""SM sharing between Encode and local Prefill, and the event economy of Decode."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from easerve_core import Cluster, Deployment, SMShareTable, SMSharing, StageGroup
from easerve_core.plan import assemble
from easerve_core.workload import WorkloadSpec, generate
from sim import simulate
from sim.sharing import SharedGPU
from sim.stepsum import StepClock
from tests.sim.conftest import AffineProfile

TABLE = SMShareTable({1: 0.25, 8: 0.5})


def _gpu(mode: SMSharing) -> SharedGPU:
    return SharedGPU(mode, table=TABLE, static_encode_share=0.5, time_slice_overhead_frac=0.1)


def test_dynamic_gives_prefill_what_encode_leaves() -> None:
    gpu = _gpu(SMSharing.DYNAMIC)
    gpu.start_prefill(0.0, lambda share: 1.0 / share)  # 1 s on the whole GPU
    gpu.start_encode(0.5, 1, lambda share: 0.1)  # batch of 1 keeps 25% of the SMs
    assert gpu.encode.end_s == pytest.approx(0.6)
    assert gpu.prefill.share == 0.75 and gpu.busy_frac() == 1.0
    assert gpu.finish_encode(0.6) == pytest.approx(0.25)
    # 0.5 done alone, 0.1 s at 0.75 share = 0.075 more; 0.425 left at full speed.
    assert gpu.prefill.end_s == pytest.approx(0.6 + 0.425)


def test_static_split_holds_even_when_one_side_idles() -> None:
    gpu = _gpu(SMSharing.STATIC)
    gpu.start_prefill(0.0, lambda share: 1.0 / share)
    assert gpu.prefill.end_s == pytest.approx(2.0)  # half the GPU, encode idle or not


def test_time_slice_slows_both_while_both_run() -> None:
    gpu = _gpu(SMSharing.TIME_SLICE)
    gpu.start_prefill(0.0, lambda share: 1.0)
    gpu.start_encode(0.5, 1, lambda share: 0.09)
    assert gpu.encode.end_s == pytest.approx(0.5 + 0.09 / 0.45)
    gpu.finish_encode(gpu.encode.end_s)
    assert gpu.prefill.end_s == pytest.approx(0.7 + 0.5 - 0.2 * 0.45)


def test_sharing_ablation_orders_like_the_paper(cluster: Cluster) -> None:
    """Dynamic beats static 50/50 and time-slicing on P99 TTFT with a small encoder.

    One encode worker at 10 req/s, 70% of prefills local and long enough to
    overlap the next encode batch; the encoder fills 30% of the SMs.
    """
    profile = AffineProfile(encode_base_s=0.03, encode_per_token_s=2e-5, encode_fill_frac=0.3,
                            prefill_base_s=0.01, prefill_per_token_s=2e-4, decode_per_ctx_s=1e-8)
    spec = WorkloadSpec.from_dict({"mix": "ultravox-audio", "rate_hz": 10.0, "num_requests": 800})
    reqs = generate(spec, np.random.default_rng(5))
    base = Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1, tp=2),
                      decode=StageGroup(num_workers=2, tp=2), remote_fraction=0.3, max_encode_batch=8)
    ttft = {}
    for mode in ("dynamic", "static", "time-slice"):
        s = simulate(assemble(base.with_(sm_sharing=mode), reqs, cluster=cluster, profile=profile),
                     profile).summary()
        ttft[mode] = s.ttft_p99_s
    assert ttft["dynamic"] < ttft["static"]
    assert ttft["dynamic"] < ttft["time-slice"]


def test_step_clock_closed_form_matches_the_loop() -> None:
    profile = AffineProfile(decode_base_s=0.01, decode_per_ctx_s=3e-7)
    clock = StepClock(profile)
    for n, ctx, k in [(1, 100, 1), (3, 5000, 2), (16, 40_000, 700)]:
        loop = sum(profile.decode_step_s(n, ctx + j * n) for j in range(k))
        assert clock.span_s(n, ctx, k) == pytest.approx(loop, rel=1e-12)
        for elapsed in (0.0, loop / 3, loop):
            j = clock.steps_to_reach(n, ctx, k, elapsed)
            assert clock.span_s(n, ctx, j) >= elapsed - 1e-12
            assert j == 1 or clock.span_s(n, ctx, j - 1) < elapsed


def test_step_clock_falls_back_to_the_loop_for_curved_profiles() -> None:
    class Curved(AffineProfile):
        def decode_step_s(self, batch_size: int, context_tokens: int) -> float:
            return 0.01 + 1e-12 * context_tokens**2

    profile = Curved()
    clock = StepClock(profile)
    loop = sum(profile.decode_step_s(4, 1000 + 4 * j) for j in range(300))
    assert clock.span_s(4, 1000, 300) == pytest.approx(loop, rel=1e-12)


@pytest.mark.parametrize("architecture", ["disaggregated", "aggregated"])
def test_events_per_request_do_not_grow_with_output_length(architecture: str,
                                                           cluster: Cluster) -> None:
    profile = AffineProfile(encode_per_token_s=2e-6, prefill_per_token_s=3e-5,
                            decode_base_s=0.02, decode_per_ctx_s=1e-8)
    if architecture == "aggregated":
        dep = Deployment(encode=StageGroup(num_workers=0), prefill=StageGroup(num_workers=0),
                         decode=StageGroup(num_workers=4, tp=2), architecture="aggregated")
    else:
        dep = Deployment(encode=StageGroup(num_workers=2), prefill=StageGroup(num_workers=1, tp=2),
                         decode=StageGroup(num_workers=2, tp=2), remote_fraction=0.5)
    spec = WorkloadSpec.from_dict({"mix": "llava-image", "rate_hz": 4.0, "num_requests": 600})
    per_req = []
    for out in (128, 1024):
        s = replace(spec, mix=replace(spec.mix, output_tokens=(out, out)))
        result = simulate(assemble(dep, generate(s, np.random.default_rng(0)), cluster=cluster,
                                  profile=profile), profile)
        per_req.append(result.meta["events_per_request"])
    assert per_req[1] == pytest.approx(per_req[0], rel=0.2)
