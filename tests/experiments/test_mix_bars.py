"""The mix shifts against their bars: the verdict rows, their spread over seeds, ``--seeds``, ``--jobs``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from easerve.experiments.controller_eval import main
from easerve.experiments.mix_bars import spread, verdicts
from easerve.experiments.mix_control import MIX_TABLES
from tests.experiments.test_mix_shifts import GOOD as SHIFT

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"



def test_the_published_run_reads_as_its_note_says() -> None:
    """docs/results' mix shifts (seed 0): three shifts hold every bar, and the trace rate's picks
    differ but its checked table keeps one deployment (no decision)."""
    frames = {name: pd.read_csv(RESULTS / f"{name}.csv") for name in MIX_TABLES}
    rows = verdicts(frames, seed=0).set_index("shift")
    assert rows.loc[["output-length", "image-video", "resolution"], "holds"].all()
    res = rows.loc["resolution"]
    assert (res["controller"], res["moves"], res["attainment_ok"]) == ("reactive", True, True)
    assert res["attainment_high"] == pytest.approx(1.0, abs=1e-4)
    assert res["over_static"] == pytest.approx(3.2598 / 1.6988, rel=1e-3)
    trace = rows.loc["trace-rate"]
    assert trace["picks_differ"] and trace["decisions"] == 0 and not trace["moves"] and not trace["holds"]


def _frames(oracle_phase_1: float, reactive_gp: float) -> dict[str, pd.DataFrame]:
    systems = pd.DataFrame({
        "shift": "s", "system": ["static-low", "static-high", "oracle", "reactive", "predictive"],
        "attainment_high": [0.5, 0.2, 0.95, 0.92, 0.91], "goodput_rps": [1.0, 0.8, 1.3, reactive_gp, 1.25],
        "decisions": [0, 0, 3, 2, 4]})
    phases = pd.DataFrame({
        "shift": "s", "system": [s for s in systems["system"] for _ in range(2)], "phase": [0, 1] * 5,
        "attainment": [0.9, 0.4, 0.3, 0.8, 0.95, oracle_phase_1, 0.9, 0.9, 0.9, 0.9]})
    plans = pd.DataFrame({"shift": "s", "deployment": ["A", "B"]})
    return {"controller_mix_shifts": systems, "controller_mix_shifts_phases": phases,
            "controller_mix_shifts_plans": plans}


def test_the_better_controller_is_the_higher_goodput_and_the_oracle_is_held_per_phase() -> None:
    row = verdicts(_frames(oracle_phase_1=0.4, reactive_gp=1.2), seed=3).iloc[0]
    assert (row["controller"], row["decisions"], row["seed"]) == ("predictive", 4, 3)
    assert row["over_static"] == pytest.approx(1.25) and row["of_oracle"] == pytest.approx(1.25 / 1.3)
    assert row["oracle_ok"] and row["holds"]  # phase 1: 0.4, the worse static's (0.4), is enough
    low = verdicts(_frames(oracle_phase_1=0.39, reactive_gp=1.3), seed=4).iloc[0]
    assert low["controller"] == "reactive" and not low["oracle_ok"] and not low["holds"]
    table = spread(pd.concat([verdicts(_frames(0.4, 1.2), seed=3), verdicts(_frames(0.39, 1.3), seed=4)]))
    assert table.iloc[0].to_dict() == {
        "shift": "s", "seeds": "3,4", "attainment_high": "0.910 / 0.915 / 0.920",
        "over_static": "1.250 / 1.275 / 1.300", "of_oracle": "0.962 / 0.981 / 1.000", "moves": "2/2",
        "attainment_ok": "2/2", "over_static_ok": "2/2", "of_oracle_ok": "2/2", "oracle_ok": "1/2",
        "holds": "1/2"}


@pytest.mark.parametrize("args, said", [
    (["--seeds", "1,1"], "--seeds must name each seed once, got 1 twice"),
    (["--seeds", "0,x"], "--seeds must be an integer >= 0"),
    (["--seeds", "-2"], "--seeds must be an integer >= 0"),
    (["--seeds", ""], "--seeds must be an integer >= 0"),
    (["--seeds", "0,1", "--seed", "2"], "--seeds: not with --seed"),
])
def test_bad_seeds_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                           args: list[str], said: str) -> None:
    assert main(["--mix-shifts", "output-length", *args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["0", "1.5", "two"])
def test_bad_jobs_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          value: str) -> None:
    assert main(["--mix-shifts", "output-length", "--jobs", value, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--jobs must be an integer >= 1" in err[0]
    assert not (tmp_path / "out").exists()


def test_seeds_run_each_seed_as_seed_does_and_count_the_bars(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(SHIFT)
    many = ["--seeds", "0,1", "--jobs", "2", "--out", str(tmp_path / "many")]  # on a pool: the same bytes
    assert main(["--quick", "--shift", str(path), *many]) == 0
    assert main(["--quick", "--shift", str(path), "--seed", "1", "--out", str(tmp_path / "one")]) == 0
    for name in MIX_TABLES:
        assert (tmp_path / "many" / "seed-1" / f"{name}.csv").read_bytes() == \
            (tmp_path / "one" / f"{name}.csv").read_bytes()
    assert not [p for p in tmp_path.rglob(".*")]  # every table moved in from its staging folder
    rows = pd.read_csv(tmp_path / "many" / "controller_mix_shifts_seeds.csv")
    assert rows["seed"].tolist() == [0, 1] and set(rows["shift"]) == {"s"}
    read = ("controller_mix_shifts", "controller_mix_shifts_phases", "controller_mix_shifts_plans")
    seed_0 = {name: pd.read_csv(tmp_path / "many" / "seed-0" / f"{name}.csv") for name in read}
    pd.testing.assert_frame_equal(rows.iloc[:1], verdicts(seed_0, seed=0), check_dtype=False)


def test_the_report_says_which_bars_each_shift_misses() -> None:
    from easerve.experiments.report_controller import controller_sections

    tables = {name: pd.read_csv(RESULTS / f"{name}.csv") for name in MIX_TABLES}
    sections = controller_sections(tables)
    text = "\n".join(sections)
    assert "| resolution | reactive | 3 | 1 | 1.92 | 1 | none |" in text
    assert "| output-length | reactive | 3 | 1 | 2.04 | 1 | none |" in text
    assert "| trace-rate | reactive | 0 | 0.938 | 1 | 1 | a move (HAS's picks differ, the controller " \
           "decides); goodput over the better static |" in text
    assert (RESULTS / "report.md").read_text().count(sections[-1]) == 1  # the committed report has it
