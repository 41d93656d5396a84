"""``easerve capacity``: the highest sustained arrival rate by bisection, its curve, deterministic."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from easerve.cli import main
from easerve.cli.search_cmd import dump_toml
from tests.cli.test_bad_input import SIM


def _capacity(tmp: Path, name: str, data: dict, *flags: str) -> tuple[pd.DataFrame, dict, Path]:
    cfg = tmp / f"{name}.toml"
    cfg.write_text(dump_toml({**data, "workload": {**data["workload"], "num_requests": 40}}))
    out = tmp / name
    assert main(["capacity", str(cfg), "--out", str(out), *flags]) == 0
    return pd.read_csv(out / "capacity.csv"), json.loads((out / "capacity.json").read_text()), out


def test_capacity_brackets_and_bisects_to_a_sustained_rate_with_a_failing_one_just_above(tmp_path, capsys):
    curve, answer, out = _capacity(tmp_path, "p99", SIM, "--tolerance", "0.05")
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["capacity.csv", "capacity.json", "capacity.png",
                                                     "config.json"]
    assert answer["outcome"] == "found" and answer["slo"]["rule"] == "p99"
    cap, failed = answer["capacity_rps"], answer["failed_rps"]
    by_rate = curve.set_index("rate_hz")
    assert by_rate.loc[cap, "sustained"] and not by_rate.loc[failed, "sustained"]
    assert cap < failed <= cap / (1 - 0.05) + 1e-9
    # the P99 rule, row by row, and no queue still growing at the end
    assert (curve["sustained"] == ((curve["ttft_p99_s"] <= answer["slo"]["ttft_s"])
                                   & (curve["tpot_p99_s"] <= answer["slo"]["tpot_s"])
                                   & ~curve["unstable"])).all()
    # each run is sized in time: at least 60 s of arrivals (and 40 requests, the config's)
    assert (curve["num_requests"] >= (curve["rate_hz"] * 60).clip(lower=40).apply(int)).all()
    assert curve["rate_hz"].is_monotonic_increasing and len(curve) == answer["num_runs"]
    assert curve.sort_values("step")["rate_hz"].iloc[0] == SIM["workload"]["rate_hz"]  # starts there
    assert f"sustains {cap:.4g} req/s" in printed.splitlines()[-1]
    # same seed, same curve
    again, _, _ = _capacity(tmp_path, "p99-again", SIM, "--tolerance", "0.05", "--no-plots")
    assert again.equals(curve)


def test_capacity_under_an_absolute_slo_with_an_attainment_target(tmp_path, capsys):
    data = {**SIM, "slo": {"ttft_s": 20.0, "tpot_s": 0.2, "attainment": 0.9}}
    curve, answer, _ = _capacity(tmp_path, "abs", data, "--no-plots", "--max-rate", "16")
    assert answer["slo"] == {"tier": "custom", "ttft_s": 20.0, "tpot_s": 0.2, "attainment": 0.9,
                             "rule": "attainment"}
    assert (curve["sustained"] == ((curve["attainment"] >= 0.9) & ~curve["unstable"])).all()
    assert answer["outcome"] in ("found", "censored") and answer["capacity_rps"] > 0
    assert "attainment >= 0.9" in capsys.readouterr().out


def test_capacity_on_several_streams_answers_with_the_worst_and_reports_each(tmp_path, capsys):
    one, single, _ = _capacity(tmp_path, "one", SIM, "--tolerance", "0.05", "--no-plots")
    capsys.readouterr()
    curve, answer, out = _capacity(tmp_path, "three", SIM, "--tolerance", "0.05", "--seeds", "3")
    printed = capsys.readouterr().out.splitlines()[-1]
    streams = answer["streams"]
    assert streams[0]["seed"] == SIM["seed"] and len({s["seed"] for s in streams}) == 3
    assert single["streams"] == streams[:1]  # the first stream is the one a single search runs
    assert curve[curve["seed"] == SIM["seed"]].reset_index(drop=True).equals(one)
    worst = min(streams, key=lambda s: s["capacity_rps"])
    assert (answer["capacity_rps"], answer["failed_rps"]) == (worst["capacity_rps"], worst["failed_rps"])
    assert answer["num_runs"] == sum(s["num_runs"] for s in streams) == len(curve)
    for s in streams:  # each stream's own bracket, in its own rows
        rows = curve[curve["seed"] == s["seed"]].set_index("rate_hz")
        assert rows.loc[s["capacity_rps"], "sustained"] and not rows.loc[s["failed_rps"], "sustained"]
    assert printed.startswith(f"easerve: on the worst of 3 streams (seed {worst['seed']}) sustains ")
    assert "per stream " + ", ".join(f"{s['capacity_rps']:.4g}" for s in streams) + " req/s" in printed
    assert (out / "capacity.png").is_file()
