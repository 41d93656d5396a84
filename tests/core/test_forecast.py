"""The predictive planner: forecasters by hand, a controller that moves ahead, weighted signals."""

from __future__ import annotations

import numpy as np
import pytest

from easerve_core.controller import Band, Controller, ControllerSettings, PlanTable
from easerve_core.forecast import make_forecaster
from easerve_core.oracle import ScriptedController
from tests.core.test_controller import SETTINGS, TABLE, _dep, _drive


def test_holt_follows_a_ramp_and_projects_it_ahead():
    holt = make_forecaster("holt", alpha=0.5, beta=0.3, step_s=5.0)
    # x = 1: level 1, trend 0; x = 2: level 1.5, trend 0.15, 10 s (two checks) ahead 1.8;
    # x = 3: level 2.325, trend 0.3525, ahead 3.03
    assert [holt(x, 10.0) for x in (1.0, 2.0, 3.0)] == pytest.approx([1.0, 1.8, 3.03])
    assert np.isnan(holt(float("nan"), 10.0))  # no estimate yet: no update


def test_ewma_smooths_and_projects_nothing():
    ewma = make_forecaster("ewma", alpha=0.5, beta=0.3, step_s=5.0)
    assert [ewma(x, 100.0) for x in (2.0, 4.0, 4.0)] == [2.0, 3.0, 3.5]


def test_an_unknown_forecaster_is_refused_by_name():
    with pytest.raises(ValueError, match=r"controller\.forecaster 'arima'; known: ewma, holt, none"):
        ControllerSettings(forecaster="arima")
    with pytest.raises(ValueError, match=r"controller\.forecast_alpha"):
        ControllerSettings(forecaster="holt", forecast_alpha=1.5)
    with pytest.raises(ValueError, match="unknown controller field"):
        ControllerSettings.from_dict({"forecast": "holt"})


def _ramp(end_s: float) -> np.ndarray:
    """1 req/s to t = 300, then a linear climb to 3 req/s at t = 600, then 3 req/s (thinned grid)."""
    t, out = 0.05, []
    while t < end_s:
        out.append(t)
        rate = 1.0 if t < 300 else min(3.0, 1.0 + 2.0 * (t - 300) / 300)
        t += 1.0 / rate
    return np.array(out)


def test_the_predictive_controller_moves_up_ahead_of_the_reactive_one():
    arrivals = _ramp(900.0)
    reactive = _drive(Controller(TABLE, SETTINGS), arrivals, 900.0)
    holt = ControllerSettings(**{**SETTINGS.to_dict(), "forecaster": "holt", "lead_s": 30.0})
    predictive = _drive(Controller(TABLE, holt), arrivals, 900.0)
    assert [d.band for d in reactive][:1] == [d.band for d in predictive][:1] == [1]
    assert predictive[0].at_s < reactive[0].at_s
    # with no lead, Holt's forecast is its level: no earlier than the measured rate
    level = ControllerSettings(**{**SETTINGS.to_dict(), "forecaster": "holt", "lead_s": 0.0})
    assert _drive(Controller(TABLE, level), arrivals, 900.0)[0].at_s >= predictive[0].at_s
    # the same observations, the same decisions
    assert _drive(Controller(TABLE, holt), arrivals, 900.0) == predictive


def test_reactive_settings_keep_their_old_json():
    assert "forecaster" not in ControllerSettings().to_dict()
    holt = ControllerSettings(forecaster="holt", lead_s=26.0)
    assert ControllerSettings.from_dict(holt.to_dict()) == holt


def test_a_table_planned_on_output_tokens_moves_when_outputs_lengthen_at_one_request_rate():
    # 1 req/s throughout; outputs of 40 tokens, then of 600 from t = 300: 40 -> 600 tokens/s
    table = PlanTable((Band(rate_hz=40.0, deployment=_dep(8)), Band(rate_hz=600.0, deployment=_dep(2))),
                      signal="output_tokens")
    assert PlanTable.from_dict(table.to_dict()) == table
    controller = Controller(table, SETTINGS)
    times = np.arange(0.5, 900.0, 1.0)
    for t in times:
        while controller.next_deadline() <= t:
            controller.poll(controller.next_deadline())
        controller.arrive(float(t), 40.0 if t < 300 else 600.0)
    (decision,) = controller.decisions
    assert (decision.from_band, decision.band) == (0, 1)
    # the window holds more than 46 tokens/s (40 plus the margin) from the check at 305 s; settle 60 s
    assert decision.at_s == 365.0
    assert controller.rate_hz(900.0) == pytest.approx(600.0)


def test_an_unknown_signal_is_refused_by_name():
    with pytest.raises(ValueError, match="plan table: signal 'watts'"):
        PlanTable((Band(rate_hz=1.0, deployment=_dep(2)),), signal="watts")


def test_the_oracle_leads_its_script():
    oracle = ScriptedController(TABLE, ((300.0, 2), (600.0, 0)), lead_s=30.0)
    assert oracle.next_deadline() == 270.0
    assert oracle.poll(270.0).band == 2
    assert oracle.next_deadline() == 570.0
