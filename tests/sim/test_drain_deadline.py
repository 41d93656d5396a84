"""Faster moves, exactly: a draining Decode worker's deadline, and a staged move's steps side by side.

``drain_deadline_s``: the draining worker's sequences move and are recomputed; ``concurrent_steps``:
a step starts beside the running ones when their GPUs are disjoint and no stage goes dark unplanned;
``serve_first``: a stage losing its every worker comes up first.

The stages are tests/sim/test_controller_in_sim.py's constant ones (encode 0.1 s a batch, prefill
20 ms whatever it holds, a decode step 5 ms, no bytes, no link latency), so a moved sequence's
recompute is one 20 ms prefill at the head of its new worker's next segment.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim.control import timeline
from tests.sim.test_controller_in_sim import A, B, C, _dep, _req
from tests.sim.test_make_before_break import RECONFIG_S, _run

#: four GPUs: E1 P1 D2 -> E2 P1 D1; the Decode worker on GPU 3 leaves for an encoder
TWO_DECODERS = _dep(1, 1, 2)
ONE_DECODER = _dep(2, 1, 1)
STEP_S, RECOMPUTE_S = 0.005, 0.02


def _long_pair() -> list:
    # r0 decodes on worker 0 from 0.12, r1 on worker 1 from 0.6212: 4,000 steps (20 s) each
    return [_req(0, 0.0, out=4001), _req(1, 0.5012, out=4001), _req(2, 12.0, out=5)]


def test_without_a_deadline_the_move_waits_for_the_longest_decode():
    result = _run(4, (TWO_DECODERS, ONE_DECODER), ((10.0, 1),), _long_pair())
    (up,) = result.meta["controller"]["reroles"]
    assert (up["drain_start_s"], up["drain_end_s"]) == (10.0, pytest.approx(20.6212))
    rec = result.records.set_index("request_id")
    assert rec.loc[1, "decode_worker"] == 1


def test_a_zero_deadline_moves_the_running_sequence_at_the_step_boundary_and_recomputes_it():
    trace: list = []
    result = _run(4, (TWO_DECODERS, ONE_DECODER), ((10.0, 1),), _long_pair(), drain_deadline_s=0.0,
                  trace=trace)
    meta = result.meta["controller"]
    # r1's step in progress at 10.0 ends at 0.6212 + 1876 steps = 10.0012: it leaves then, and the GPU
    # warms as an encoder from there
    (up,) = meta["reroles"]
    assert (up["gpus"], up["from"], up["to"]) == ([3], "decode", "encode")
    assert up["drain_end_s"] == pytest.approx(0.6212 + 1876 * STEP_S)
    assert up["ready_s"] == pytest.approx(up["drain_end_s"] + RECONFIG_S)
    moved = [t for t in trace if t[1] in ("decode_evict", "decode_join") and 1 in t[3]]
    assert [(what, worker) for _, what, worker, _ in moved] == [
        ("decode_join", 1), ("decode_evict", 1), ("decode_join", 0)]
    # it joins worker 0 at that worker's next boundary (0.12 + 1977 steps), pays the 20 ms recompute
    # and decodes the 4,000 - 1,876 tokens it still owes; r0, in the same batch, waits the 20 ms too
    joined = 0.12 + 1977 * STEP_S
    assert moved[-1][0] == pytest.approx(joined)
    rec = result.records.set_index("request_id")
    assert rec.loc[1, "decode_worker"] == 0
    assert rec.loc[1, "finish_s"] == pytest.approx(joined + RECOMPUTE_S + (4000 - 1876) * STEP_S)
    assert rec.loc[0, "finish_s"] == pytest.approx(0.12 + 4000 * STEP_S + RECOMPUTE_S)
    assert rec.loc[2, "finish_s"] == pytest.approx(12.12 + 4 * STEP_S)


def test_a_later_deadline_moves_what_is_left_then():
    result = _run(4, (TWO_DECODERS, ONE_DECODER), ((10.0, 1),), _long_pair(), drain_deadline_s=3.0)
    (up,) = result.meta["controller"]["reroles"]
    assert up["drain_end_s"] == pytest.approx(0.6212 + 2476 * STEP_S)  # the boundary after 13.0
    rec = result.records.set_index("request_id")
    assert rec.loc[1, "decode_worker"] == 0
    joined = 0.12 + 2577 * STEP_S
    assert rec.loc[1, "finish_s"] == pytest.approx(joined + RECOMPUTE_S + (4000 - 2476) * STEP_S)


def test_a_sequence_moved_while_no_decoder_serves_waits_for_the_new_one():
    # E1 P1 D1 on GPUs 0-2 -> E1 P1 D1x2: the only Decode worker leaves (a planned gap), evicts r0 at
    # once; the TP-2 worker on GPUs 2-3 is up 5 s later and recomputes r0 first
    reqs = [_req(0, 0.0012, out=4001), _req(1, 11.0, out=5)]
    result = _run(4, (_dep(1, 1, 1), _dep(1, 1, 1, decode_tp=2)), ((10.0, 1),), reqs, drain_deadline_s=0.0)
    (up,) = result.meta["controller"]["reroles"]
    left = 0.1212 + 1976 * STEP_S
    assert (up["gpus"], up["drain_end_s"], up["ready_s"]) == ([2, 3], pytest.approx(left),
                                                               pytest.approx(left + RECONFIG_S))
    rec = result.records.set_index("request_id")
    assert rec.loc[0, "finish_s"] == pytest.approx(left + RECONFIG_S + RECOMPUTE_S + (4000 - 1976) * STEP_S)
    # r1's KV, parked while no decoder served, is sent on after r0 is handed over: it reaches the
    # worker in r0's first step (recompute, then one step) and joins at its end
    assert rec.loc[1, "first_token_s"] == pytest.approx(11.12)
    assert rec.loc[1, "finish_s"] == pytest.approx(left + RECONFIG_S + RECOMPUTE_S + STEP_S + 4 * STEP_S)
    assert (rec["decode_worker"] == 1).all()


def test_a_decoder_does_not_hand_its_batch_to_a_smaller_one():
    # E1 P1 D1x2 -> E1 P1 D1 (TP 2 -> TP 1): the deadline changes nothing, the TP-2 worker drains
    reqs = [_req(0, 0.0012, out=4001), _req(1, 11.0, out=5)]
    bands = (_dep(1, 1, 1, decode_tp=2), _dep(1, 1, 1))
    plain = _run(4, bands, ((10.0, 1),), reqs)
    trace: list = []
    deadline = _run(4, bands, ((10.0, 1),), reqs, drain_deadline_s=0.0, trace=trace)
    assert not [t for t in trace if t[1] == "decode_evict"]
    assert deadline.meta["controller"]["reroles"] == plain.meta["controller"]["reroles"]
    assert deadline.records.equals(plain.records)


@pytest.mark.parametrize("deadline_s", [0.0, 0.5])
def test_a_full_cluster_loses_nothing_and_serves_nothing_twice_with_a_deadline(deadline_s):
    # tests/sim/test_make_before_break.py's four-GPU run of staged moves every 20 s, sequences moved
    rng = np.random.default_rng(11)
    times = np.cumsum(rng.exponential(0.12, 1600))
    reqs = [_req(i, float(t), out=int(rng.integers(2, 200))) for i, t in enumerate(times)]
    trace: list = []
    result = _run(4, (A, B, C), tuple((20.0 * k, k % 3) for k in range(1, 9)), reqs,
                  drain_deadline_s=deadline_s, trace=trace)
    rec = result.records
    assert len(rec) == len(reqs) and rec["request_id"].is_unique
    assert (rec["status"] == "ok").all()
    # every sequence decodes every token it owes: none skipped by a move
    owed = np.array([r.output_tokens - 1 for r in reqs])[rec["request_id"].to_numpy()]
    assert (rec["finish_s"] - rec["first_token_s"] >= owed * STEP_S - 1e-9).all()
    evicted = [rid for _, what, _, ids in trace if what == "decode_evict" for rid in ids]
    assert evicted, "the run moved no sequence"
    leaves = [rid for _, what, _, ids in trace if what == "decode_leave" for rid in ids]
    assert sorted(leaves) == sorted(r.request_id for r in reqs)  # each leaves once
    frames = timeline(result.meta["controller"])
    done = frames["reroles"].dropna(subset=["ready_s"])
    assert (done["ready_s"] >= done["drain_end_s"] + RECONFIG_S - 1e-9).all()


def test_a_negative_deadline_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="drain_deadline_s"):
        _run(4, (TWO_DECODERS, ONE_DECODER), ((10.0, 1),), _long_pair(), drain_deadline_s=-1.0)


def test_concurrent_steps_start_together_and_keep_a_worker_in_every_stage():
    # tests/sim/test_make_before_break.py's six-GPU move E3 P2 D1 -> E1 P1 D4: its three steps touch
    # GPUs 1, 2 and 4 and each leaves its stage a worker (E0, E0, P3), so all three start at 10
    from tests.sim.test_make_before_break import DEEP, WIDE, served_throughout
    reqs = [_req(i, 0.25 * i, out=20) for i in range(160)]
    result = _run(6, (WIDE, DEEP), ((10.0, 1),), reqs, concurrent_steps=True)
    meta = result.meta["controller"]
    ups = [(r["gpus"], r["from"], r["to"], r["drain_start_s"]) for r in meta["reroles"]]
    assert ups == [([1], "encode", "decode", 10.0), ([2], "encode", "decode", 10.0),
                   ([4], "prefill", "decode", 10.0)]
    for r in meta["reroles"]:
        assert r["ready_s"] == pytest.approx(r["drain_end_s"] + RECONFIG_S)
        assert r["ready_s"] < 10.0 + RECONFIG_S + 1.0  # one warm-up, not three in a row
    served_throughout(result, WIDE, 6)


def test_a_step_waiting_for_another_holds_back_only_the_steps_that_share_its_gpus():
    # four GPUs: E[0] E[1] (both hold the LM) D[2,3] (TP 2) -> E[0] P[1] P[2] D[3] (no LM, all
    # remote). The plan: re-role E0, then E1 (each in turn, so Encode keeps a worker), then the
    # decoder's GPUs. E1's step waits for E0's warm-up; the decoder's touches neither's GPUs and its
    # gap is planned, so it starts at the decision beside E0's instead of behind E1's
    from easerve_core import Deployment, SMSharing, StageGroup
    local = Deployment(encode=StageGroup(num_workers=2), prefill=StageGroup(num_workers=0),
                       decode=StageGroup(num_workers=1, tp=2), max_encode_batch=1, remote_fraction=0.0,
                       sm_sharing=SMSharing.DYNAMIC)
    remote = _dep(1, 2, 1)
    reqs = [_req(0, 0.0), _req(1, 20.0)]
    result = _run(4, (local, remote), ((1.0, 1),), reqs, concurrent_steps=True)
    rows = result.meta["controller"]["reroles"]
    starts = {tuple(r["gpus"]): (r["to"], r["drain_start_s"], r["ready_s"]) for r in rows}
    assert starts[(0,)] == ("encode", 1.0, 1.0 + RECONFIG_S)
    assert starts[(1,)] == ("prefill", 1.0 + RECONFIG_S, 1.0 + 2 * RECONFIG_S)
    # the decoder, empty, retires at 1.0: its GPUs serve again 5 s later, not 5 s after E1's step
    assert starts[(2,)] == ("prefill", 1.0, 1.0 + RECONFIG_S)
    assert starts[(3,)] == ("decode", 1.0, 1.0 + RECONFIG_S)
    assert (result.records["status"] == "ok").all()


@pytest.mark.parametrize("deadline_s", [None, 0.0])
def test_a_full_cluster_with_concurrent_steps_loses_nothing(deadline_s):
    rng = np.random.default_rng(11)
    times = np.cumsum(rng.exponential(0.12, 1600))
    reqs = [_req(i, float(t), out=int(rng.integers(2, 200))) for i, t in enumerate(times)]
    result = _run(4, (A, B, C), tuple((20.0 * k, k % 3) for k in range(1, 9)), reqs,
                  drain_deadline_s=deadline_s, concurrent_steps=True)
    rec = result.records
    assert len(rec) == len(reqs) and rec["request_id"].is_unique and (rec["status"] == "ok").all()
    frames = timeline(result.meta["controller"])
    done = frames["reroles"].dropna(subset=["ready_s"])
    for gpu, rows in done.groupby("gpu"):  # a GPU is never held by two serving workers
        olds = frames["retired"][frames["retired"]["gpus"].apply(lambda g, gpu=gpu: gpu in g)]
        for row in rows.itertuples():
            before = olds[olds["drain_start_s"] <= row.drain_start_s]
            assert (before["drain_end_s"] <= row.ready_s - RECONFIG_S + 1e-9).all()


def test_serve_first_keeps_decode_served_where_the_default_leaves_it_dark():
    # five GPUs, none free: E[0] E[1] P[2] D[3,4] (TP 2) -> E1 P2 D2 (TP 1). By default the TP-1
    # decoders wait for the TP-2 one's GPUs (Decode dark while it drains its 20 s sequences); with
    # serve_first one comes up on GPU 1 first and the TP-2 decoder drains beside it
    from tests.sim.test_make_before_break import _min_serving, _serving
    start, target = _dep(2, 1, 1, decode_tp=2), _dep(1, 2, 2)
    reqs = [_req(i, 0.5 * i, out=4001 if i < 4 else 20) for i in range(80)]
    plain = _run(5, (start, target), ((10.0, 1),), reqs)
    first = _run(5, (start, target), ((10.0, 1),), reqs, serve_first=True)
    end = float(first.records["finish_s"].max())
    assert _min_serving(_serving(plain.meta["controller"], start, 5), "decode", end) == 0
    spans = _serving(first.meta["controller"], start, 5)
    for stage in ("encode", "prefill", "decode"):
        assert _min_serving(spans, stage, end) >= 1, stage
    ups = [(r["gpus"], r["to"]) for r in first.meta["controller"]["reroles"]]
    assert ups[0] == ([1], "decode")
    rec = first.records
    assert len(rec) == len(reqs) and rec["request_id"].is_unique and (rec["status"] == "ok").all()
