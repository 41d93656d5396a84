"""The controller's traffic shapes: the phases the oracle follows, the shapes, the screen's capacity,
and the four systems on a tiny run (same seed, same frames)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from easerve.experiments.setup import load_setup
from easerve.experiments.shape_control import controller_shapes, screened_capacity_hz, shapes
from easerve.experiments.shift_control import SHIFT_SYSTEMS, Segments, Traffic
from easerve_core import Deployment, StageGroup
from easerve_core.controller import Band, PlanTable
from easerve_core.has.screen import screen
from easerve_core.workload.shapes import StepArrivals


def _table() -> PlanTable:
    dep = Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                     decode=StageGroup(num_workers=1))
    return PlanTable(tuple(Band(rate_hz=r, deployment=dep.with_(max_encode_batch=b))
                           for r, b in ((1.0, 2), (2.0, 4), (3.0, 8))))


def test_phases_are_the_runs_of_grid_times_one_band_plans_for():
    shift = Traffic(Segments(300.0, (1.0, 3.0, 1.0, 3.0)).rate_at, 2.0, 3.0)
    assert shift.phases(_table(), 1190.0) == ((0.0, 0), (300.0, 2), (600.0, 0), (900.0, 2))
    # an edge between two grid times is read at the next one; 1.9 req/s is band 1's
    step = Traffic(StepArrivals(rate_before_hz=1.9, rate_after_hz=2.5, at_s=302.0).rate_at, 2.0, 2.5)
    assert step.phases(_table(), 400.0) == ((0.0, 1), (305.0, 2))


def test_the_shapes_swing_between_half_and_one_and_a_half_the_mean():
    got = shapes(2.0, 1200.0)
    at = {name: [float(x) for x in s.rate_at(np.array([0.0, 300.0, 450.0, 600.0, 1200.0]))]
          for name, s in got.items()}
    assert at["step"] == [1.0, 1.0, 1.0, 3.0, 3.0]
    assert at["spike"] == [1.0, 1.0, 3.0, 1.0, 1.0]  # 1.5 m from 400 s for 200 s
    assert at["diurnal"] == pytest.approx([2.0, 3.0, 2.0 + np.sin(0.75 * np.pi), 2.0, 2.0])
    assert at["drift"] == pytest.approx([1.0, 1.5, 1.75, 2.0, 3.0])


def test_the_screened_capacity_is_the_highest_rate_some_allocation_carries():
    setup = load_setup("image", anchored=True)
    cap = screened_capacity_hz(setup)
    screen(setup.profile, setup.plan.cluster, setup.mix, rate_hz=cap, slo=setup.slos["moderate"])
    with pytest.raises(ValueError, match="no allocation carries"):
        screen(setup.profile, setup.plan.cluster, setup.mix, rate_hz=cap * 1.001,
               slo=setup.slos["moderate"])


def test_four_systems_on_four_shapes_the_same_seed_the_same_frames():
    setups = {"image": load_setup("image", anchored=True)}
    runs = [controller_shapes(setups, timeline_s=160.0, trials=2) for _ in range(2)]
    systems = runs[0]["systems"]
    assert list(systems["shape"].unique()) == ["step", "spike", "diurnal", "drift"]
    assert [list(g["system"]) for _, g in systems.groupby("shape", sort=False)] == [list(SHIFT_SYSTEMS)] * 4
    statics = systems[systems["system"].str.startswith("static")]
    assert (statics["decisions"] == 0).all()
    assert len(runs[0]["plan_tables"].query("chosen")) == 3  # one choice per band
    for key in runs[0]:
        pd.testing.assert_frame_equal(runs[0][key], runs[1][key])


def test_held_gpu_seconds_count_serving_draining_and_joining_gpus_and_free_the_rest():
    from easerve.experiments.shift_control import held_gpu_s
    from easerve_core import Cluster

    start = Deployment(encode=StageGroup(num_workers=2), prefill=StageGroup(num_workers=1),
                       decode=StageGroup(num_workers=1))  # E0 E1 | P0 | D0 on GPUs 0 1 | 2 | 3
    cluster = Cluster(gpu="test-gpu", num_gpus=8)
    nan = float("nan")
    meta = {  # at t = 10 a move to E0 | P1 | D1 on GPUs 0 | 1 | 2: GPU 3 is released
        "retired": [{"stage": "encode", "worker": 1, "drain_end_s": 10.05},
                    {"stage": "prefill", "worker": 0, "drain_end_s": 10.5},
                    {"stage": "decode", "worker": 0, "drain_end_s": 12.0}],
        "reroles": [{"to": "prefill", "worker": 1, "gpus": [1], "drain_start_s": 10.0, "cancelled_s": nan},
                    {"to": "decode", "worker": 1, "gpus": [2], "drain_start_s": 10.0, "cancelled_s": nan},
                    # a joiner cancelled before it served holds GPU 4 from 15 to 18 s
                    {"to": "encode", "worker": -1, "gpus": [4], "drain_start_s": 15.0, "cancelled_s": 18.0}],
    }
    # GPUs 0-2 held all 30 s (a joiner's span overlaps its GPU's drain), GPU 3 until its drain
    # ends at 12 s, GPU 4 for 3 s
    assert held_gpu_s(start, cluster, meta, 30.0) == pytest.approx(30 * 3 + 12 + 3)
    assert held_gpu_s(start, cluster, {}, 30.0) == pytest.approx(4 * 30)  # no controller


def test_engines_per_gpu_count_each_gpu_s_distinct_workers_over_the_run():
    from easerve.experiments.shift_control import engines_per_gpu
    from easerve_core import Cluster

    start = Deployment(encode=StageGroup(num_workers=2), prefill=StageGroup(num_workers=1),
                       decode=StageGroup(num_workers=1))  # E0 E1 | P0 | D0 on GPUs 0 1 | 2 | 3
    cluster = Cluster(gpu="test-gpu", num_gpus=8)
    away = [{"to": "prefill", "gpus": [1]}, {"to": "decode", "gpus": [2]}]
    back = [{"to": "encode+prefill", "gpus": [1]}, {"to": "prefill", "gpus": [2]}]  # the start's roles
    assert engines_per_gpu(start, cluster, {}) == 1  # no controller: the serving engine alone
    assert engines_per_gpu(start, cluster, {"reroles": away}) == 2
    assert engines_per_gpu(start, cluster, {"reroles": away + back}) == 2  # a layout met again
    wide = [{"to": "decode", "gpus": [1, 2]}]  # another group (a TP-2 decoder): another engine
    assert engines_per_gpu(start, cluster, {"reroles": away + back + wide}) == 3


def test_the_frugal_planner_puts_each_band_on_the_fewest_gpus_within_the_tie():
    from easerve.experiments.plan_tables import frugal_plan_table

    setup = load_setup("image", anchored=True)
    table, rows = frugal_plan_table(setup, (1.0, 2.5), segment_s=60.0, trials=2)
    for band, (rate, g) in zip(table.bands, rows.groupby("rate_hz", sort=False), strict=True):
        assert band.rate_hz == rate
        best = g["best_goodput_rps"].max()
        fewest = g.loc[g["best_goodput_rps"] >= best * 0.98, "num_gpus"].min()
        assert band.deployment.num_gpus == fewest == int(g.loc[g["chosen"], "num_gpus"].iloc[0])
    # LLaVA-34B's LM needs TP 2 for Decode and for Prefill (its own worker, or local on a TP-2
    # encoder): no allocation under 4 GPUs; 1 req/s is served on fewer than 8
    assert rows["num_gpus"].min() >= 4 and table.bands[0].deployment.num_gpus < 8
