"""``easerve validate`` on Ctrl-C keeps what it ran: finished deployments and the unfinished one's trials.

The live executor is replaced by a stand-in that returns simulator results
(the same record schema), so the test runs in seconds; the third trial is
"interrupted" half-way, as a Ctrl-C during a real one would be.
"""

from __future__ import annotations

import json
from pathlib import Path

import live.trial
from calibration import load_profile
from easerve.cli import main
from sim import simulate
from tests.cli.test_bad_input import CPU_PROFILE, LIVE, _set, config


class FakeTrial:
    """Live trials stand-in: each run is a simulation of the plan; run number ``interrupt_at``
    raises KeyboardInterrupt, and its ``result()`` is then the records so far."""

    calls = 0
    interrupt_at = 3

    def __init__(self, plan, options=None) -> None:
        self.plan = plan

    def __enter__(self) -> FakeTrial:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def model_requests(self):
        return list(self.plan.requests)

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def run(self):
        FakeTrial.calls += 1
        if FakeTrial.calls == FakeTrial.interrupt_at:
            raise KeyboardInterrupt
        return self.result()

    def result(self):
        return simulate(self.plan, load_profile(CPU_PROFILE))


def test_ctrl_c_keeps_the_finished_and_the_unfinished_deployment(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(live.trial, "Trial", FakeTrial)  # the live engine opens its trials there
    FakeTrial.calls = 0
    small = _set(_set(LIVE, "model.size", "small"), "profile", None)
    path = config(small)(tmp_path)
    status = main(["validate", str(path), "--profile", str(CPU_PROFILE), "--out", "out", "--repeats", "2",
                   "--host-cores", "profile", "--sweep", "b1-s1-none", "b2-s0.5-dynamic"])
    err = capsys.readouterr().err
    assert status == 130, err
    assert "interrupted; 2 deployment(s) of 2 written to out" in err
    runs = tmp_path / "out" / "runs"
    assert sorted(p.name for p in (runs / "b1-s1-none").iterdir()) == ["live-0", "live-1", "sim"]
    # the second deployment's first trial was the interrupted one: its records so far are kept
    assert sorted(p.name for p in (runs / "b2-s0.5-dynamic").iterdir()) == ["live-0", "sim"]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["interrupted"] == {"why": "interrupted",
                                      "deployments_done": ["b1-s1-none", "b2-s0.5-dynamic"]}
    assert (tmp_path / "out" / "fidelity.csv").is_file()
