"""The confirmation loop, small: a search on a fitted tiny profile confirms two candidates and a baseline."""

from __future__ import annotations

import json

import pandas as pd

from easerve.cli import main
from tests.calibration_loop.helpers import tiny_config


def test_search_confirms_its_candidates_live_and_refits(profile_path, tmp_path, no_orphans):
    config = tmp_path / "tiny.toml"
    config.write_text(tiny_config(num_gpus=3, rate_hz=15.0, num_requests=16, profile=profile_path))
    out = tmp_path / "has"
    argv = ["search", str(config), "--rate", "15", "--trials", "4", "--trial-s", "5", "--min-requests", "16",
            "--recheck-top", "1", "--recheck-seeds", "1",
            "--confirm", "2", "--repeats", "1", "--baselines", "dynamo", "--refit", "--out", str(out)]
    assert main(argv) == 0
    folder = out / "confirm"
    summary = json.loads((folder / "summary.json").read_text())
    names = [c["name"] for c in summary["before_refit"]["candidates"]]
    assert names[-1] == "dynamo" and names[0] == "has1" and len(names) in (2, 3)  # K distinct (at most 2)
    for name in names:  # every request of every run accounted for
        for side in ("sim", "live-0"):
            rec = pd.read_parquet(folder / "runs" / name / side / "records.parquet")
            assert len(rec) == 16 and rec["request_id"].is_unique
    rank = summary["before_refit"]["ranking"]
    assert set(rank["sim_order"]) == set(names) == set(rank["live_order"])
    assert -1.0 <= rank["kendall_tau"] <= 1.0 and 0.0 <= rank["regret"] <= 1.0
    assert set(rank["plain"]["sim_order"]) == set(names) and rank["tie_frac"] == 0.02
    assert summary["after_refit"]["ranking"]["live_order"] == rank["live_order"]  # same live runs, same SLO
    assert (folder / "refit-profile.json").is_file() and (folder / "confirm.png").is_file()
    report = (folder / "report.md").read_text()
    for section in ("## Candidates", "## Agreement", "## After the refit", "Kendall tau", "regret"):
        assert section in report


def test_order_breaks_goodput_ties_by_slo_headroom():
    from calibration.loop.confirm import order

    goodput = {"a": 10.83, "b": 10.829, "c": 10.7, "d": 5.0, "e": 0.0, "f": 0.0}
    headroom = {"a": 0.9, "b": 0.2, "c": 0.1, "d": 3.0, "e": 9.0, "f": 4.0}
    # a, b, c lie within 2% of 10.83: the most headroom first; e and f tie at zero
    assert order(goodput, headroom) == ["c", "b", "a", "d", "f", "e"]
    assert order(goodput, headroom, tie_frac=0.0) == ["a", "b", "c", "d", "f", "e"]
