"""The device script's --dry-run: same code path on the CPU; files and schemas as documented.

The samples files it writes are fitted here, as bench/gpu/README.md says the
H200's are: ``calibration.load_samples`` -> ``fit_samples`` -> ``fitted_doc``
-> ``save_profile_doc`` -> ``load_profile``, and once through ``easerve
profile fit``.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.gpu import samples as bench_samples
from bench.gpu.plan import MODELS, SCHEMAS
from calibration import FittedProfile, fit_samples, fitted_doc, load_profile, load_samples
from easerve.cli import main as easerve_main
from runtime.profiles import load_profile_doc, save_profile_doc

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
    assert {str(p.relative_to(out)) for p in files} == {*SCHEMAS, "summary.json",
                                                         *(f"samples/{m}.json" for m in MODELS)}


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
    assert set(summary["ablation"]) == {"none", "time-slice", "static", "dynamic",
                                        "static-held", "dynamic-held"}
    assert summary["green"]["switch"]["apply_encode_and_prefill_us"] > 0
    assert summary["env"]["device"] == "cpu"


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _share(sms: str, total: str) -> float:
    return round(int(sms) / int(total), 6)


Row = dict[str, Any]


def _keyed(rows: list[Row], key: Callable[[Row], tuple[Any, ...]]) -> dict[tuple[Any, ...], float]:
    """Rows by key (shares rounded to 6 places); a key seen twice fails."""
    out: dict[tuple[Any, ...], float] = {}
    for r in rows:
        k = tuple(round(v, 6) if isinstance(v, float) else v for v in key(r))
        assert k not in out, k
        out[k] = r["latency_s"]
    return out


def test_samples_hold_the_measured_rows(out: Path) -> None:
    summary = json.loads((out / "summary.json").read_text())
    enc, lm = _csv(out / "encode.csv"), _csv(out / "lm.csv")
    for model in MODELS:
        samples = load_samples(out / "samples" / f"{model}.json")
        assert (samples["model"], samples["gpu"], samples["tp"]) == (model, "cpu-dry-run", 1)
        mine = [r for r in enc if r["model"] == model]
        assert _keyed(samples["encode"], lambda r: (len(r["mm_tokens_per_item"]), r["sm_share"])) == \
            pytest.approx({(int(r["batch_size"]), _share(r["encode_sms"], r["total_sms"])):
                           float(r["wall_ms_median"]) / 1e3 for r in mine})
        assert {v for r in samples["encode"] for v in r["mm_tokens_per_item"]} == {
            int(mine[0]["lm_tokens_per_item"])}
        pre = [r for r in lm if r["model"] == model and r["phase"] == "prefill"]
        assert _keyed(samples["prefill"], lambda r: (r["seq_lens"][0], r["sm_share"])) == pytest.approx(
            {(int(r["seq_len"]), _share(r["lane_sms"], r["total_sms"])): float(r["scaled_ms"]) / 1e3
             for r in pre})
        dec = [r for r in lm if r["model"] == model and r["phase"] == "decode"]
        assert _keyed(samples["decode"], lambda r: (r["batch_size"], r["context_tokens"])) == pytest.approx(
            {(int(r["batch_size"]), int(r["context_tokens"])): float(r["scaled_ms"]) / 1e3 for r in dec})
        assert bench_samples.short_stages(samples) == {}
        assert model in summary["sm_share_table"]  # the measured table, at the granted shares
    assert "samples_short" not in summary


def test_samples_fit_into_a_profile_that_round_trips(out: Path, tmp_path: Path) -> None:
    for model in MODELS:
        samples = load_samples(out / "samples" / f"{model}.json")
        result = fit_samples(samples)
        assert set(result.fit_error) == {"encode", "prefill", "decode"}
        doc = fitted_doc(result, samples, created="2026-01-01")
        assert (doc.kind, doc.model, doc.gpu) == ("fitted", model, "cpu-dry-run")
        path = save_profile_doc(doc, tmp_path / f"{model}.json")
        assert load_profile_doc(path) == doc
        profile = load_profile(path)
        assert isinstance(profile, FittedProfile) and profile == result.profile
        row = samples["encode"][0]
        assert profile.encode_s(row["mm_tokens_per_item"], row["sm_share"]) > 0


def test_easerve_profile_fit_reads_a_samples_file(out: Path, tmp_path: Path) -> None:
    model = MODELS[0]
    dest = tmp_path / "h200" / f"{model}.json"
    assert easerve_main(["profile", "fit", str(out / "samples" / f"{model}.json"), "--out", str(dest)]) == 0
    assert isinstance(load_profile(dest), FittedProfile)


def test_samples_rows_from_sweep_values() -> None:
    rows = [{"phase": "prefill", "batch_size": 1, "seq_len": 64, "lane": "g24/prefill", "lane_sms": 108,
             "total_sms": 132, "context_tokens": 64, "scaled_ms": 30.0},
            {"phase": "decode", "batch_size": 8, "seq_len": 512, "lane": "full/encode", "lane_sms": 132,
             "total_sms": 132, "context_tokens": 4096, "scaled_ms": 12.0}]
    doc = bench_samples.to_samples(model="m", gpu="g", lm_tokens_per_item=10, embed_bytes_per_token=2,
                                   kv_bytes_per_token=4, latency={(2, 0.5): 0.004, (1, 1.0): 0.001},
                                   lm=rows, source="test", notes="")
    assert doc["encode"] == [{"mm_tokens_per_item": [10], "sm_share": 1.0, "latency_s": 0.001},
                             {"mm_tokens_per_item": [10, 10], "sm_share": 0.5, "latency_s": 0.004}]
    assert doc["prefill"] == [{"seq_lens": [64], "sm_share": 108 / 132, "latency_s": 0.03}]
    assert doc["decode"] == [{"batch_size": 8, "context_tokens": 4096, "latency_s": 0.012}]
    assert bench_samples.short_stages(doc) == {"encode": 2, "prefill": 1, "decode": 1}
    with pytest.raises(ValueError, match="latency"):
        bench_samples.encode_rows({(1, 1.0): float("nan")}, 10)


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
