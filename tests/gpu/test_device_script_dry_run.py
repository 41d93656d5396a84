"""The device script's --dry-run: same code path on the CPU; files and schemas as documented."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.gpu.plan import MODELS, SCHEMAS
from easerve_core.profile import load_profile_doc

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu" / "run_device_check.py"
# The H200 image lacks simpy and optuna; the script must not need them (nor pyarrow, scipy, cuda).
RUN_BLOCKED = (
    "import runpy, sys\n"
    "for m in ('simpy', 'optuna', 'pyarrow', 'scipy', 'cuda'): sys.modules[m] = None\n"
    "sys.argv = [sys.argv[1], *sys.argv[2:]]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("device_out")
    proc = subprocess.run([sys.executable, "-c", RUN_BLOCKED, str(SCRIPT), "--dry-run", "--out", str(folder)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return folder


def test_outputs_fit_the_device_limits(out: Path) -> None:
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8
    for p in files:
        rel = p.relative_to(out)
        assert len(rel.parts) <= 3  # $OUT/a/b/file at the deepest
        assert all(re.fullmatch(r"[A-Za-z0-9._-]+", part) for part in rel.parts)
        assert p.stat().st_size <= 16 * 2**20
    assert {p.name for p in files} == {*SCHEMAS, "summary.json", *(f"{m}.json" for m in MODELS)}


def test_csvs_have_their_documented_columns(out: Path) -> None:
    for name, columns in SCHEMAS.items():
        with open(out / name, newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert rows, name
        assert tuple(rows[0]) == columns, name
    with open(out / "encode.csv", newline="") as fh:
        enc = list(csv.DictReader(fh))
    assert {r["model"] for r in enc} == set(MODELS)
    assert {r["level"] for r in enc} == {"full", "g24", "g48", "g64", "g88", "g104"}


def test_summary_records_every_section_ok(out: Path) -> None:
    summary = json.loads((out / "summary.json").read_text())
    assert summary["errors"] == {}
    assert all(s["ok"] for s in summary["sections"].values() if isinstance(s, dict))
    assert set(summary["ablation"]) == {"none", "time-slice", "static", "dynamic"}
    assert summary["green"]["switch"]["apply_encode_and_prefill_us"] > 0
    assert summary["env"]["device"] == "cpu"


def test_profiles_are_valid_versioned_profile_docs(out: Path) -> None:
    for model in MODELS:
        doc = load_profile_doc(out / "profiles" / f"{model}.json")
        assert doc.kind == "measured-grid" and doc.gpu == "cpu-dry-run" and doc.model == model
        assert doc.sm_share_table is not None
        assert {"encode", "prefill", "decode", "prefill_fit", "decode_fit"} <= set(doc.params)


def test_cuda_without_green_contexts_measures_the_full_lane_only(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    from bench.gpu import green_checks
    from bench.gpu.plan import Sink, full_plan

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no green contexts here")

    monkeypatch.setattr(green_checks.GreenContextPool, "build", refuse)
    plan, sink = full_plan("h200"), Sink(tmp_path)
    lanes, pool = green_checks.build_pool(plan, sink)
    assert pool is None and lanes.backend == "null"
    assert green_checks.swept_pairs(plan, lanes) == ()
    assert sink.summary["sections"]["green:build"]["ok"] is False
    assert "no green contexts" in sink.summary["errors"]["green:build"]
