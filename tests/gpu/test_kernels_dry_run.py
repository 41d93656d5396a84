"""bench/gpu/kernels.py --dry-run: every point timed on the CPU and priced twice (issue 35)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.gpu import kernels, serve_post


def test_dry_run_writes_every_point_with_both_prices(tmp_path: Path) -> None:
    out = tmp_path / "k.json"
    assert kernels.main(["--out", str(out), "--dry-run", "--reps", "2"]) == 0
    doc = json.loads(out.read_text())
    assert doc["device"] == "cpu" and doc["dtype"] == "float32" and doc["dry_run"]
    points = doc["points"]
    assert len(points) == len(kernels.GEMMS) + len(kernels.ATTENTIONS) == 12
    assert {p["label"] for p in points if p["kind"] == "attention"} == {"context", "generation", "encoder"}
    for p in points:
        assert p["time_s"] > 0 and p["fitted_s"] > 0
        assert p["time_over_fitted"] == round(p["time_s"] / p["fitted_s"], 4)
        if doc["measured_source"].startswith("aiconfigurator-core h200_sxm/vllm"):
            assert p["measured_s"] > 0 and p["measured_from"]
    assert set(doc["medians"]) == {"gemm", "attention"}
    text = "\n".join(serve_post.kernel_lines({"kernels": doc}))
    assert "| gemm | lm.qkv |" in text and "Dry run" in text


def test_full_shapes_are_priced_from_the_measured_tables() -> None:
    from calibration.ops import Op

    measured, _fitted, _source = kernels.prices()
    if measured is None:  # the measured extra absent: nothing to compare
        return
    for label, m, n, k in kernels.GEMMS:
        assert measured.op_s(Op("gemm", label, (m, n, k)))[1] == "measured"
    for phase, *shape in kernels.ATTENTIONS:
        assert measured.op_s(Op(f"{phase}_attention", phase, tuple(shape)))[1] == "measured"
