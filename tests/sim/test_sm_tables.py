"""The SM-share table following the workload (``sm_tables``): each encode batch runs the table of its time.

Encode here takes 0.1 s at the whole GPU and 0.1 / share at a share (dynamic sharing), so a
batch's duration reads off the table it ran on; the rest is tests/sim/test_controller_in_sim.py's
constant stages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from easerve_core import SMShareTable, SMSharing
from easerve_core.controller import Band, PlanTable
from easerve_core.oracle import ScriptedController
from easerve_core.plan import assemble
from sim import simulate
from tests.sim.test_controller_in_sim import Stages, _dep, _req
from tests.sim.test_make_before_break import _cluster

HALF, WHOLE = SMShareTable({1: 0.5}), SMShareTable({1: 1.0})


class Shared(Stages):
    def encode_s(self, items: Sequence[int], sm_share: float = 1.0) -> float:
        return 0.1 / sm_share


PROFILE = Shared()
SHARED = replace(_dep(1, 1, 1), sm_sharing=SMSharing.DYNAMIC)


def _encode_s(sm_tables=()) -> list[float]:
    reqs = [_req(0, 0.0), _req(1, 20.0)]
    plan = assemble(SHARED, reqs, cluster=_cluster(4), profile=PROFILE, sm_table=HALF)
    rec = simulate(plan, PROFILE, sm_tables=sm_tables).records.sort_values("request_id")
    return list(rec["encode_end_s"] - rec["encode_start_s"])


def test_without_a_schedule_the_plan_s_table_runs_throughout():
    assert _encode_s() == pytest.approx([0.2, 0.2])


def test_a_static_run_takes_the_next_table_from_its_time_on():
    assert _encode_s(((10.0, WHOLE),)) == pytest.approx([0.2, 0.1])
    assert _encode_s(((0.0, WHOLE), (10.0, HALF))) == pytest.approx([0.1, 0.2])


def test_workers_a_controller_brings_up_start_on_the_table_of_their_time():
    # E1 P1 D1 on 4 GPUs -> E2 P1 D1 at 5 s: the new encoder (GPU 3, worker 1) is built at 10 s, after
    # the table changed at 8 s; r0 ran on the plan's table, r1 (worker 1) and r2 (worker 0) on the new
    two = replace(_dep(2, 1, 1), sm_sharing=SMSharing.DYNAMIC)
    table = PlanTable((Band(rate_hz=1.0, deployment=SHARED), Band(rate_hz=2.0, deployment=two)))
    reqs = [_req(0, 0.0), _req(1, 20.0), _req(2, 20.5)]
    plan = assemble(SHARED, reqs, cluster=_cluster(4), profile=PROFILE, sm_table=HALF)
    result = simulate(plan, PROFILE, controller=ScriptedController(table, ((5.0, 1),)), reconfiguration_s=5.0,
                      sm_tables=((8.0, WHOLE),))
    (up,) = result.meta["controller"]["reroles"]
    assert (up["gpus"], up["ready_s"]) == ([3], 10.0)
    rec = result.records.sort_values("request_id")
    assert list(rec["encode_worker"]) == [0, 1, 0]
    assert list(rec["encode_end_s"] - rec["encode_start_s"]) == pytest.approx([0.2, 0.1, 0.1])


def test_a_table_before_the_start_is_refused():
    with pytest.raises(ValueError, match="sm_tables"):
        _encode_s(((-1.0, WHOLE),))
