"""Decode batch changes: the join/leave costs fitted from traces, and the simulator's leave cost."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from calibration.loop.host import HostModel
from calibration.loop.joins import boundaries, fit_joins, join_summary
from easerve_core.plan import assemble
from sim import SimOptions, simulate
from sim.host_effects import HostEffects
from tests.calibration_loop.helpers import CLUSTER, Flat
from tests.calibration_loop.test_host_model import _dep, _reqs

STEP, GAP, JOIN, LEAVE, MORE = 0.004, 0.0003, 0.002, 0.0005, 0.003


def _trace(events):
    """A decode worker's log and records from ``events``: per step, (joins before it, leaves after it).

    Gaps are the loop's overhead plus JOIN per join (and MORE per join beyond the first) and LEAVE
    per leave.
    """
    rows, recs, t, size, rid, running = [], [], 0.0, 0, 0, []
    for joins, leaves in events:
        t += GAP + JOIN * joins + MORE * max(0, joins - 1)
        size += joins
        running += list(range(rid, rid + joins))
        rid += joins
        rows.append({"stage": "decode", "worker": 0, "group": "decode", "start_s": t, "end_s": t + STEP,
                     "batch_size": size, "tokens": 10 * size, "sm_share": 1.0})
        t += STEP
        for _ in range(leaves):
            recs.append({"request_id": running.pop(0), "decode_worker": 0, "finish_s": t})
        size -= leaves
        t += LEAVE * leaves
    return pd.DataFrame(rows), pd.DataFrame(recs, columns=["request_id", "decode_worker", "finish_s"])


def test_fit_recovers_the_join_and_leave_costs():
    events = [(1, 0), (1, 0), (0, 0), (0, 0), (0, 1), (0, 0), (1, 0), (0, 0), (0, 1), (0, 0), (0, 1), (0, 0)]
    log, rec = _trace(events)
    table = boundaries(log, rec, None)
    assert table["joins"].tolist() == [j for j, _ in events[1:]]
    assert table["leaves"].tolist() == [lv for _, lv in events[:-1]]
    fitted = fit_joins(table)
    assert fitted["decode_join_s"] == pytest.approx(JOIN)
    assert fitted["decode_leave_s"] == pytest.approx(LEAVE)
    assert fitted["decode_join_more_s"] == 0.0  # no boundary saw two joins
    summary = join_summary(table, fitted)
    assert summary["unchanged_gap_s"] == pytest.approx(GAP) and summary["boundaries"] == len(events) - 1


def test_joins_at_one_boundary_cost_more_than_their_sum():
    log, rec = _trace([(1, 0), (2, 0), (0, 0), (1, 0), (0, 0), (3, 0), (0, 0), (0, 0)])
    fitted = fit_joins(boundaries(log, rec, None))
    assert fitted["decode_join_s"] == pytest.approx(JOIN)
    assert fitted["decode_join_more_s"] == pytest.approx(MORE)


def test_simulator_charges_joins_beyond_the_first():
    reqs = _reqs(2, out=4)  # one encode batch of two, one prefill batch: both reach Decode together
    dep = _dep(max_encode_batch=2)
    one = simulate(assemble(dep, reqs, cluster=CLUSTER, profile=Flat()), Flat(),
                   options=SimOptions(host=HostEffects(decode_join_s=0.001))).records
    more = simulate(assemble(dep, reqs, cluster=CLUSTER, profile=Flat()), Flat(),
                    options=SimOptions(host=HostEffects(decode_join_s=0.001,
                                       decode_join_more_s=0.004))).records
    assert one["first_token_s"][0] == one["first_token_s"][1]
    assert (more["finish_s"] - one["finish_s"]).tolist() == pytest.approx([0.004, 0.004])


def test_contention_is_taken_out_of_the_gaps():
    log, rec = _trace([(1, 0), (1, 0), (0, 0), (0, 0), (0, 0)])
    # another process's batch covers the whole trace: on one core each of the two runs at half speed
    busy = pd.DataFrame([{"stage": "prefill", "worker": 1, "group": "prefill", "start_s": 0.0, "end_s": 1.0,
                          "batch_size": 1, "tokens": 10, "sm_share": 1.0}])
    table = boundaries(pd.concat([log, busy], ignore_index=True), rec,
                       HostModel(effects=HostEffects(num_host_cores=1.0)))
    assert table["exclusive_s"].to_numpy() == pytest.approx(table["gap_s"].to_numpy() / 2)


def test_a_batch_that_runs_empty_is_idle_not_a_join():
    # two requests in turn: the gap between them is idle time however long
    log, rec = _trace([(1, 1), (1, 1)])
    log.loc[1, ["start_s", "end_s"]] += 1.0
    table = boundaries(log, rec, None)
    assert fit_joins(table) == {"decode_join_s": 0.0, "decode_leave_s": 0.0, "decode_join_more_s": 0.0}


def test_leave_cost_delays_those_who_stay_not_the_leaver():
    short_req, long_req = _reqs(2, out=6)
    reqs = [short_req, dataclasses.replace(long_req, output_tokens=10)]
    base = simulate(assemble(_dep(max_encode_batch=2), reqs, cluster=CLUSTER, profile=Flat()), Flat()).records
    left = simulate(assemble(_dep(max_encode_batch=2), reqs, cluster=CLUSTER, profile=Flat()), Flat(),
                    options=SimOptions(host=HostEffects(decode_leave_s=0.003))).records
    assert left["finish_s"][0] == pytest.approx(base["finish_s"][0])
    assert base["finish_s"][1] > base["finish_s"][0]  # both decode together, then one goes on alone
    assert left["finish_s"][1] - base["finish_s"][1] == pytest.approx(0.003)


def test_leave_cost_is_dropped_when_the_batch_runs_empty():
    reqs = _reqs(2, gap=1.0, out=3)
    base = simulate(assemble(_dep(), reqs, cluster=CLUSTER, profile=Flat()), Flat()).records
    left = simulate(assemble(_dep(), reqs, cluster=CLUSTER, profile=Flat()), Flat(),
                    options=SimOptions(host=HostEffects(decode_leave_s=0.003))).records
    assert left["finish_s"].tolist() == pytest.approx(base["finish_s"].tolist())
