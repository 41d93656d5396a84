"""``easerve profile``: analytic -> show, fit -> show, and one-line errors."""

from __future__ import annotations

import json

import numpy as np

from easerve.cli import main
from tests.calibration.test_fit import TRUE, synthetic_samples


def test_analytic_then_show(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["profile", "analytic", "--model", "llava-v1.6-34b", "--gpu", "rtx6000ada",
                 "--tp", "2", "--out", str(out)]) == 0
    assert main(["profile", "show", str(out)]) == 0
    text = capsys.readouterr().out
    for needle in ("encode    TP1          1", "encode    TP1          8", "prefill   TP2",
                   "decode    TP2", "capacity_rps", "LM fits at TP: 1=no, 2=yes", "SM share"):
        assert needle in text


def test_fit_then_show(tmp_path, capsys):
    samples = tmp_path / "s.json"
    samples.write_text(json.dumps(synthetic_samples(TRUE, np.random.default_rng(3), noise=0.01)))
    out = tmp_path / "f.json"
    assert main(["profile", "fit", str(samples), "--out", str(out)]) == 0
    assert "fit error" in capsys.readouterr().out
    assert main(["profile", "show", str(out), "--prompt-tokens", "64", "--output-tokens", "32",
                 "--items", "500"]) == 0
    assert "fit err" in capsys.readouterr().out


def test_errors_are_one_line_and_exit_2(tmp_path, capsys):
    assert main(["profile", "analytic", "--model", "llava-v1.6-34b", "--gpu", "rtx6000ada",
                 "--tp", "1", "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not fit rtx6000ada at tp=1" in err
    assert not (tmp_path / "x.json").exists()
    assert main(["profile", "show", str(tmp_path / "missing.json")]) == 2
    assert "profile file not found" in capsys.readouterr().err
