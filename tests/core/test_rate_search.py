"""The capacity search: bracket, then bisect, the highest sustained arrival rate."""

from __future__ import annotations

import pytest

from easerve_core.rate_search import (
    Capacity,
    Direction,
    GeometricBisection,
    Outcome,
    Phase,
    Probe,
    RateBisection,
    RateLadder,
    find_capacity,
)


def _drive(search, sustained) -> list[Probe]:
    probes = []
    while (probe := search.next_probe()) is not None:
        probes.append(probe)
        search.observe(probe.rate_hz, sustained(probe.rate_hz))
    return probes


def test_doubles_until_a_failure_then_bisects_to_the_tolerance():
    search = RateBisection(1.0, max_rate_hz=64.0, rel_tol_frac=0.05)
    probes = _drive(search, lambda r: r <= 3.3)
    assert [(p.rate_hz, p.phase, p.step) for p in probes] == [
        (1.0, Phase.BRACKET, 0), (2.0, Phase.BRACKET, 1), (4.0, Phase.BRACKET, 2),
        (3.0, Phase.BISECT, 3), (3.5, Phase.BISECT, 4), (3.25, Phase.BISECT, 5), (3.375, Phase.BISECT, 6)]
    assert search.result() == Capacity(capacity_hz=3.25, failed_hz=3.375, outcome=Outcome.FOUND,
                                       num_steps=7)


def test_halves_from_a_failing_start():
    search = RateBisection(8.0, max_rate_hz=8.0, rel_tol_frac=0.1)
    probes = _drive(search, lambda r: r <= 1.5)
    assert [p.rate_hz for p in probes] == [8.0, 4.0, 2.0, 1.0, 1.5, 1.75, 1.625]
    assert search.result() == Capacity(capacity_hz=1.5, failed_hz=1.625, outcome=Outcome.FOUND, num_steps=7)


def test_censored_at_the_max_rate_none_below_the_min_and_out_of_steps():
    up = RateBisection(1.0, max_rate_hz=5.0)
    assert [p.rate_hz for p in _drive(up, lambda r: True)] == [1.0, 2.0, 4.0, 5.0]
    assert up.result() == Capacity(capacity_hz=5.0, failed_hz=None, outcome=Outcome.CENSORED, num_steps=4)
    down = RateBisection(1.0, max_rate_hz=1.0, min_rate_hz=0.3)
    assert [p.rate_hz for p in _drive(down, lambda r: False)] == [1.0, 0.5]
    assert down.result() == Capacity(capacity_hz=0.0, failed_hz=0.5, outcome=Outcome.NONE, num_steps=2)
    short = RateBisection(1.0, max_rate_hz=64.0, max_steps=3)
    _drive(short, lambda r: r < 3.0)
    assert short.result() == Capacity(capacity_hz=2.0, failed_hz=4.0, outcome=Outcome.STEPS, num_steps=3)


def test_a_pending_probe_repeats_until_observed_and_only_it_may_be_observed():
    search = RateBisection(2.0, max_rate_hz=8.0)
    assert search.next_probe() == search.next_probe() == Probe(2.0, Phase.BRACKET, 0)
    with pytest.raises(ValueError, match=r"no probe at 3\.0"):
        search.observe(3.0, True)
    with pytest.raises(ValueError, match="not over"):
        search.result()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"start_hz": 0.0}, "start_hz must be > 0"),
    ({"max_rate_hz": 0.5}, "max_rate_hz must be >= start_hz"),
    ({"min_rate_hz": 2.0}, "min_rate_hz must be <= start_hz"),
    ({"growth": 1.0}, "growth must be > 1"),
    ({"rel_tol_frac": 0.0}, "rel_tol_frac must be > 0"),
    ({"rel_tol_frac": 1.0}, "rel_tol_frac must be < 1"),
    ({"max_steps": 0}, "max_steps must be >= 1"),
])
def test_bad_settings_name_the_argument(kwargs, message):
    args = {"start_hz": 1.0, "max_rate_hz": 4.0, **kwargs}
    with pytest.raises(ValueError, match=message):
        RateBisection(args.pop("start_hz"), **args)


def test_find_capacity_drives_any_strategy_in_the_order_it_proposes():
    asked = []
    answer = find_capacity(RateBisection(1.0, max_rate_hz=64.0, rel_tol_frac=0.05),
                           lambda r: asked.append(r) or r <= 3.3)
    assert asked == [1.0, 2.0, 4.0, 3.0, 3.5, 3.25, 3.375]
    assert answer == Capacity(capacity_hz=3.25, failed_hz=3.375, outcome=Outcome.FOUND, num_steps=7)


def test_geometric_bisection_halves_the_given_bracket_in_log_space_a_fixed_number_of_times():
    search = GeometricBisection(1.0, 16.0, num_steps=3)
    probes = _drive(search, lambda r: r <= 3.0)
    assert [(p.rate_hz, p.phase, p.step) for p in probes] == [
        (4.0, Phase.BISECT, 0), (2.0, Phase.BISECT, 1), (8.0 ** 0.5, Phase.BISECT, 2)]
    assert search.result() == Capacity(capacity_hz=8.0 ** 0.5, failed_hz=4.0, outcome=Outcome.FOUND,
                                       num_steps=3)
    # the same floating-point steps as the hand loop it replaces
    lo, hi = 1e-3, 1e3
    for _ in range(40):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if mid <= 7.3 else (lo, mid)
    assert find_capacity(GeometricBisection(1e-3, 1e3, num_steps=40), lambda r: r <= 7.3).capacity_hz == lo
    nothing = find_capacity(GeometricBisection(1e-3, 1e3, num_steps=5), lambda r: False)
    assert (nothing.capacity_hz, nothing.outcome) == (1e-3, Outcome.NONE)
    everything = find_capacity(GeometricBisection(1.0, 4.0, num_steps=2), lambda r: True)
    assert everything.outcome is Outcome.CENSORED
    with pytest.raises(ValueError, match="hi_hz must be > lo_hz"):
        GeometricBisection(2.0, 1.0, num_steps=1)


def test_a_down_ladder_stops_at_the_first_rate_that_holds():
    search = RateLadder((8.0, 4.0, 2.0, 1.0), direction=Direction.DOWN)
    assert [(p.rate_hz, p.phase, p.step) for p in _drive(search, lambda r: r <= 2.5)] == [
        (8.0, Phase.LADDER, 0), (4.0, Phase.LADDER, 1), (2.0, Phase.LADDER, 2)]
    assert search.result() == Capacity(capacity_hz=2.0, failed_hz=4.0, outcome=Outcome.FOUND, num_steps=3)
    top = find_capacity(RateLadder((8.0, 4.0), direction="down"), lambda r: True)
    assert top == Capacity(capacity_hz=8.0, failed_hz=None, outcome=Outcome.CENSORED, num_steps=1)
    none = find_capacity(RateLadder((8.0, 4.0), direction="down"), lambda r: False)
    assert none == Capacity(capacity_hz=0.0, failed_hz=4.0, outcome=Outcome.NONE, num_steps=2)


def test_an_up_ladder_stops_at_the_first_failure_and_answers_the_last_rate_that_held():
    search = RateLadder((1.0, 2.0, 3.0, 4.0), direction=Direction.UP)
    assert [p.rate_hz for p in _drive(search, lambda r: r != 3.0)] == [1.0, 2.0, 3.0]
    assert search.result() == Capacity(capacity_hz=2.0, failed_hz=3.0, outcome=Outcome.FOUND, num_steps=3)
    assert find_capacity(RateLadder((), direction="up"), lambda r: True).outcome is Outcome.NONE
    assert find_capacity(RateLadder((1.0, 2.0), direction="up"), lambda r: True).outcome is Outcome.CENSORED
    with pytest.raises(ValueError, match="strictly rising"):
        RateLadder((2.0, 1.0), direction="up")
    with pytest.raises(ValueError, match="strictly falling"):
        RateLadder((1.0, 1.0), direction="down")
