"""HAS stage 1: enumeration respects GPUs and memory; the screen drops overloaded allocations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from easerve_core.cluster import Cluster
from easerve_core.deployment import Deployment
from easerve_core.has import (
    SearchSpace,
    enumerate_allocations,
    screen,
    typical_shape,
)
from easerve_core.has.screen import best_decode_rps
from easerve_core.workload import mix
from tests.has.toy import ToyProfile, ToyStage


@settings(max_examples=25, deadline=None)
@given(num_gpus=st.integers(min_value=4, max_value=12), idle=st.booleans())
def test_allocations_respect_gpu_count(num_gpus: int, idle: bool) -> None:
    cluster = Cluster(gpu="toy", num_gpus=num_gpus)
    allocs = enumerate_allocations(ToyProfile(), cluster, allow_idle_gpus=idle)
    assert allocs, "the toy LM fits at TP 2"
    for a in allocs:
        assert a.num_gpus == num_gpus or (idle and a.num_gpus < num_gpus)
    assert len({a.label for a in allocs}) == len(allocs)


def test_allocations_respect_memory() -> None:
    allocs = enumerate_allocations(ToyProfile(), Cluster(gpu="toy", num_gpus=8))
    for a in allocs:
        assert a.prefill.tp >= 2 and a.decode.tp >= 2  # the LM needs TP 2
        assert a.local_prefill_fits == (a.encode.tp == 2)
        if a.prefill.num_workers == 0:
            assert a.local_prefill_fits and a.s_bounds == (0.0, 0.0)
        if not a.local_prefill_fits:
            assert a.s_bounds == (1.0, 1.0)


def test_profile_without_memory_model_admits_everything() -> None:
    allocs = enumerate_allocations(ToyStage(1), Cluster(gpu="toy", num_gpus=4))
    assert any(a.prefill.tp == 1 and a.decode.tp == 1 for a in allocs)
    assert all(a.local_prefill_fits for a in allocs)


def test_lm_that_never_fits_is_an_error() -> None:
    with pytest.raises(ValueError, match="fits at no TP"):
        enumerate_allocations(ToyProfile(lm_min_tp=16), Cluster(gpu="toy", num_gpus=8))


@settings(max_examples=40, deadline=None)
@given(s=st.floats(min_value=0.0, max_value=1.0), batch=st.integers(min_value=1, max_value=32))
def test_every_point_builds_a_valid_deployment(s: float, batch: int) -> None:
    allocs = enumerate_allocations(ToyProfile(), Cluster(gpu="toy", num_gpus=8))
    space = SearchSpace(allocations=tuple(allocs))
    for a in allocs:
        dep = space.deployment(a.label, batch, s)
        assert isinstance(dep, Deployment) and dep.num_gpus == 8
        lo, hi = a.s_bounds
        assert lo <= dep.remote_fraction <= hi


def test_grid_points_are_distinct_and_clamped() -> None:
    allocs = enumerate_allocations(ToyProfile(), Cluster(gpu="toy", num_gpus=8))
    space = SearchSpace(allocations=tuple(allocs))
    points = space.grid()
    assert len(set(points)) == len(points)
    free = sum(a.s_bounds == (0.0, 1.0) for a in allocs)
    assert len(points) == 6 * (5 * free + (len(allocs) - free))


def test_typical_request_is_the_mix_mean() -> None:
    req = typical_shape(mix("llava-image"))
    assert req.prompt_tokens == 320 and req.output_tokens == 192
    assert req.mm_tokens_per_item == (round(0.4 * 2928 + 0.2 * 2340 + 0.3 * 1948 + 0.1 * 2328),)


def test_screen_drops_overloaded_allocations() -> None:
    cluster = Cluster(gpu="toy", num_gpus=8)
    low = screen(ToyProfile(), cluster, mix("llava-image"), rate_hz=2.0)
    high = screen(ToyProfile(), cluster, mix("llava-image"), rate_hz=13.0)
    assert len(low.survivors) == len(low.candidates)
    assert 0 < len(high.survivors) < len(high.candidates)
    for c in high.candidates:
        assert (c in high.survivors) == (c.capacity.min_rps >= 13.0)


def test_empty_screen_names_the_bottleneck() -> None:
    cluster = Cluster(gpu="toy", num_gpus=8)
    with pytest.raises(ValueError, match=r"limited by its (prefill|decode) stage at [\d.]+ req/s"):
        screen(ToyProfile(), cluster, mix("llava-image"), rate_hz=500.0)


def test_tpot_limit_caps_decode_capacity() -> None:
    req = typical_shape(mix("llava-image"))
    free = best_decode_rps(ToyStage(2), req, max_seqs=256, kv_tokens=None, tpot_limit_s=None)
    capped = best_decode_rps(ToyStage(2), req, max_seqs=256, kv_tokens=None, tpot_limit_s=0.012)
    assert 0 < capped < free
