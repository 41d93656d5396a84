"""Rule 1's cut (``cut_z``): the window starts after its most likely change point when the step is plain.

Each decision time is checked against the rule written out again here, one cut at
a time: the two-sample test at every cut of the 60 s window that leaves
``min_arrivals`` on either side, the window from the best cut on when it passes
``cut_z``, then rule 4's waiver on that window's estimate and error.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from easerve_core.controller import Controller, ControllerSettings
from tests.core.test_controller_settle import BASE, MIX, RATES, _drive, _mix_step


def _window(arrivals: np.ndarray, weights: np.ndarray, now: float, *, z: float, mean: bool,
            least: int = 20) -> tuple[np.ndarray, float]:
    """The rule again: the window's weights and span, cut where the test says so."""
    inside = (arrivals > now - 60.0) & (arrivals <= now)
    t, w = arrivals[inside], weights[inside]
    best, best_k, best_at = -1.0, 0, now - 60.0
    for k in range(least, t.size - least + 1):
        old, new = w[:k], w[k:]
        at = (t[k - 1] + t[k]) / 2
        if mean:
            gap = new.mean() - old.mean()
            error = math.sqrt(old.var(ddof=1) / old.size + new.var(ddof=1) / new.size)
        else:
            s_old, s_new = at - (now - 60.0), now - at
            gap = new.sum() / s_new - old.sum() / s_old
            error = math.sqrt((old * old).sum() / s_old ** 2 + (new * new).sum() / s_new ** 2)
        score = abs(gap) / error if error > 0 else (math.inf if gap else 0.0)
        if score > best:
            best, best_k, best_at = score, k, at
    if best >= z:
        return w[best_k:], now - best_at
    return w, 60.0


def _first_decisive_check(arrivals: np.ndarray, weights: np.ndarray, *, cut_z: float, settle_z: float,
                          edge: float, mean: bool) -> float:
    """The first check (every 5 s, past the 120 s dwell) whose cut window is ``settle_z`` standard
    errors past ``edge``."""
    for t in np.arange(125.0, 900.0, 5.0):
        w, span = _window(arrivals, weights, float(t), z=cut_z, mean=mean)
        if mean:
            estimate, se = w.mean(), w.std(ddof=1) / math.sqrt(w.size)
        else:
            estimate, se = w.sum() / span, math.sqrt((w * w).sum()) / span
        if estimate > edge and estimate - edge >= settle_z * se:
            return float(t)
    raise AssertionError("never decisive")


def _noisy_mix_step(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Poisson arrivals at 2 req/s; images of 1,000 +- 400 tokens before 300 s, videos of 3,000
    +- 300 after."""
    rng = np.random.default_rng(seed)
    arrivals = np.sort(rng.uniform(0.0, 900.0, 1800))
    weights = np.where(arrivals < 300.0, rng.normal(1000.0, 400.0, arrivals.size),
                       rng.normal(3000.0, 300.0, arrivals.size)).clip(100.0)
    return arrivals, weights


@pytest.mark.parametrize("arrivals_weights", [_mix_step(), _noisy_mix_step(3)], ids=["even", "noisy"])
def test_a_step_in_the_mix_moves_once_the_cut_window_is_past_the_edge(arrivals_weights) -> None:
    arrivals, weights = arrivals_weights
    whole = _drive(Controller(MIX, ControllerSettings(**BASE, settle_z=3.0)), arrivals, weights, 900.0)
    settings = ControllerSettings(**BASE, settle_z=3.0, cut_z=4.0)
    cut = _drive(Controller(MIX, settings), arrivals, weights, 900.0)
    assert [(d.from_band, d.band, d.reason) for d in cut] == [(0, 1, "rate")]
    expected = _first_decisive_check(arrivals, weights, cut_z=4.0, settle_z=3.0, edge=1150.0, mean=True)
    assert cut[0].at_s == pytest.approx(expected)
    # 2 req/s leave 20 arrivals on the new side 10 s after the step: the cut window sees only videos
    assert expected <= 315.0 and cut[0].at_s < whole[0].at_s


def test_a_step_in_rate_cuts_on_the_poisson_error_of_each_side_s_count() -> None:
    arrivals = np.concatenate([np.arange(0.0, 300.0, 1.0), np.arange(300.0, 900.0, 1.0 / 3.0)])
    weights = np.ones_like(arrivals)
    whole = _drive(Controller(RATES, ControllerSettings(**BASE, settle_z=3.0)), arrivals, weights, 900.0)
    cut = _drive(Controller(RATES, ControllerSettings(**BASE, settle_z=3.0, cut_z=4.0)), arrivals, weights,
                 900.0)
    expected = _first_decisive_check(arrivals, weights, cut_z=4.0, settle_z=3.0, edge=1.15, mean=False)
    assert [d.band for d in cut] == [1] and cut[0].at_s == pytest.approx(expected)
    assert cut[0].at_s < whole[0].at_s


def test_the_cut_window_s_rate_is_the_new_side_s() -> None:
    arrivals, weights = _mix_step()
    controller = Controller(MIX, ControllerSettings(**BASE, cut_z=4.0))
    for a, w in zip(arrivals[arrivals <= 330.0], weights[arrivals <= 330.0], strict=True):
        controller.arrive(float(a), float(w))
    # 60 arrivals since the step, every one 3,000 tokens; the window's 60 before it are not averaged in
    assert controller.rate_hz(330.0) == pytest.approx(3000.0)
    assert controller._standard_error(330.0) == 0.0


@pytest.mark.parametrize("seed", [7, 8])
def test_noise_around_one_mix_or_one_rate_never_moves_with_the_cut(seed: int) -> None:
    rng = np.random.default_rng(seed)
    settings = ControllerSettings(**BASE, settle_z=3.0, cut_z=4.0)
    arrivals = np.sort(rng.uniform(0.0, 1800.0, 3600))
    weights = rng.normal(1000.0, 400.0, arrivals.size).clip(100.0)
    assert _drive(Controller(MIX, settings), arrivals, weights, 1800.0) == []
    rate = np.cumsum(rng.exponential(1.0 / 1.0, 1800))  # Poisson at the low band's 1 req/s
    assert _drive(Controller(RATES, settings), rate, np.ones_like(rate), 1800.0) == []


def test_too_few_arrivals_for_both_sides_leave_the_window_whole() -> None:
    controller = Controller(MIX, ControllerSettings(**BASE, cut_z=4.0))
    for i in range(39):  # one short of 20 on either side
        controller.arrive(float(i), 1000.0 if i < 20 else 3000.0)
    assert controller.rate_hz(40.0) == pytest.approx((20 * 1000.0 + 19 * 3000.0) / 39)


def test_cut_z_is_written_only_when_set_and_checked() -> None:
    assert "cut_z" not in ControllerSettings().to_dict()
    assert ControllerSettings(cut_z=4.0).to_dict()["cut_z"] == 4.0
    for bad in (-1.0, 0.0):
        with pytest.raises(ValueError, match="cut_z"):
            ControllerSettings(cut_z=bad)
