"""The analytic roofline profile: the issue's sanity bars and the SM-share model."""

from __future__ import annotations

import itertools

import pytest

from calibration import analytic_profile, cluster_for, sm_share_table, stage_memo, work
from calibration.memory import max_decode_batch
from easerve_core.profile import ParallelProfile, StageProfile

LLAVA = "llava-v1.6-34b"
ADA = "rtx6000ada"


@pytest.fixture(scope="module")
def llava_ada():
    return analytic_profile(LLAVA, ADA)


def test_implements_both_protocols(llava_ada):
    assert isinstance(llava_ada, ParallelProfile)
    assert isinstance(llava_ada.for_tp(2), StageProfile)


@pytest.mark.parametrize("tp", [1, 2])
def test_decode_batch1_is_bounded_by_weights_over_bandwidth(llava_ada, tp):
    stage = llava_ada.for_tp(tp)
    bound = stage.weight_bound_decode_s()
    assert bound == pytest.approx(0.0716 / tp, rel=0.02)  # 68.8 GB / 960 GB/s, per GPU
    assert bound <= stage.decode_step_s(1, 512) <= 1.5 * bound


def test_prefill_2048_is_compute_bound_within_2x_of_flops_over_peak(llava_ada):
    stage = llava_ada.for_tp(1)
    lm, gpu = llava_ada.model.lm, llava_ada.gpu
    flops = 2 * lm.params * 2048
    latency = stage.prefill_s([2048])
    assert flops / gpu.dense_bf16_flops <= latency <= 2 * flops / gpu.dense_bf16_flops
    assert latency > lm.weight_bytes / gpu.mem_bandwidth_bytes_per_s  # compute-bound


@pytest.mark.parametrize("model, item", [(LLAVA, 2928), ("ultravox-v0.6-gemma3-27b", 63)])
def test_encode_latency_per_item_falls_as_the_batch_grows(model, item):
    stage = analytic_profile(model, ADA).for_tp(1)
    per_item = [stage.encode_s([item] * b) / b for b in (1, 2, 4, 8, 16)]
    assert all(a > b for a, b in itertools.pairwise(per_item))


def test_sm_share_one_is_exclusive_and_less_is_never_faster(llava_ada):
    stage = llava_ada.for_tp(1)
    for batch in (1, 8):
        items = [2928] * batch
        assert stage.encode_s(items, 1.0) == stage.encode_s(items)
        times = [stage.encode_s(items, s) for s in (0.2, 0.4, 0.6, 0.8, 1.0)]
        assert times == sorted(times, reverse=True)


def test_small_batches_lose_little_big_ones_slow_as_one_over_share():
    stage = analytic_profile("ultravox-v0.6-gemma3-27b", ADA).for_tp(1)
    small = stage.encode_s([63], 0.6) / stage.encode_s([63])
    assert small < 1.05
    big = stage.encode_s([63] * 32, 0.5) / stage.encode_s([63] * 32)
    assert big == pytest.approx(1 / 0.5, rel=0.1)
    assert stage.prefill_s([4096], 0.5) / stage.prefill_s([4096]) == pytest.approx(2.0, rel=0.1)


def test_sm_share_table_gives_small_shares_to_small_batches():
    for gpu in (ADA, "h200"):
        table = sm_share_table(analytic_profile("ultravox-v0.6-gemma3-27b", gpu), items=[63])
        shares = [table.share_for(b) for b in (1, 2, 4, 8, 16)]
        assert shares == sorted(shares) and shares[0] < 1.0 and shares[-1] == 1.0
    video = sm_share_table(analytic_profile("qwen2.5-vl-32b", ADA), items=[7200])
    assert video.share_for(1) == 1.0  # the video encoder fills the GPU (paper: > 90% of SMs)


def test_tensor_parallelism_speeds_prefill_and_adds_allreduce(llava_ada):
    p1, p2 = llava_ada.for_tp(1).prefill_s([2048]), llava_ada.for_tp(2).prefill_s([2048])
    assert p1 / 2 < p2 < p1


def test_llava_bf16_does_not_fit_one_48gb_gpu_but_fits_two(llava_ada):
    assert not llava_ada.lm_fits(1)
    assert llava_ada.lm_fits(2)
    assert llava_ada.kv_capacity_tokens(1) == 0
    assert llava_ada.kv_capacity_tokens(1, with_encoder=True) == 0
    kv2 = llava_ada.kv_capacity_tokens(2)
    assert 40_000 < kv2 < 120_000
    assert llava_ada.kv_capacity_tokens(2, with_encoder=True) < kv2
    assert llava_ada.kv_capacity_tokens(4) > 2 * kv2


def test_max_decode_batch_fits_the_kv_cache():
    assert max_decode_batch(76_570, 3184, max_num_seqs=256) == 24
    assert max_decode_batch(10**9, 100, max_num_seqs=256) == 256
    with pytest.raises(ValueError, match="tokens_per_seq"):
        max_decode_batch(100, 0, max_num_seqs=4)


def test_transfer_sizes(llava_ada):
    stage = llava_ada.for_tp(2)
    assert stage.embed_bytes(2928) == 2928 * 7168 * 2
    assert stage.kv_bytes(1000) == 1000 * 240 * 1024
    assert stage.transfer_s(25_000_000_000) == pytest.approx(1.0, rel=1e-3)


def test_bad_arguments_are_refused(llava_ada):
    stage = llava_ada.for_tp(2)
    with pytest.raises(ValueError, match="mm_tokens_per_item"):
        stage.encode_s([])
    with pytest.raises(ValueError, match="seq_lens"):
        stage.prefill_s([0])
    with pytest.raises(ValueError, match="batch_size"):
        stage.decode_step_s(0, 10)
    with pytest.raises(ValueError, match="sm_share"):
        stage.encode_s([10], 1.5)
    with pytest.raises(ValueError, match="tp"):
        llava_ada.for_tp(0)


def test_cluster_takes_the_gpu_link():
    assert cluster_for(ADA).link_bytes_per_s == 25e9
    nv = cluster_for("a100-sxm4-80gb", 4)
    assert nv.num_gpus == 4 and nv.link_bytes_per_s > 100e9
    with pytest.raises(ValueError, match="unknown GPU"):
        cluster_for("tpu")


def test_decode_step_memo_returns_what_a_fresh_profile_computes():
    """The per-profile memo of decode steps is invisible: same value, cold or warm, and bounded."""
    from calibration import analytic_profile

    warm = analytic_profile("llava-v1.6-34b", "rtx6000ada").for_tp(2)
    points = [(b, c) for b in (1, 3, 24) for c in (0, 5_000, 70_001)]
    first = [warm.decode_step_s(b, c) for b, c in points]
    again = [warm.decode_step_s(b, c) for b, c in points]
    cold = [analytic_profile("llava-v1.6-34b", "rtx6000ada").for_tp(2).decode_step_s(b, c) for b, c in points]
    assert first == again == cold
    assert len(first) == len(set(first))  # distinct points, distinct steps: no key collision
    saved = stage_memo.MEMO_MAX
    try:
        stage_memo.MEMO_MAX = 4
        for c in range(10):
            warm.decode_step_s(2, c)
        assert sum(len(by_context) for by_context in warm._decode_memo.values()) <= 4
    finally:
        stage_memo.MEMO_MAX = saved


def test_encode_and_prefill_memos_return_what_a_fresh_profile_computes():
    warm = analytic_profile("llava-v1.6-34b", "rtx6000ada").for_tp(2)
    calls = [(warm.encode_s, [2340, 576], 0.4), (warm.encode_s, [2340], 1.0),
             (warm.prefill_s, [3000, 2264], 0.6), (warm.prefill_s, [3000], 1.0)]
    first = [f(args, share) for f, args, share in calls]
    again = [f(args, share) for f, args, share in calls]
    cold_profile = analytic_profile("llava-v1.6-34b", "rtx6000ada").for_tp(2)
    cold = [getattr(cold_profile, f.__name__)(args, share) for f, args, share in calls]
    assert first == again == cold
    with pytest.raises(ValueError, match="sm_share"):
        warm.encode_s([2340], True)  # a bool is refused even where 1.0 is remembered


def test_decode_step_from_its_shape_is_the_roofline_of_decode_work():
    """The per-batch-size kernel times give the same float as timing decode_work whole."""
    for model in ("llava-v1.6-34b", "ultravox-v0.6-gemma3-27b"):
        for tp in (1, 2):
            p = analytic_profile(model, "rtx6000ada").for_tp(tp)
            for b, c in [(1, 0), (1, 3000), (7, 7 * 4000 + 3), (64, 500_000), (255, 1)]:
                whole = p._stage_s(work.decode_work(p.parent.model.lm, b, c, tp=tp), 1.0, launch=False,
                                   overhead_s=p.parent.efficiency.decode_step_overhead_s)
                assert p.decode_step_s(b, c) == whole


@pytest.mark.parametrize("args", [(True, 10), (0, 10), (2, -1), (2.0, 10), (2, 10.0), (2, False)])
def test_decode_step_refuses_what_is_not_a_count(args):
    with pytest.raises(ValueError, match=r"batch_size|context_tokens"):
        analytic_profile("llava-v1.6-34b", "rtx6000ada").for_tp(1).decode_step_s(*args)
