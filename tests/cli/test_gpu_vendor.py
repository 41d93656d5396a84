"""``easerve gpu import --from aiconfigurator``: a GPU read from a vendor table, the rest from a base spec."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from calibration.specs import gpu_spec
from easerve.cli import main

pytestmark = pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                                reason="needs the measured extra (aiconfigurator-core)")


def test_the_vendor_tables_facts_are_read_and_marked(tmp_path: Path) -> None:
    out = tmp_path / "h200v.json"
    assert main(["gpu", "import", "--from", "aiconfigurator", "--system", "h200_sxm", "--name", "h200v",
                 "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["mem_bandwidth_bytes_per_s"]["mark"] == "V"
    assert "systems/h200_sxm.yaml gpu.mem_bw" in data["mem_bandwidth_bytes_per_s"]["source"]
    assert data["num_sms"]["source"].startswith("from the base spec h200")
    gpu = gpu_spec(str(out))
    assert gpu.memory_bytes == 151397597184 and gpu.compute_capability == "9.0"
    assert gpu.num_sms == gpu_spec("h200").num_sms


@pytest.mark.parametrize(("argv", "field"), [
    (["--system", "a30", "--name", "x"], "--base"),
    (["--system", "nope", "--name", "x"], "holds no system 'nope'"),
    (["--name", "x"], "--system"),
    (["--system", "h200_sxm"], "--name"),
    (["--system", "h200_sxm", "--name", "x", "--db", "/no/such/db"], "does not exist"),
])
def test_bad_vendor_imports_are_one_line_and_exit_2(tmp_path: Path, argv: list[str], field: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g.json"
    assert main(["gpu", "import", "--from", "aiconfigurator", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0]
    assert not out.exists()


def test_a_file_and_a_vendor_table_together_are_refused(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "in.json"
    spec.write_text("{}")
    assert main(["gpu", "import", str(spec), "--from", "aiconfigurator", "--system", "h200_sxm",
                 "--name", "x", "--out", str(tmp_path / "g.json")]) == 2
    assert "not both" in capsys.readouterr().err
