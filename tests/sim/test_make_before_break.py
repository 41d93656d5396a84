"""Make-before-break re-roles in the simulator, on scripted traffic: exact times, no stage left dark.

The stages are tests/sim/test_controller_in_sim.py's constant ones (encode 0.1 s a batch, prefill
20 ms, a decode step 5 ms, no bytes, no link latency): an unloaded request's first token comes
0.12 s after it arrives, whatever worker serves it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from easerve_core import Cluster, Deployment, SMSharing, StageGroup
from easerve_core.controller import Band, Controller, PlanTable
from easerve_core.oracle import ScriptedController
from easerve_core.plan import assemble
from easerve_core.router import DeficitRouter
from sim import simulate
from sim.control import timeline
from tests.sim.test_controller_in_sim import PROFILE, A, B, C, _dep, _req

RECONFIG_S = 5.0
UNLOADED_TTFT_S = 0.1 + 0.02


def _cluster(num_gpus: int) -> Cluster:
    return Cluster(gpu="test-gpu", num_gpus=num_gpus, link_bytes_per_s=1e9, link_latency_s=0.0, num_links=4)


def _run(num_gpus: int, bands: Sequence[Deployment], schedule, requests, **kwargs):
    table = PlanTable(tuple(Band(rate_hz=float(k + 1), deployment=d) for k, d in enumerate(bands)))
    plan = assemble(bands[0], requests, cluster=_cluster(num_gpus), profile=PROFILE)
    return simulate(plan, PROFILE, controller=ScriptedController(table, schedule),
                    reconfiguration_s=RECONFIG_S, **kwargs)


def _serving(meta: dict, start: Deployment, num_gpus: int) -> list[tuple[str, float, float]]:
    """Every worker's (stage, first, last) serving time: the start's from 0, a re-roled one from its
    ready time; each until its drain began (inf if never)."""
    frames = timeline(meta)
    drains = {(r["stage"], r["worker"]): r["drain_start_s"] for r in meta["retired"]}
    out = []
    for stage in ("encode", "prefill", "decode"):
        for i in range(getattr(start, stage).num_workers):
            out.append((stage, 0.0, drains.get((stage, i), math.inf)))
    for row in meta["reroles"]:
        if row["worker"] >= 0:
            stage = "encode" if row["to"].startswith("encode") else row["to"]
            out.append((stage, row["ready_s"], drains.get((stage, row["worker"]), math.inf)))
    assert frames["reroles"].empty or (frames["reroles"]["gpu"] < num_gpus).all()
    return out


def _min_serving(spans: list[tuple[str, float, float]], stage: str, until_s: float) -> int:
    edges = sorted({t for _, a, b in spans for t in (a, b) if t < until_s} | {0.0})
    return min(sum(1 for s, a, b in spans if s == stage and a <= t < b) for t in edges)


def served_throughout(result, start: Deployment, num_gpus: int) -> None:
    """Every stage keeps a serving worker until the last request finishes, and every request is ok."""
    spans = _serving(result.meta["controller"], start, num_gpus)
    end = float(result.records["finish_s"].max())
    for stage in ("encode", "prefill", "decode"):
        assert _min_serving(spans, stage, end) >= 1, stage
    assert (result.records["status"] == "ok").all()


def test_a_re_role_with_a_free_gpu_warms_the_new_worker_while_the_old_one_serves():
    # A = E2 P1 D1 on GPUs 0-3 of 8 -> B = E1 P2 D1 at t = 10: B's second Prefill worker warms on free
    # GPU 4 from 10 to 15; the encoder on GPU 1 serves until then and drains at 15
    reqs = [_req(i, 9.0 + 0.5 * i) for i in range(16)]  # one every 0.5 s, 9.0 .. 16.5
    result = _run(8, (A, B), ((10.0, 1),), reqs)
    meta = result.meta["controller"]
    (up,) = meta["reroles"]
    assert (up["gpus"], up["from"], up["to"], up["drain_start_s"], up["ready_s"]) == (
        [4], "idle", "prefill", 10.0, 10.0 + RECONFIG_S)
    (gone,) = meta["retired"]
    assert (gone["stage"], gone["worker"], gone["drain_start_s"]) == ("encode", 1, 15.0)
    rec = result.records.set_index("request_id")
    # round-robin keeps E1 busy during the warm-up (r3 at 10.5, r5 at 11.5 ...): it has not left yet
    assert set(rec.loc[rec["arrival_s"].between(10.0, 14.9), "encode_worker"]) == {0, 1}
    assert set(rec.loc[rec["arrival_s"] > 15.0, "encode_worker"]) == {0}
    # no TTFT spike: every request's first token is the unloaded 0.12 s after its arrival
    ttft = rec["first_token_s"] - rec["arrival_s"]
    assert ttft.to_numpy() == pytest.approx(np.full(len(reqs), UNLOADED_TTFT_S))
    assert result.meta["controller"]["decisions"][0]["gpus_moved"] == 1


def test_the_move_before_make_before_break_leaves_the_gap_this_one_closes():
    # the same move with the build's layout: GPU 1 drains at once and serves again as Prefill at 15
    reqs = [_req(i, 9.0 + 0.5 * i) for i in range(16)]
    result = _run(8, (A, B), ((10.0, 1),), reqs, make_before_break=False)
    (up,) = result.meta["controller"]["reroles"]
    assert (up["gpus"], up["from"], up["ready_s"]) == ([1], "encode", pytest.approx(10.0 + RECONFIG_S))


#: six GPUs: E3 P2 D1 -> E1 P1 D4, no free GPU: three workers leave, one at a time
WIDE = _dep(3, 2, 1)
DEEP = _dep(1, 1, 4)


def test_a_staged_move_keeps_a_worker_in_every_stage():
    reqs = [_req(i, 0.25 * i, out=20) for i in range(160)]  # 4 req/s for 40 s
    result = _run(6, (WIDE, DEEP), ((10.0, 1),), reqs)
    meta = result.meta["controller"]
    ups = [(r["gpus"], r["from"], r["to"]) for r in meta["reroles"]]
    assert ups == [([1], "encode", "decode"), ([2], "encode", "decode"), ([4], "prefill", "decode")]
    # each step starts when the previous one's worker is warm: drain, then 5 s, then the next
    ready = [r["ready_s"] for r in meta["reroles"]]
    starts = [r["drain_start_s"] for r in meta["reroles"]]
    assert starts[0] == 10.0
    assert starts[1:] == ready[:-1]
    for earlier, later in zip(meta["reroles"], meta["reroles"][1:], strict=False):
        assert later["drain_start_s"] >= earlier["ready_s"]
    for r in meta["reroles"]:
        assert r["ready_s"] == pytest.approx(r["drain_end_s"] + RECONFIG_S)
    served_throughout(result, WIDE, 6)


def test_a_full_cluster_loses_nothing_and_serves_nothing_twice_across_staged_moves():
    # four GPUs, none free: A (E2 P1 D1) -> B (E1 P2 D1) -> C (E1 P1 D1x2) -> A ... every 20 s
    rng = np.random.default_rng(11)
    times = np.cumsum(rng.exponential(0.12, 1600))  # ~8 req/s for ~190 s
    reqs = [_req(i, float(t), out=int(rng.integers(2, 200))) for i, t in enumerate(times)]
    script = tuple((20.0 * k, k % 3) for k in range(1, 9))
    result = _run(4, (A, B, C), script, reqs)
    rec = result.records
    assert len(rec) == len(reqs) and rec["request_id"].is_unique
    assert set(rec["request_id"]) == {r.request_id for r in reqs}
    assert (rec["status"] == "ok").all()
    assert (rec["encode_end_s"] <= rec["prefill_start_s"]).all()
    assert (rec["first_token_s"] < rec["finish_s"]).all()
    frames = timeline(result.meta["controller"])
    done = frames["reroles"].dropna(subset=["ready_s"])
    assert (done["ready_s"] >= done["drain_end_s"] + RECONFIG_S - 1e-9).all()
    # a GPU is never held by two serving workers: a new worker starts after the old one retired
    for gpu, rows in done.groupby("gpu"):
        olds = frames["retired"][frames["retired"]["gpus"].apply(lambda g, gpu=gpu: gpu in g)]
        for row in rows.itertuples():
            before = olds[olds["drain_start_s"] <= row.drain_start_s]
            assert (before["drain_end_s"] <= row.ready_s - RECONFIG_S + 1e-9).all()



def test_a_table_on_output_tokens_steers_the_run_by_each_arrival_s_weight():
    # 1 req/s on 8 GPUs; outputs of 4 tokens, then of 40 from t = 300 s: 4 -> 40 output tokens/s
    reqs = [_req(i, 0.5 + i, out=4 if i < 300 else 40) for i in range(600)]
    table = PlanTable((Band(rate_hz=4.0, deployment=A), Band(rate_hz=40.0, deployment=B)),
                      signal="output_tokens")
    plan = assemble(A, reqs, cluster=_cluster(8), profile=PROFILE)
    result = simulate(plan, PROFILE, controller=Controller(table), reconfiguration_s=RECONFIG_S)
    (decision,) = result.meta["controller"]["decisions"]
    assert (decision["band"], decision["at_s"]) == (1, 365.0)  # as the pure controller decides
    assert (result.records["status"] == "ok").all()


@pytest.mark.parametrize("linger", [False, True])
def test_a_leaving_decoder_whose_sequences_cannot_move_keeps_taking_new_ones_while_it_lingers(linger):
    # four GPUs: C (E1 P1 D1x2 on 2-3) -> B (E1 P2 D1 on 3) at t = 1; B's decoder is smaller, so
    # r0's 2,000 steps (to ~10.1 s) stay on D0, and B's new Prefill and decoder wait for D0 to
    # retire. Lingering, D0 takes r1 (at 8 s, 1,000 steps) beside r0; once r0 has left it takes
    # nothing new, so r2 (at 11 s) waits for the new decoder, which comes up 5 s after D0 retires
    reqs = [_req(0, 0.0, out=2001), _req(1, 8.0, out=1001), _req(2, 11.0)]
    result = _run(4, (C, B), ((1.0, 1),), reqs, linger=linger)
    meta = result.meta["controller"]
    rec = result.records.set_index("request_id")
    assert (rec["status"] == "ok").all() and len(rec) == 3
    (d0,) = [r for r in meta["retired"] if r["stage"] == "decode"]
    (up,) = [r for r in meta["reroles"] if r["to"] == "decode"]
    on_d0 = rec[rec["decode_worker"] == 0]
    assert d0["drain_end_s"] == pytest.approx(on_d0["finish_s"].max())  # retires when it holds nothing
    assert up["ready_s"] == pytest.approx(d0["drain_end_s"] + RECONFIG_S)
    assert rec.loc[2, "decode_worker"] == 1 and rec.loc[2, "finish_s"] > up["ready_s"]
    if linger:
        assert list(on_d0.index) == [0, 1]
        assert rec.loc[1, "finish_s"] == pytest.approx(8.0 + UNLOADED_TTFT_S + 1000 * 0.005)  # no wait
    else:
        assert list(on_d0.index) == [0]
        assert rec.loc[1, "decode_worker"] == 1 and rec.loc[1, "finish_s"] > up["ready_s"]


def _shared(p: int, d: int, s: float) -> Deployment:
    """One encoder that holds the LM (dynamic SM sharing), ``p`` Prefill and ``d`` Decode workers."""
    return Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=p),
                      decode=StageGroup(num_workers=d), max_encode_batch=1, remote_fraction=s,
                      sm_sharing=SMSharing.DYNAMIC)


def _deficit_routes(s: float, n: int) -> list[str]:
    router = DeficitRouter(s)
    return [router.route().value for _ in range(n)]


@pytest.mark.parametrize("interim", [False, True])
def test_a_half_served_target_routes_at_the_share_that_keeps_each_worker_s_load(interim):
    # four GPUs: E1 P1 D2 -> E1 P2 D1 at s = 0.6 at t = 1: one idle decoder drains at once and its
    # GPU warms as the second Prefill worker until 6 s. Until it serves, half the target's remote
    # Prefill serves beside all of its local Prefill: the encoder routes at 0.6 x 0.5 / (0.6 x 0.5
    # + 0.4) = 3/7, each serving worker carrying the load the target sets; from 6 s at 0.6, each
    # time with fresh counts (without interim_share: at 0.6 from the move on)
    reqs = [_req(i, 0.6 + 0.2 * i) for i in range(40)]
    result = _run(4, (_shared(1, 2, 0.0), _shared(2, 1, 0.6)), ((1.0, 1),), reqs, interim_share=interim)
    (up,) = [r for r in result.meta["controller"]["reroles"] if r["to"] == "prefill"]
    assert (up["from"], up["drain_start_s"], up["ready_s"]) == ("decode", 1.0, 1.0 + RECONFIG_S)
    rec = result.records.set_index("request_id").sort_values("encode_end_s")
    assert (rec["status"] == "ok").all()
    moved = rec[rec["encode_end_s"] > 1.0]
    during = moved[moved["encode_end_s"] < up["ready_s"]]["route"].tolist()
    after = moved[moved["encode_end_s"] >= up["ready_s"]]["route"].tolist()
    assert len(during) >= 20 and len(after) >= 5
    if interim:
        assert during == _deficit_routes(0.6 * 0.5 / (0.6 * 0.5 + 0.4), len(during))
        assert after == _deficit_routes(0.6, len(after))
    else:
        assert during + after == _deficit_routes(0.6, len(during) + len(after))
