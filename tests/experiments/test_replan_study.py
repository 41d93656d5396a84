"""The what-if controller that plans with the simulator in the loop, on a small rate shift."""

from __future__ import annotations

import pytest

from easerve.experiments import controller_eval
from easerve.experiments.replan_study import SYSTEM, replan_shift
from easerve.experiments.setup import load_setup


def test_the_replanning_controller_runs_the_shift_and_plans_only_the_bands_it_needs():
    setup = load_setup("image", anchored=True)
    out = replan_shift(setup, mean_rate_hz=2.0, timeline_s=480.0, trials=3, step_hz=1.0)
    (row,) = out["systems"].to_dict("records")
    assert row["system"] == SYSTEM and row["decisions"] == len(out["decisions"])
    planned = out["planned"]
    assert planned["rate_hz"].iloc[0] == 2.0  # the start band: the mean's
    assert planned["rate_hz"].is_unique and set(planned["rate_hz"]) <= {1.0, 2.0, 3.0}
    assert set(out["decisions"].get("deployment", [])) <= set(planned["deployment"])
    assert (planned["wall_s"] > 0).all()
    assert set(out["phases"]["system"]) == {SYSTEM}


def test_the_online_cross_check_answers_hass_find_or_an_earlier_answer():
    setup = load_setup("image", anchored=True)
    out = replan_shift(setup, mean_rate_hz=2.0, timeline_s=480.0, trials=3, step_hz=1.0, cross_check=True)
    assert out["systems"]["system"].tolist() == [f"{SYSTEM}+check"]
    rows = out["planned"].to_dict("records")
    for i, row in enumerate(rows):
        assert row["deployment"] in {row["found"], *(r["deployment"] for r in rows[:i])}
    assert rows[0]["deployment"] == rows[0]["found"]  # nothing to check the first against


@pytest.mark.parametrize(("args", "says"), [
    (["--replan=0"], "--replan: STEP_HZ must be > 0"), (["--replan=-1"], "--replan: STEP_HZ must be > 0"),
    (["--replan", "--shapes"],
     "--replan: read only by the rate shift (no study flag); this run is the shapes")])
def test_a_bad_replan_is_one_line_and_exit_2(args: list[str], says: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert controller_eval.main(["--quick", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and says in err
