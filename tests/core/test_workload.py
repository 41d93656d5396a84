"""Workloads: seeded arrivals with the right statistics, mixes, traces, bad input."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from easerve_core.request import Modality, Request
from easerve_core.workload import (
    MIXES,
    GammaArrivals,
    PoissonArrivals,
    RateSchedule,
    ReplayedGaps,
    WorkloadSpec,
    generate,
)
from runtime.traces import load_trace, read_trace, write_trace


def gaps(times):
    return np.diff(np.concatenate(([0.0], times)))


def test_poisson_rate_and_cv():
    t = PoissonArrivals(rate_hz=4.0).sample(50_000, np.random.default_rng(0))
    g = gaps(t)
    assert g.mean() == pytest.approx(0.25, rel=0.02)
    assert g.std() / g.mean() == pytest.approx(1.0, rel=0.03)
    assert np.all(np.diff(t) >= 0)


@pytest.mark.parametrize("cv", [0.5, 1.0, 2.0, 4.0])
def test_gamma_keeps_mean_rate_and_sets_cv(cv):
    t = GammaArrivals(rate_hz=2.0, cv=cv).sample(80_000, np.random.default_rng(1))
    g = gaps(t)
    assert g.mean() == pytest.approx(0.5, rel=0.04)
    assert g.std() / g.mean() == pytest.approx(cv, rel=0.06)


def test_burstiness_is_vllm_gamma_shape():
    assert GammaArrivals(rate_hz=1.0, cv=2.0).burstiness == pytest.approx(0.25)
    spec = WorkloadSpec.from_dict({"arrival": "gamma", "rate_hz": 1.0, "burstiness": 0.25})
    assert spec.arrivals.cv == pytest.approx(2.0)


def test_rate_schedule_counts_per_segment():
    sched = RateSchedule(segments=((100.0, 1.0), (100.0, 5.0), (100.0, 0.0)))
    t = sched.sample(20_000, np.random.default_rng(2))
    period = t % 300.0
    n1 = np.sum(period < 100)
    n2 = np.sum((period >= 100) & (period < 200))
    n3 = np.sum(period >= 200)
    assert n3 == 0
    assert n2 / n1 == pytest.approx(5.0, rel=0.08)
    assert sched.mean_rate_hz == pytest.approx(2.0)


def test_same_seed_same_requests_other_seed_other():
    spec = WorkloadSpec.from_dict({"mix": "llava-image", "rate_hz": 2.0, "num_requests": 50})
    a = generate(spec, np.random.default_rng(5))
    assert a == generate(spec, np.random.default_rng(5))
    assert a != generate(spec, np.random.default_rng(6))


@pytest.mark.parametrize("name", sorted(MIXES))
def test_mixes_draw_valid_requests(name):
    spec = WorkloadSpec.from_dict({"mix": name, "rate_hz": 1.0, "num_requests": 30})
    for r in generate(spec, np.random.default_rng(0)):
        assert (r.modality is Modality.TEXT) == (r.num_items == 0)
        if r.num_items:
            assert set(r.mm_tokens_per_item) <= set(MIXES[name].item_tokens)


def test_with_rate_scales_mean_rate():
    spec = WorkloadSpec.from_dict({"arrival": "schedule", "schedule": [[10, 1], [10, 3]]})
    assert spec.with_rate(4.0).mean_rate_hz == pytest.approx(4.0)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_trace_round_trip(tmp_path, suffix):
    spec = WorkloadSpec.from_dict({"mix": "qwen-video", "rate_hz": 3.0, "num_requests": 25})
    reqs = generate(spec, np.random.default_rng(0))
    path = write_trace(reqs, tmp_path / f"t{suffix}")
    assert read_trace(path) == reqs
    replay = WorkloadSpec.from_dict({"arrival": "trace", "trace": str(path)}, traces=load_trace)
    assert generate(replay, np.random.default_rng(99)) == reqs


def test_a_blank_item_cell_is_a_text_request(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,modality,prompt_tokens,output_tokens,mm_tokens_per_item\n0.5,text,10,10,  \n")
    assert read_trace(path)[0].mm_tokens_per_item == ()


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("0,abc,image,10,10,5", "arrival_s"),
        ("0,1.0,smell,10,10,5", "modality"),
        ("0,1.0,image,10,0,5", "output_tokens"),
        ("0,1.0,image,10,10,", "mm_tokens_per_item"),
        ("0,-1.0,image,10,10,5", "arrival_s"),
        ("0,1.0,image,10,10,x;y", "mm_tokens_per_item"),
        ("0,1.0,image,10,10,5;;5", "mm_tokens_per_item"),  # an empty item, not skipped
        ("0,1.0,image,10,10,5;", "mm_tokens_per_item"),
        ("0,1.0,image,10,10, ", "mm_tokens_per_item"),  # blank: no item, and an image needs one
    ],
)
def test_malformed_trace_row_names_line_and_field(tmp_path, row, field):
    path = tmp_path / "bad.csv"
    path.write_text(
        "request_id,arrival_s,modality,prompt_tokens,output_tokens,mm_tokens_per_item\n"
        "1,0.5,image,10,10,5\n" + row + "\n"
    )
    with pytest.raises(ValueError, match=field) as info:
        read_trace(path)
    assert ":3" in str(info.value)


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"rate_hz": -1.0}, "rate_hz"),
        ({"rate_hz": float("nan")}, "rate_hz"),
        ({"rate_hz": 1.0, "num_requests": 0}, "num_requests"),
        ({"rate_hz": 1.0, "mix": "smell"}, "mix"),
        ({"rate_hz": 1.0, "arrival": "weibull"}, "arrival"),
        ({"rate_hz": 1.0, "cv": 0}, "cv"),
        ({"rate_hz": 1.0, "speed": 3}, "speed"),
        ({"arrival": "schedule", "schedule": [[1, -2]]}, "rate_hz"),
        ({"arrival": "trace"}, "trace"),
        ({"rate_hz": 1.0, "item_tokens": [64], "item_encode_tokens": [64, 128]}, "item_encode_tokens"),
        ({"rate_hz": 1.0, "item_tokens": [64], "item_encode_tokens": [0]}, r"item_encode_tokens\[0\]"),
        ({"rate_hz": 1.0, "item_tokens": [64], "item_encode_tokens": "64"}, "item_encode_tokens"),
        ({"rate_hz": 1.0, "images": [[640, 480]], "item_encode_tokens": [64]}, "item_encode_tokens"),
    ],
)
def test_bad_workload_tables(table, field):
    with pytest.raises(ValueError, match=field):
        WorkloadSpec.from_dict(table, traces=load_trace)


def test_item_tokens_override():
    spec = WorkloadSpec.from_dict({"mix": "llava-image", "rate_hz": 1.0, "num_requests": 20,
                                   "item_tokens": [64, 128]})
    assert {t for r in generate(spec, np.random.default_rng(0)) for t in r.mm_tokens_per_item} <= {64, 128}
    with pytest.raises(ValueError, match="item_weights"):
        WorkloadSpec.from_dict({"rate_hz": 1.0, "item_tokens": [64], "item_weights": [1, 2]})


def test_items_pooled_after_the_projector_carry_the_encoder_s_tokens(tmp_path):
    """``item_encode_tokens`` (the tokens before a model's pooling) go with each drawn item, leave
    the seed's draws as they were, scale with the items, and survive a trace both ways."""
    table = {"mix": "llava-image", "rate_hz": 1.0, "num_requests": 40, "item_tokens": [64, 128],
             "item_weights": [1, 3], "items_per_request": [1, 3]}
    plain = generate(WorkloadSpec.from_dict(table), np.random.default_rng(0))
    spec = WorkloadSpec.from_dict({**table, "item_encode_tokens": [640, 1280]})
    pooled = generate(spec, np.random.default_rng(0))
    assert [replace(r, encode_tokens_per_item=()) for r in pooled] == plain
    for r in pooled:
        assert r.encode_tokens_per_item == tuple(10 * t for t in r.mm_tokens_per_item)
        assert r.encode_items == r.encode_tokens_per_item and r.mm_tokens == sum(r.mm_tokens_per_item)
    assert all(r.encode_items == r.mm_tokens_per_item for r in plain)
    assert spec.mix.with_item_scale(0.5).item_encode_tokens == (320, 640)
    for suffix in (".csv", ".jsonl"):
        path = write_trace(pooled, tmp_path / f"t{suffix}")
        assert "encode_tokens_per_item" in path.read_text()
        assert read_trace(path) == pooled
        assert "encode_tokens_per_item" not in write_trace(plain, tmp_path / f"p{suffix}").read_text()
    # the preset's own choices are replaced with item_tokens, and so is what their encoder took
    assert WorkloadSpec.from_dict({"rate_hz": 1.0, "item_tokens": [64]}).mix.item_encode_tokens == ()
    # and in code: new choices never keep the old ones' weights or encoder counts
    small = spec.mix.with_items((576,))
    assert (small.item_tokens, small.item_weights, small.item_encode_tokens) == ((576,), (), ())
    assert spec.mix.with_items((5, 6), (1, 2), (50, 60)).item_encode_tokens == (50, 60)
    with pytest.raises(ValueError, match="item_encode_tokens"):
        replace(spec.mix, item_tokens=(576,), item_weights=())  # what with_items spares a caller


@pytest.mark.parametrize(("fields", "what"), [
    ({"mm_tokens_per_item": (5, 6), "encode_tokens_per_item": (7,)}, "one count per item"),
    ({"mm_tokens_per_item": (5,), "encode_tokens_per_item": (0,)}, r"encode_tokens_per_item\[0\]"),
    ({"mm_tokens_per_item": (5,), "encode_tokens_per_item": (2.5,)}, r"encode_tokens_per_item\[0\]"),
    ({"mm_tokens_per_item": (5,), "encode_tokens_per_item": "7"}, "encode_tokens_per_item"),
])
def test_a_request_s_encoder_tokens_are_checked(fields, what):
    with pytest.raises(ValueError, match=what):
        Request(request_id=0, arrival_s=0.0, modality="image", prompt_tokens=1, output_tokens=1, **fields)


def test_a_malformed_encoder_token_cell_names_its_line_and_field(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("arrival_s,modality,prompt_tokens,output_tokens,mm_tokens_per_item,encode_tokens_per_item\n"
                    "0.5,image,10,10,5,50\n0.6,image,10,10,5,x\n")
    with pytest.raises(ValueError, match="encode_tokens_per_item") as info:
        read_trace(path)
    assert ":3" in str(info.value)


def test_the_longest_input_bounds_every_seed_s_stream() -> None:
    from easerve_core.workload.mixes import RequestMix
    from easerve_core.workload.replay import RecordedTrace, TokenTrace

    mix = RequestMix(modality=Modality.IMAGE, item_tokens=(576, 2928, 9000), item_weights=(1.0, 1.0, 0.0),
                     items_per_request=(1, 2), prompt_tokens=(10, 40))
    assert mix.longest_items_tokens == 2 * 2928  # a weight of 0 is never drawn
    assert mix.longest_input_tokens == 40 + 2 * 2928
    spec = WorkloadSpec(mix=mix, arrivals=PoissonArrivals(rate_hz=5.0), num_requests=400)
    assert spec.longest_input_tokens == mix.longest_input_tokens
    drawn = [r.input_tokens for seed in range(3) for r in generate(spec, np.random.default_rng(seed))]
    assert max(drawn) == spec.longest_input_tokens  # reached, never passed

    rows = TokenTrace(arrival_s=(0.0, 1.0), input_tokens=(100, 7000), output_tokens=(5, 5))
    assert rows.longest_input_tokens(mix) == 7000  # a row longer than any items
    short = TokenTrace(arrival_s=(0.0, 1.0), input_tokens=(100, 200), output_tokens=(5, 5))
    assert short.longest_input_tokens(mix) == 1 + 2 * 2928  # one prompt token beside the most items
    recorded = RecordedTrace(tuple(generate(spec, np.random.default_rng(0))))
    assert recorded.longest_input_tokens(mix) == max(r.input_tokens for r in recorded.requests)
    text = RequestMix(modality=Modality.TEXT, prompt_tokens=(1, 9))
    assert (text.longest_items_tokens, text.longest_input_tokens) == (0, 9)


def test_replayed_gaps_keep_their_order_from_a_drawn_start_and_wrap_around() -> None:
    gaps = (1.0, 1.0, 10.0, 0.0)  # mean 3: at 2 req/s every gap is scaled by 1 / 6
    process = ReplayedGaps(gaps_s=gaps, rate_hz=2.0)
    rng = np.random.default_rng(5)
    start = int(np.random.default_rng(5).integers(4))
    times = process.sample(9, rng)
    expected = np.cumsum([gaps[(start + k) % 4] / 6.0 for k in range(9)])
    assert times == pytest.approx(expected)
    assert (np.diff(times) >= 0).all()
    # the same generator state, the same times; another, another stretch of the recording
    assert process.sample(9, np.random.default_rng(5)) == pytest.approx(times)
    assert process.mean_rate_hz == 2.0
    faster = process.with_rate(4.0)
    assert faster.sample(9, np.random.default_rng(5)) == pytest.approx(times / 2)
    # over whole laps of the recording, the mean rate is the one asked for
    laps = process.sample(400, np.random.default_rng(1))
    assert 400 / laps[-1] == pytest.approx(2.0, rel=0.02)


@pytest.mark.parametrize(("gaps", "rate", "says"), [
    ((1.0,), 1.0, "at least two gaps"),
    ((1.0, -1.0), 1.0, "finite and >= 0"),
    ((1.0, float("nan")), 1.0, "finite and >= 0"),
    ((0.0, 0.0), 1.0, "not all 0"),
    ((1.0, 2.0), 0.0, "rate_hz"),
])
def test_replayed_gaps_refuse_what_cannot_be_replayed(gaps: tuple[float, ...], rate: float,
                                                      says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ReplayedGaps(gaps_s=gaps, rate_hz=rate)
