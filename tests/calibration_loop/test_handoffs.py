"""Hand-offs between worker processes: the delays fitted from traces, and the simulator's."""

from __future__ import annotations

import pandas as pd
import pytest

from calibration.loop.handoffs import fit_handoffs, handoff_delays
from calibration.loop.host import HostModel
from easerve_core.plan import assemble
from sim import SimOptions, simulate
from sim.host_effects import HostEffects
from tests.calibration_loop.helpers import CLUSTER, Flat
from tests.calibration_loop.test_host_model import _dep, _reqs


def _row(stage, group, worker, start, end, size=1):
    return {"stage": stage, "worker": worker, "group": group, "start_s": start, "end_s": end,
            "batch_size": size, "tokens": 10, "sm_share": 1.0}


def _record(rid, enc_end, pre_start, first, decode_worker=0):
    return {"request_id": rid, "status": "ok", "route": "remote", "encode_worker": 0, "prefill_worker": 0,
            "decode_worker": decode_worker, "encode_end_s": enc_end, "prefill_start_s": pre_start,
            "first_token_s": first, "mm_tokens": 8, "prompt_tokens": 4}


def test_delays_count_only_receivers_that_were_idle():
    log = pd.DataFrame([
        _row("encode", "encode", 0, 0.990, 1.000),     # request 0's encode batch; nothing follows at once
        _row("prefill", "prefill", 0, 1.004, 1.010),   # request 0: idle Prefill, 4 ms after its encode end
        _row("decode", "decode", 0, 1.013, 1.014),     # its first step: alone, 3 ms after its first token
        _row("encode", "encode", 0, 1.001, 1.005),     # request 1's encode batch
        _row("prefill", "prefill", 0, 1.013, 1.020),   # request 1: Prefill was busy with request 0 at 1.005
        _row("decode", "decode", 0, 1.021, 1.022, 2),  # request 1 joins a running batch: not counted
    ])
    records = pd.DataFrame([_record(0, 1.000, 1.004, 1.010), _record(1, 1.005, 1.013, 1.020)])
    delays = handoff_delays(log, records)
    assert delays[["direction", "tokens"]].values.tolist() == [["prefill", 8], ["decode", 12]]
    assert delays["delay_s"].tolist() == pytest.approx([0.004, 0.003])
    # request 0's encode worker went on with request 1's batch 1 ms after sending: a busy sender
    assert delays["sender_busy"].tolist() == [True, False]
    host = HostModel(transfer_latency_s=0.001, effects=HostEffects(decode_join_s=0.0015))
    fitted = fit_handoffs([log], [records], host, embed_bytes_per_token=0, kv_bytes_per_token=0)
    assert fitted["handoff_decode_s"] == pytest.approx(0.0005)   # less the link and the join work
    assert fitted["handoff_prefill_s"] == 0.0                    # no calm sender to Prefill seen
    assert fitted["handoff_busy_s"] == pytest.approx(0.003)      # the busy one, over that calm base
    assert fitted["handoff_prefill_count"] == fitted["handoff_decode_count"] == 1


def test_simulator_delays_each_hand_off():
    reqs = _reqs(1, out=3)
    base = simulate(assemble(_dep(), reqs, cluster=CLUSTER, profile=Flat()), Flat()).records
    late = simulate(assemble(_dep(), reqs, cluster=CLUSTER, profile=Flat()), Flat(),
                    options=SimOptions(host=HostEffects(handoff_prefill_s=0.004,
                                       handoff_decode_s=0.002))).records
    assert late["prefill_start_s"][0] - base["prefill_start_s"][0] == pytest.approx(0.004)
    assert late["first_token_s"][0] - base["first_token_s"][0] == pytest.approx(0.004)
    assert late["finish_s"][0] - base["finish_s"][0] == pytest.approx(0.006)


def test_busy_sender_delays_its_hand_off_more():
    # two requests in one encode batch: the Prefill worker goes on with the second at once
    reqs = _reqs(2, out=3)
    opts = SimOptions(host=HostEffects(handoff_decode_s=0.002), prefill_max_batch_tokens=1)  # as live
    dep = _dep(max_encode_batch=2)
    calm = simulate(assemble(dep, reqs, cluster=CLUSTER, profile=Flat()), Flat(), options=opts).records
    slow = SimOptions.from_dict({"host": {"handoff_busy_s": 0.005}}, base=opts)
    busy = simulate(assemble(dep, reqs, cluster=CLUSTER, profile=Flat()), Flat(), options=slow).records
    assert busy["first_token_s"].tolist() == pytest.approx(calm["first_token_s"].tolist())
    # the first request's KV left while its Prefill worker started the second: 5 ms later to Decode;
    # the second's left an idle Prefill worker: on time (behind the first in Decode, so no earlier)
    assert busy["finish_s"][0] - calm["finish_s"][0] == pytest.approx(0.005)


def test_drawn_hand_offs_spread_and_repeat_with_the_seed():
    reqs = _reqs(40, gap=1.0, out=2)  # one at a time: each request's first token is its own hand-off
    quantiles = SimOptions(host=HostEffects(handoff_prefill_quantiles_s=[0.001, 0.002, 0.004, 0.008]))
    runs = [simulate(assemble(_dep(), reqs, cluster=CLUSTER, seed=seed, profile=Flat()), Flat(),
                     options=quantiles).records
            for seed in (1, 1, 2)]
    base = simulate(assemble(_dep(), reqs, cluster=CLUSTER, profile=Flat()), Flat()).records
    drawn = (runs[0]["prefill_start_s"] - base["prefill_start_s"]).round(9)
    assert set(drawn) == {0.001, 0.002, 0.004, 0.008}  # every value drawn, nothing else
    assert runs[0].equals(runs[1]) and not runs[0].equals(runs[2])


def test_fit_keeps_ten_quantiles_of_the_calm_hand_offs():
    rows, recs = [], []
    for i in range(20):  # hand-offs to an idle Decode worker, 1..20 ms after the first token
        t = float(i)
        rows.append(_row("decode", "decode", 0, t + 0.001 * (i + 1), t + 0.001 * (i + 1) + 0.001))
        recs.append({**_record(i, t - 0.5, t - 0.4, t), "route": "local"})
    fitted = fit_handoffs([pd.DataFrame(rows)], [pd.DataFrame(recs)], HostModel(),
                          embed_bytes_per_token=0, kv_bytes_per_token=0)
    q = fitted["handoff_decode_quantiles_s"]
    assert len(q) == 10 and q == sorted(q) and q[0] == pytest.approx(0.002, abs=1e-3)
    assert q[-1] == pytest.approx(0.0195, abs=1e-3) and fitted["handoff_prefill_quantiles_s"] == []
