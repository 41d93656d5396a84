"""The device check's rerun path (``--sections``, ``--share-tables``), the split flags, and the merge.

The merge test reads the committed H200 results (bench/gpu/results/): the
fitted samples take encode and prefill from the first run and decode from
the rerun, and ``easerve profile fit`` accepts them.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.gpu.green_checks import split_flag
from bench.gpu.merge_runs import merge
from bench.gpu.plan import dry_plan
from calibration import fit_samples, load_samples

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "gpu" / "results"
FIRST, RERUN = RESULTS / "h200-2026-11-30", RESULTS / "h200-2026-11-30-rerun"
SCRIPT = str(ROOT / "bench" / "gpu" / "run_device_check.py")


def test_split_flag_is_found_in_whichever_enum_holds_it() -> None:
    class ByCountFlags:  # the enum's class name changed between cuda-bindings releases
        CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING = 1

    drv = SimpleNamespace(CUresult=object, CUdevSmResourceSplitByCount_flags=ByCountFlags)
    assert split_flag(drv, "IGNORE_SM_COSCHEDULING") == 1
    assert split_flag(drv, "MAX_POTENTIAL_CLUSTER_SIZE") is None


def test_unknown_section_is_refused() -> None:
    import dataclasses

    with pytest.raises(ValueError, match="unknown sections"):
        dataclasses.replace(dry_plan(), sections=("decode", "warp"))
    assert not dataclasses.replace(dry_plan(), sections=("decode",)).runs("encode")


def test_rerun_measures_only_its_sections(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--dry-run", "--out", str(tmp_path),
         "--sections", "decode,ablation", "--share-tables", str(FIRST / "summary.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ablation.csv", "lm.csv", "summary.json"]
    with open(tmp_path / "lm.csv", newline="") as fh:
        assert {r["phase"] for r in csv.DictReader(fh)} == {"decode"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["decode_shape_check"]) == set(dry_plan().models)
    model = "ultravox-v0.6-gemma3-27b"
    measured = json.loads((FIRST / "summary.json").read_text())["sm_share_table"][model]
    assert summary["ablation_share_table"][model] == measured


# the flags are read before torch loads: a bad one costs no seconds of imports, and the run
# reports whether torch was imported when the script stopped
_PROBE = ("import runpy, sys\nsys.argv = sys.argv[1:]\n"
          "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
          "finally:\n    print('torch loaded:', 'torch' in sys.modules)\n")


@pytest.mark.parametrize(("flags", "culprit"), [
    (["--sections", "decode,warp"], "--sections: unknown sections ['warp']"),
    (["--models", "gpt-9"], "unknown models ['gpt-9']"),
    (["--share-tables", "nope.json"], "--share-tables nope.json: not an earlier run's summary.json"),
    (["--share-tables", "README.md"], "--share-tables README.md: not an earlier run's summary.json"),
])
def test_bad_flag_exits_2_before_torch_loads(tmp_path: Path, flags: list[str], culprit: str) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, SCRIPT, "--dry-run", "--out", str(out), *flags],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and culprit in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "torch loaded: False" in proc.stdout
    assert not out.exists()


@pytest.mark.parametrize("model", ["ultravox-v0.6-gemma3-27b", "llava-v1.6-34b", "qwen2.5-vl-32b"])
def test_merged_samples_take_decode_from_the_rerun(model: str, tmp_path: Path) -> None:
    doc = merge(FIRST, RERUN, model)
    with open(RERUN / "lm.csv", newline="") as fh:
        rerun = {(int(r["batch_size"]), int(r["context_tokens"])): float(r["scaled_ms"]) / 1e3
                 for r in csv.DictReader(fh) if r["model"] == model and r["phase"] == "decode"}
    assert {(r["batch_size"], r["context_tokens"]): r["latency_s"] for r in doc["decode"]} == rerun
    first = json.loads((FIRST / "samples" / f"{model}.json").read_text())
    for stage in ("encode", "prefill"):  # the CSV's ms, not the first samples' seconds: equal to rounding
        assert len(doc[stage]) == len(first[stage])
        for got, want in zip(doc[stage], first[stage], strict=True):
            assert got == {**want, "latency_s": pytest.approx(want["latency_s"], rel=1e-12)}
    path = tmp_path / f"{model}.json"
    path.write_text(json.dumps(doc))
    fitted = fit_samples(load_samples(path))
    assert fitted.fit_error["decode"] < 0.25
