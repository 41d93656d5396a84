"""The serving check's --dry-run (issue 20): every step on the CPU, files and schemas as documented.

One dry run (tiny Qwen2-Audio, the cpu-threads backend, a few requests per
trial) feeds every test here; the post-processing then turns its files into
a RESULTS.md section, as bench/gpu/README.md says it will after the H200 run.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

from bench.gpu import serve_post
from bench.gpu.serve_plan import OUT_FILES, SCHEMAS, SERVE_MODES, STEPS, dry_plan

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu" / "serve_check.py"


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("serve_out")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(folder)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return folder


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_outputs_fit_the_device_limits(out: Path) -> None:
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8
    assert {p.name for p in files} == set(OUT_FILES)  # the dry run walks every step
    for p in files:
        rel = p.relative_to(out)
        assert len(rel.parts) <= 3 and all(re.fullmatch(r"[A-Za-z0-9._-]+", x) for x in rel.parts)
        assert p.stat().st_size <= 16 * 2**20


def test_csvs_have_their_documented_columns(out: Path) -> None:
    for name, columns in SCHEMAS.items():
        rows = _csv(out / name)
        assert rows, name
        assert tuple(rows[0]) == columns, name
    serve = _csv(out / "serve.csv")
    assert {r["mode"] for r in serve} == set(SERVE_MODES)
    assert {r["stage"] for r in serve} == {"encode", "prefill"}  # local prefills ran on the encode worker
    assert {r["round"] for r in _csv(out / "fidelity.csv")} == {"serve", "calibrated", "refit"}


def test_summary_records_every_step_and_section(out: Path) -> None:
    summary = json.loads((out / "summary.json").read_text())
    assert summary["errors"] == {}
    assert set(summary["steps"]) == set(STEPS) and all(s["ok"] for s in summary["steps"].values())
    modes = summary["serve"]["modes"]
    assert set(modes) == set(SERVE_MODES)
    for m in modes.values():
        assert m["live_runs"] == 1 and m["throughput_rps"] > 0 and m["ttft_p99_s"] > 0
        assert m["split"]["encode_batches"] >= 1 and m["split"]["local_prefills"] >= 1
        assert m["sm_share_table_source"] == "profile"  # the calibrated (measured) table, not a config's
    static = modes["static"]["split"]
    assert set(static["local_prefill_sms"]) == {"68"}  # 0.5 -> the g64 level's prefill lane of 132
    assert set(summary["fidelity"]) == {"calibrated", "refit"}
    assert {b["metric"] for b in summary["fidelity"]["refit"]["bars"]} >= {"ttft_p50_s", "tpot_p99_s"}
    assert summary["capacity"]["sim_capacity_rps"] > 0
    assert summary["calibrate"]["fit_error"] and summary["calibrate"]["sm_share_table"]
    assert summary["search"]["confirm"]["command"].startswith("easerve search")
    assert summary["env"]["gpu_label"] == "cpu-dry-run"
    kernels = summary["kernels"]  # issue 35: the kernels step folded into the summary, no new file
    assert kernels["dry_run"] and len(kernels["points"]) == 12
    assert all(p["time_s"] > 0 and p["fitted_s"] > 0 for p in kernels["points"])


def test_runs_tgz_holds_the_configs_and_the_stage_logs(out: Path, tmp_path: Path) -> None:
    with tarfile.open(out / "runs.tgz") as tar:
        names = set(tar.getnames())
        tar.extractall(tmp_path, filter="data")
    plan = dry_plan()
    for mode in SERVE_MODES:
        assert f"serve/runs/{plan.serve_spec(mode)}/live-0/stage_log.parquet" in names
    assert not any(n.endswith("study.db") for n in names)
    serve = tomllib.loads((tmp_path / "configs" / "serve.toml").read_text())
    assert serve["live"]["partition_backend"] == plan.partition_backend
    assert "sm_share_table" not in serve["profile"]  # the table is the calibrated profile's
    heldout = tomllib.loads((tmp_path / "configs" / "heldout.toml").read_text())
    assert heldout["seed"] == plan.heldout_seed and heldout["workload"]["rate_hz"] == plan.fidelity_rate_hz


def test_post_processing_writes_a_section_and_keeps_cpu_profiles_out(out: Path, tmp_path: Path) -> None:
    results, profiles = tmp_path / "results", tmp_path / "profiles"
    assert serve_post.main([str(out), "--results", str(results), "--profiles", str(profiles)]) == 0
    text = (results / "RESULTS-section.md").read_text()
    assert "DRY RUN on the CPU" in text
    for mode in SERVE_MODES:
        assert f"| {mode} |" in text
    assert "| refit | profile-refit.json |" in text
    assert "### Kernels against the measured" in text and "| attention | context |" in text
    assert not profiles.exists()  # a dry run's tiny CPU profiles never land with the H200 ones
    assert {p.name for p in results.iterdir()} == {*OUT_FILES, "RESULTS-section.md"}
