"""The controller with bands planned in the loop: the same rules, bands planned once, when needed."""

from __future__ import annotations

import numpy as np
import pytest

from easerve_core import Deployment
from easerve_core.controller import Band, Controller, PlanTable
from easerve_core.replan import ReplanningController, rate_grid
from tests.core.test_controller import SETTINGS, _dep, _drive, _steady


class _Planner:
    """A planner that records what it is asked: B = 2 per req/s of the rate, rounded."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def __call__(self, rate_hz: float) -> Deployment:
        self.asked.append(rate_hz)
        return _dep(max(1, round(2 * rate_hz)))


def test_the_grid_runs_in_steps_to_the_first_rate_that_reaches_the_top():
    assert rate_grid(0.5, 2.0) == (0.5, 1.0, 1.5, 2.0)
    assert rate_grid(0.5, 2.2) == (0.5, 1.0, 1.5, 2.0, 2.5)
    assert rate_grid(0.1, 0.3) == (0.1, 0.2, 0.3)
    with pytest.raises(ValueError, match=r"replan\.step_hz"):
        rate_grid(0.0, 2.0)


def test_a_step_plans_one_band_once_it_settles_and_decides_as_the_table_controller():
    planner = _Planner()
    controller = ReplanningController(planner, step_hz=1.0, max_rate_hz=4.0, start_rate_hz=1.0,
                                      settings=SETTINGS)
    assert planner.asked == [1.0]  # the start band, at construction
    arrivals = np.concatenate([_steady(1.0, 0.0, 300.0), _steady(3.0, 300.0, 900.0)])
    decisions = _drive(controller, arrivals, 900.0)
    assert planner.asked == [1.0, 3.0]  # the settled target, once; nothing between
    table = PlanTable(tuple(Band(rate_hz=r, deployment=_dep(round(2 * r))) for r in (1.0, 2.0, 3.0, 4.0)))
    same = _drive(Controller(table, SETTINGS), arrivals, 900.0)
    assert [(d.at_s, d.from_band, d.band, d.reason, d.deployment) for d in decisions] == \
        [(d.at_s, d.from_band, d.band, d.reason, d.deployment) for d in same]
    planned = [(b.rate_hz, b.deployment.max_encode_batch) for b in controller.table.bands]
    assert planned == [(1.0, 2), (3.0, 6)]


def test_a_planned_band_is_asked_once_however_often_the_run_returns_to_it():
    planner = _Planner()
    controller = ReplanningController(planner, step_hz=1.0, max_rate_hz=3.0, start_rate_hz=1.0,
                                      settings=SETTINGS)
    # 1 and 3 req/s alternating every 400 s, twice: up, down, up, down
    arrivals = np.concatenate([_steady(r, 400.0 * i, 400.0 * (i + 1)) for i, r in enumerate((1, 3, 1, 3, 1))])
    decisions = _drive(controller, arrivals, 2000.0)
    assert [d.band for d in decisions] == [2, 0, 2, 0]  # down to the 1 req/s band itself (issue 34)
    assert sorted(planner.asked) == [1.0, 3.0] and len(planner.asked) == 2  # each band once
    assert [b.rate_hz for b in controller.planned] == planner.asked


def test_the_rate_past_the_grid_takes_the_top_band_and_a_bad_planner_is_named():
    controller = ReplanningController(_Planner(), step_hz=1.0, max_rate_hz=2.0, start_rate_hz=9.0)
    assert (controller.band, controller.table.bands[0].rate_hz) == (1, 2.0)

    def broken(rate_hz: float) -> Deployment:
        return "E1 P1 D1" if rate_hz > 1 else _dep(1)  # type: ignore[return-value]

    steady = ReplanningController(broken, step_hz=1.0, max_rate_hz=3.0, start_rate_hz=1.0, settings=SETTINGS)
    with pytest.raises(ValueError, match="replan: the planner gave str for 3 req/s, not a Deployment"):
        _drive(steady, np.concatenate([_steady(1.0, 0.0, 300.0), _steady(3.0, 300.0, 900.0)]), 900.0)
