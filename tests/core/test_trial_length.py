"""The stream-length rule: seconds of arrivals, the SLO's growth horizon, request bounds."""

from __future__ import annotations

import math

import pytest

from easerve_core.trial_length import TrialLength


def test_horizon_is_the_floor_or_19_ttft_limits() -> None:
    rule = TrialLength(trial_s=60.0)
    assert rule.horizon_s(None) == 60.0
    assert rule.horizon_s(1.0) == 60.0  # 19 s < the floor
    assert rule.horizon_s(10.0) == pytest.approx(190.0)  # (1 - 0.05) / 0.05 * 10


def test_a_queue_growing_at_the_growth_frac_reaches_the_limit_by_the_horizon() -> None:
    """The derivation in the module docstring, checked by stepping a fluid queue."""
    rate, limit, g = 10.0, 4.0, 0.05
    horizon = TrialLength(trial_s=1.0, growth_frac=g).horizon_s(limit)
    served = (1 - g) * rate
    backlog = g * rate * horizon  # requests waiting when the last one arrives
    assert backlog / served == pytest.approx(limit)


def test_requests_at_a_rate_are_bounded() -> None:
    rule = TrialLength(trial_s=60.0, min_requests=100, max_requests=1000)
    assert rule.requests_at(0.5) == 100  # 30 requests < the floor
    assert rule.requests_at(2.0, ttft_limit_s=8.86) == math.ceil(2.0 * 19 * 8.86)
    assert rule.requests_at(50.0) == 1000 and rule.capped(50.0)
    assert not rule.capped(2.0)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"trial_s": 0.0}, "trial-s"), ({"trial_s": -1.0}, "trial-s"), ({"trial_s": math.nan}, "trial-s"),
    ({"trial_s": 1e12}, "trial-s"), ({"growth_frac": 1.0}, "growth_frac"),
    ({"min_requests": 0}, "min-requests"), ({"min_requests": 10, "max_requests": 5}, "max_requests"),
])
def test_bad_rules_name_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        TrialLength(**kwargs)  # type: ignore[arg-type]
