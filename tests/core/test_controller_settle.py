"""Rule 4's waiver (``settle_z``): a move whose signal is far past its threshold need not wait the settle.

Each decision time is checked against the rule written out again here in numpy:
the window's estimate, its standard error, and the first check at which the
signal stands ``settle_z`` standard errors past the hysteresis edge.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from easerve_core import Deployment, StageGroup
from easerve_core.controller import Band, Controller, ControllerSettings, PlanTable


def _dep(b: int) -> Deployment:
    return Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                      decode=StageGroup(num_workers=1), max_encode_batch=b)


#: two mixes: images of ~1,000 tokens, then videos of 3,000 (a ``*_mean`` signal's bands)
MIX = PlanTable((Band(rate_hz=1000.0, deployment=_dep(2)), Band(rate_hz=3000.0, deployment=_dep(8))),
                signal="mm_tokens_mean")
RATES = PlanTable((Band(rate_hz=1.0, deployment=_dep(2)), Band(rate_hz=3.0, deployment=_dep(8))))
BASE = dict(window_s=60.0, check_every_s=5.0, hysteresis_frac=0.15, settle_s=60.0, dwell_s=120.0,
            min_arrivals=20)


def _drive(controller: Controller, arrivals: np.ndarray, weights: np.ndarray, end_s: float) -> list:
    i = 0
    while controller.next_deadline() <= end_s:
        due = controller.next_deadline()
        while i < len(arrivals) and arrivals[i] <= due:
            controller.arrive(float(arrivals[i]), float(weights[i]))
            i += 1
        controller.poll(due)
    return controller.decisions


def _mix_step() -> tuple[np.ndarray, np.ndarray]:
    """2 req/s throughout; 900 and 1,100 tokens in turn before 300 s, 3,000 from then on."""
    arrivals = np.arange(0.0, 900.0, 0.5)
    weights = np.where(arrivals < 300.0, np.where(np.arange(arrivals.size) % 2 == 0, 900.0, 1100.0), 3000.0)
    return arrivals, weights


def _first_decisive_check(arrivals: np.ndarray, weights: np.ndarray, *, z: float, edge: float,
                          mean: bool) -> float:
    """The rule again: the first check (every 5 s, past the 120 s dwell) whose 60 s window's estimate
    is past ``edge`` by ``z`` standard errors."""
    for t in np.arange(125.0, 900.0, 5.0):
        w = weights[(arrivals > t - 60.0) & (arrivals <= t)]
        if mean:
            estimate, se = w.mean(), w.std(ddof=1) / math.sqrt(w.size)
        else:
            estimate, se = w.sum() / 60.0, math.sqrt((w * w).sum()) / 60.0
        if estimate > edge and estimate - edge >= z * se:
            return float(t)
    raise AssertionError("never decisive")


def test_a_step_in_the_mix_moves_as_soon_as_the_window_s_mean_is_three_errors_past_the_edge():
    arrivals, weights = _mix_step()
    waited = _drive(Controller(MIX, ControllerSettings(**BASE)), arrivals, weights, 900.0)
    fast = _drive(Controller(MIX, ControllerSettings(**BASE, settle_z=3.0)), arrivals, weights, 900.0)
    assert [(d.from_band, d.band, d.reason) for d in waited] == [(0, 1, "rate")]
    assert [(d.from_band, d.band, d.reason) for d in fast] == [(0, 1, "rate")]
    # the mean passes the edge (1,000 x 1.15) at the check of 305 s: with the settle the decision
    # is 60 s later; with the waiver, once the mean is 3 standard errors past it
    assert waited[0].at_s == pytest.approx(365.0)
    expected = _first_decisive_check(arrivals, weights, z=3.0, edge=1150.0, mean=True)
    assert fast[0].at_s == pytest.approx(expected)
    assert 305.0 < expected < 330.0


def test_a_step_in_rate_is_waived_on_the_poisson_error_of_the_window_s_count():
    arrivals = np.concatenate([np.arange(0.0, 300.0, 1.0), np.arange(300.0, 900.0, 1.0 / 3.0)])
    weights = np.ones_like(arrivals)
    waited = _drive(Controller(RATES, ControllerSettings(**BASE)), arrivals, weights, 900.0)
    fast = _drive(Controller(RATES, ControllerSettings(**BASE, settle_z=3.0)), arrivals, weights, 900.0)
    expected = _first_decisive_check(arrivals, weights, z=3.0, edge=1.15, mean=False)
    assert [d.band for d in fast] == [1] and fast[0].at_s == pytest.approx(expected)
    assert fast[0].at_s < waited[0].at_s


def test_noise_around_one_mix_never_moves_with_the_waiver():
    rng = np.random.default_rng(7)
    arrivals = np.sort(rng.uniform(0.0, 1800.0, 3600))
    weights = rng.normal(1000.0, 400.0, arrivals.size).clip(100.0)
    assert _drive(Controller(MIX, ControllerSettings(**BASE, settle_z=3.0)), arrivals, weights, 1800.0) == []


def test_a_window_of_one_arrival_has_no_error_to_judge_by():
    controller = Controller(MIX, ControllerSettings(**BASE, settle_z=3.0))
    controller.arrive(1.0, 3000.0)
    assert controller._standard_error(5.0) == math.inf


def test_settle_z_is_written_only_when_set_and_checked():
    assert "settle_z" not in ControllerSettings().to_dict()
    settings = ControllerSettings(settle_z=3.0)
    assert settings.to_dict()["settle_z"] == 3.0
    assert ControllerSettings.from_dict(settings.to_dict()) == settings
    with pytest.raises(ValueError, match="settle_z"):
        ControllerSettings(settle_z=-1.0)
    with pytest.raises(ValueError, match="settle_z"):
        ControllerSettings(settle_z=0.0)
