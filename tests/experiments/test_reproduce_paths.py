"""``easerve reproduce`` (``make run``) names only the final report path, never its staging folder."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from easerve.cli import main
from easerve.experiments import reproduce as reproduce_mod


def test_reproduce_prints_only_the_final_report_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(reproduce_mod, "_studies", lambda *a, **k: {"t": pd.DataFrame({"x": [1]})})

    def write_report(out: Path, tables, meta) -> Path:
        (out / "report.md").write_text("# report\n")
        return out / "report.md"

    monkeypatch.setattr(reproduce_mod.report, "write_report", write_report)
    assert main(["reproduce", "--quick", "--jobs", "1", "--out", "runs/headline"]) == 0
    captured = capsys.readouterr()
    said = captured.out + captured.err
    assert ".tmp-" not in said, said  # the staging folder is gone once the command ends
    assert "report: runs/headline/report.md" in captured.out
    assert (tmp_path / "runs" / "headline" / "report.md").is_file()
