"""The goodput sweep's peak refinement."""

from __future__ import annotations

import pytest

from easerve.experiments.setup import load_setup, paper_anchored_efficiency
from easerve.experiments.studies import Scale, goodput_sweep, peak_goodput, refine_rates


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
    audio = load_setup("audio", efficiency=paper_anchored_efficiency())
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
