"""The goodput sweep's peak refinement."""

from __future__ import annotations

import pytest

from easerve.experiments.setup import load_setup
from easerve.experiments.sweep import Scale, extend_rates, goodput_sweep, peak_goodput, refine_rates


def test_refine_rates_bisects_both_sides_of_an_inner_peak():
    assert refine_rates([0.5, 0.75, 1.0, 1.5], [0.5, 0.71, 0.46, 0.15]) == [0.625, 0.875]
    # unsorted input: the same bracket
    assert refine_rates([1.0, 0.5, 1.5, 0.75], [0.46, 0.5, 0.15, 0.71]) == [0.625, 0.875]


def test_refine_rates_at_the_grids_edges_goes_inward_only():
    assert refine_rates([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == [2.5]
    assert refine_rates([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == [1.5]
    assert refine_rates([2.0], [1.0]) == []


def test_refine_rates_takes_the_lowest_of_tied_peaks_and_skips_known_rates():
    assert refine_rates([1.0, 2.0, 3.0], [1.0, 1.0, 0.5]) == [1.5]
    assert refine_rates([1.0, 1.5, 2.0, 3.0], [1.0, 0.9, 1.0, 0.5]) == [1.25]


def test_refine_rates_checks_its_input():
    with pytest.raises(ValueError, match="equally long"):
        refine_rates([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="not empty"):
        refine_rates([], [])


def test_sweep_refines_each_curve_by_its_own_peak_and_the_peak_can_move_there():
    audio = load_setup("audio", anchored=True)
    asked: list[tuple[str, float]] = []

    def deployment_for(modality: str, system: str, rate: float):
        asked.append((system, rate))
        return audio.deployment

    scale = Scale(num_requests=60, rates_hz=(0.5, 2.0, 8.0), num_seeds=1, timeline_s=60.0,
                  refine_levels=2)
    sweep = goodput_sweep({"audio": audio}, deployment_for, scale, systems=("dynamo", "easerve"))
    for system, curve in sweep.groupby("system"):
        rates = curve["rate_hz"].tolist()
        assert rates[:3] == [0.5, 2.0, 8.0] and not curve["refined"].iloc[:3].any()
        assert curve["refined"].iloc[3:].all() and 1 <= len(rates) - 3 <= 4
        # level 1 bisects the grid's bracket of the peak, level 2 the new bracket
        grid = curve.iloc[:3].set_index("rate_hz")["goodput_moderate_rps"]
        level1 = refine_rates(grid.index.tolist(), grid.tolist())
        assert rates[3:3 + len(level1)] == level1
        assert [r for s, r in asked if s == system] == rates
    # request-at-a-time saturates between the grid's 0.5 and 2 req/s: the refined peak shows it
    peak = peak_goodput(sweep).set_index("system")
    dynamo = sweep[sweep["system"] == "dynamo"]
    assert peak.loc["dynamo", "at_rate_hz"] == 0.875
    assert peak.loc["dynamo", "goodput_rps"] > 1.3 * dynamo[~dynamo["refined"]]["goodput_moderate_rps"].max()


class _Scripted:
    """A backend that answers each point with a scripted goodput of its system at its rate."""

    def __init__(self, goodput):
        self.goodput = goodput
        self.rounds: list[list[tuple[str, float]]] = []

    def map(self, fn, points):
        rows = [{**dict(p.labels), "goodput_moderate_rps": self.goodput[p.preset](p.rate_hz)} for p in points]
        self.rounds.append([(p.preset, p.rate_hz) for p in points])
        return rows


def test_extend_rates_adds_one_rate_above_a_curve_whose_best_is_its_highest():
    assert extend_rates([1.0, 2.0, 4.0], [1.0, 2.0, 3.0], factor=1.5) == [6.0]
    assert extend_rates([4.0, 1.0, 2.0], [3.0, 1.0, 2.0], factor=2.0) == [8.0]  # unsorted input
    assert extend_rates([1.0, 2.0, 4.0], [1.0, 3.0, 3.0], factor=1.5) == []  # a tie goes to the lower
    assert extend_rates([1.0, 2.0, 4.0], [3.0, 2.0, 1.0], factor=1.5) == []
    with pytest.raises(ValueError, match="equally long"):
        extend_rates([1.0], [], factor=1.5)
    with pytest.raises(ValueError, match="extend_factor must be > 1"):
        Scale(num_requests=1, rates_hz=(1.0,), num_seeds=1, timeline_s=1.0, extend_factor=1.0)


def test_sweep_extends_a_rising_curve_until_goodput_falls_or_the_cap_then_refines():
    goodput = {"cliff": lambda r: r if r <= 5 else max(0.0, 11 - r),  # rises to 5 req/s, then falls
               "inner": lambda r: 1 / r,                               # best at the grid's lowest
               "rising": lambda r: r}                                  # never falls: the cap stops it
    backend = _Scripted(goodput)
    scale = Scale(num_requests=10, rates_hz=(1.0, 2.0, 4.0), num_seeds=2, timeline_s=1.0,
                  refine_levels=1, max_extensions=3, extend_factor=1.5)
    asked = []
    sweep = goodput_sweep({"audio": object()}, lambda m, s, r: asked.append((s, r)) or s, scale,
                          systems=("cliff", "inner", "rising"), backend=backend)
    by = {s: c for s, c in sweep.groupby("system")}
    first = lambda c: c.drop_duplicates("rate_hz")  # noqa: E731 - one row per rate (two seeds)
    # 6 still rises, 9 falls: two extensions, then the bracket (4, 6, 9) is refined
    assert first(by["cliff"])["rate_hz"].tolist() == [1.0, 2.0, 4.0, 6.0, 9.0, 5.0, 7.5]
    assert first(by["cliff"])["extended"].tolist() == [False] * 3 + [True] * 2 + [False] * 2
    assert first(by["cliff"])["refined"].tolist() == [False] * 5 + [True] * 2
    assert first(by["inner"])["rate_hz"].tolist() == [1.0, 2.0, 4.0, 1.5]
    assert first(by["rising"])["rate_hz"].tolist() == [1.0, 2.0, 4.0, 6.0, 9.0, 13.5, 11.25]  # the cap: 3
    # rounds: the grid, three extensions (only the curves that need one), one refinement
    assert [sorted(set(r)) for r in backend.rounds[1:4]] == [[("cliff", 6.0), ("rising", 6.0)],
                                                              [("cliff", 9.0), ("rising", 9.0)],
                                                              [("rising", 13.5)]]
    assert len(backend.rounds) == 5 and len(sweep) == 2 * (7 + 4 + 7)
    assert asked == [(s, r) for rnd in backend.rounds for s, r in rnd[::2]]  # one ask per rate
    peak = peak_goodput(sweep).set_index("system")
    assert peak.loc["cliff", "at_rate_hz"] == 5.0  # refined: the true peak
    # still rising at the cap: its peak is a lower bound, and says so
    assert peak["censored"].to_dict() == {"cliff": False, "inner": False, "rising": True}



def test_points_above_the_duration_rate_simulate_for_min_duration_s():
    scale = Scale(num_requests=10, rates_hz=(1.0, 2.0, 8.0), num_seeds=1, timeline_s=1.0, min_duration_s=5.0)
    assert [scale.requests_at(r) for r in (1.0, 2.0, 2.5, 8.0, 8.1)] == [10, 10, 13, 40, 41]
    assert Scale(num_requests=10, rates_hz=(1.0,), num_seeds=1, timeline_s=1.0).requests_at(100.0) == 10
    seen = []

    class Sizes(_Scripted):
        def map(self, fn, points):
            seen.extend((p.rate_hz, p.num_requests) for p in points)
            return super().map(fn, points)

    goodput_sweep({"audio": object()}, lambda m, s, r: s, scale, systems=("inner",),
                  backend=Sizes({"inner": lambda r: 1 / r}))
    assert seen == [(1.0, 10), (2.0, 10), (8.0, 40)]  # the grid (no refinement levels)

def test_sweep_with_a_cliff_at_13_5_finds_it_after_extending():
    # the cliff lies beyond the grid: without extension the peak would be censored at 4 req/s
    backend = _Scripted({"late": lambda r: min(r, 12.0) - max(0.0, r - 12.0) * 4})
    scale = Scale(num_requests=10, rates_hz=(1.0, 2.0, 4.0), num_seeds=1, timeline_s=1.0,
                  max_extensions=4)
    sweep = goodput_sweep({"audio": object()}, lambda m, s, r: s, scale, systems=("late",), backend=backend)
    assert sweep["rate_hz"].tolist() == [1.0, 2.0, 4.0, 6.0, 9.0, 13.5]
    assert peak_goodput(sweep)["at_rate_hz"].item() == 9.0
