"""vLLM-style engine mechanics (sim.chunked) on scripted cases, with exact expected times.

Every latency comes from an :class:`AffineProfile` with constant decode steps
(5 ms), so the expected times are sums written out below. A profile without
``mixed_step_s`` prices a step of prefill chunks and decodes as a prefill of
the chunks plus one decode step.
"""

from __future__ import annotations

import pytest

from easerve_core import Cluster, Deployment, Modality, Request, StageGroup
from easerve_core.plan import assemble
from sim import simulate
from sim.options import Scheduling, SimOptions
from tests.sim.conftest import AffineProfile, MemoryProfile

LM = AffineProfile(encode_base_s=0.010, prefill_base_s=0.020, prefill_per_token_s=1e-5,
                   decode_base_s=0.005)
CLUSTER = Cluster(gpu="test-gpu", num_gpus=1, link_bytes_per_s=1e9, link_latency_s=0.0, num_links=1)
ONE_INSTANCE = Deployment(encode=StageGroup(num_workers=0), prefill=StageGroup(num_workers=0),
                          decode=StageGroup(num_workers=1, tp=1), architecture="aggregated")


def _req(i: int, at: float, *, prompt: int, item: int, out: int) -> Request:
    return Request(request_id=i, arrival_s=at, modality=Modality.IMAGE, prompt_tokens=prompt,
                   output_tokens=out, mm_tokens_per_item=(item,))


def _run(requests: list[Request], profile: object = LM, **sched: object):
    options = SimOptions(scheduler=Scheduling(**sched))  # type: ignore[arg-type]
    plan = assemble(ONE_INSTANCE, requests, cluster=CLUSTER, profile=profile)  # type: ignore[arg-type]
    frame = simulate(plan, profile, options=options).records  # type: ignore[arg-type]
    assert (frame["status"] == "ok").all()
    return frame.set_index("request_id")


@pytest.mark.parametrize("chunked", [True, False])
def test_a_long_prefill_is_chunked_beside_the_running_decode(chunked: bool) -> None:
    """A decodes; B's 5,000-token prefill arrives at 0.5 s and joins at the next step boundary.

    A: encode 0.010 + prefill(100) 0.021, first token at 0.031, then 5 ms steps; the step
    in progress at 0.5 s ends at 0.031 + 94 x 0.005 = 0.501.
    Chunked: three steps of A's decode beside B's chunks of 2,047, 2,047 and 906 tokens (the
    budget less one decode token); the first encodes B's image, larger than the encoder
    budget, so alone. Prefill-first: one phase of encode 0.010 + prefill(5000) 0.070 while A
    waits, then B decodes its one token beside A.
    """
    a = _req(0, 0.0, prompt=10, item=90, out=201)
    b = _req(1, 0.5, prompt=100, item=4900, out=2)
    rec = _run([a, b], chunked_prefill=chunked)
    boundary = 0.031 + 94 * 0.005
    assert rec.loc[0, "first_token_s"] == pytest.approx(0.031, abs=1e-12)
    if chunked:
        steps = [0.010 + 0.02047 + 0.005, 0.02047 + 0.005, 0.00906 + 0.005]
        steps = [0.020 + s for s in steps]  # each chunk's prefill base
        b_first = boundary + sum(steps)
        # A made 94 + 3 tokens by b_first, then 103 more steps
        a_finish = b_first + 103 * 0.005
    else:
        b_first = boundary + 0.010 + 0.070
        a_finish = b_first + 106 * 0.005
    assert rec.loc[1, "first_token_s"] == pytest.approx(b_first, abs=1e-9)
    assert rec.loc[1, "finish_s"] == pytest.approx(b_first + 0.005, abs=1e-9)
    assert rec.loc[0, "finish_s"] == pytest.approx(a_finish, abs=1e-9)


def test_the_encoder_budget_holds_the_second_image_to_the_next_step() -> None:
    """Two 1,100-token requests (a 1,000-token image each) at once, step budget 4,096.

    Encoder budget 1,500: step 1 encodes the first image and prefills its request; the
    second's chunk stops before its image (500 left), so it goes in step 2, beside the
    first's decode. Encoder budget 4,096: one step encodes both and prefills both.
    """
    reqs = [_req(0, 0.0, prompt=100, item=1000, out=2), _req(1, 0.0, prompt=100, item=1000, out=2)]
    held = _run(reqs, step_token_budget=4096, encoder_budget_tokens=1500)
    step1 = 0.010 + 0.020 + 0.011
    step2 = 0.010 + 0.020 + 0.011 + 0.005
    assert held.loc[0, "first_token_s"] == pytest.approx(step1, abs=1e-9)
    assert held.loc[1, "first_token_s"] == pytest.approx(step1 + step2, abs=1e-9)
    assert held.loc[0, "finish_s"] == pytest.approx(step1 + step2, abs=1e-9)
    assert held.loc[1, "finish_s"] == pytest.approx(step1 + step2 + 0.005, abs=1e-9)
    both = _run(reqs, step_token_budget=4096)
    together = 0.010 + 0.020 + 0.022
    assert list(both["first_token_s"]) == pytest.approx([together] * 2, abs=1e-9)
    assert list(both["finish_s"]) == pytest.approx([together + 0.005] * 2, abs=1e-9)


def test_full_kv_preempts_the_newest_sequence_for_recompute() -> None:
    """KV of 300 tokens; A and B of 100 input and 101 output tokens (201 each: both fit alone).

    A prefills alone (0.031); B's prefill runs beside A's first decode (0.036): at 0.067 the
    two hold 102 + 101 tokens. 48 steps of two fill the KV to 299; the next step does not
    fit, so B (the newest) is preempted with 49 tokens made: its TTFT stands. A runs its 51
    steps left alone and leaves at 0.562; B then prefills its 149 tokens again, re-encoding
    its image (0.010 + 0.02149), and makes its last 51 tokens.
    """
    profile = MemoryProfile(stage=LM, kv_tokens_per_gpu=300)
    a = _req(0, 0.0, prompt=10, item=90, out=101)
    b = _req(1, 0.001, prompt=10, item=90, out=101)
    rec = _run([a, b], profile=profile)
    both_in = 0.031 + (0.010 + 0.021 + 0.005)
    a_done = both_in + (48 + 51) * 0.005
    b_back = a_done + 0.010 + 0.02149
    assert rec.loc[1, "first_token_s"] == pytest.approx(both_in, abs=1e-9)
    assert rec.loc[0, "finish_s"] == pytest.approx(a_done, abs=1e-9)
    assert rec.loc[1, "finish_s"] == pytest.approx(b_back + 51 * 0.005, abs=1e-9)


def test_reserved_kv_makes_the_second_request_wait_instead() -> None:
    """The prefill-first engine reserves 201 tokens per sequence: B waits for A to leave."""
    profile = MemoryProfile(stage=LM, kv_tokens_per_gpu=300)
    rec = _run([_req(0, 0.0, prompt=10, item=90, out=101), _req(1, 0.001, prompt=10, item=90, out=101)],
               profile=profile, chunked_prefill=False)
    a_done = 0.031 + 100 * 0.005
    assert rec.loc[0, "finish_s"] == pytest.approx(a_done, abs=1e-9)
    assert rec.loc[1, "first_token_s"] == pytest.approx(a_done + 0.031, abs=1e-9)
    assert rec.loc[1, "finish_s"] == pytest.approx(a_done + 0.031 + 100 * 0.005, abs=1e-9)


def test_a_growing_decode_worker_recomputes_without_its_encoder() -> None:
    """EPD with ``decode_kv = "grow"``: nothing is lost, and the preempted request recomputes.

    Every request is served once; with KV for two sequences' prompts but not their
    outputs, the grow mode finishes the batch no later than reserving would.
    """
    profile = MemoryProfile(stage=LM, kv_tokens_per_gpu=300)
    dep = Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                     decode=StageGroup(num_workers=1), max_encode_batch=1, remote_fraction=1.0)
    reqs = [_req(i, 0.01 * i, prompt=10, item=90, out=101) for i in range(4)]
    cluster = Cluster(gpu="test-gpu", num_gpus=3, link_bytes_per_s=1e9, link_latency_s=0.0, num_links=1)
    finish = {}
    for mode in ("reserve", "grow"):
        plan = assemble(dep, reqs, cluster=cluster, profile=profile)
        frame = simulate(plan, profile, options=SimOptions(scheduler=Scheduling(decode_kv=mode))).records
        assert (frame["status"] == "ok").all() and len(frame) == 4
        assert frame["finish_s"].notna().all()
        finish[mode] = float(frame["finish_s"].max())
    assert finish["grow"] <= finish["reserve"]


def test_a_chunked_prefill_worker_fills_each_batch_to_the_budget() -> None:
    """Remote Prefill with ``prefill_chunked``: A (3,000 input tokens) reaches Prefill at t, B
    (1,000) 5 ms later (one encode each, request at a time).

    Budget 2,048: batch 1 is 2,048 of A (0.04048 s); batch 2 the 952 left of A beside B's 1,000
    (0.03952 s); both go to Decode at t + 0.08. Whole requests: A alone ends at t + 0.05, then
    B alone at t + 0.08."""
    profile = AffineProfile(encode_base_s=0.005, prefill_base_s=0.020, prefill_per_token_s=1e-5,
                            decode_base_s=0.005, kv_bytes_per_token=1, embed_bytes_per_token=1)
    dep = Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                     decode=StageGroup(num_workers=1), max_encode_batch=1, batching="fixed",
                     batch_timeout_s=0.0, remote_fraction=1.0, sm_sharing="none")
    reqs = [_req(0, 0.0, prompt=100, item=2900, out=2), _req(1, 0.0, prompt=100, item=900, out=2)]
    cluster = Cluster(gpu="test-gpu", num_gpus=3, link_bytes_per_s=1e12, link_latency_s=0.0, num_links=4)
    first = {}
    for chunked in (True, False):
        plan = assemble(dep, reqs, cluster=cluster, profile=profile)
        options = SimOptions(scheduler=Scheduling(prefill_chunked=chunked))
        frame = simulate(plan, profile, options=options).records.set_index("request_id")
        t = float(frame.loc[0, "prefill_start_s"])
        first[chunked] = (frame.loc[0, "first_token_s"] - t, frame.loc[1, "first_token_s"] - t)
    assert first[True] == pytest.approx((0.08, 0.08), abs=1e-9)
    assert first[False] == pytest.approx((0.05, 0.08), abs=1e-9)
