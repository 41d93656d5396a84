"""bench/trace_encode_batch.py: a trace's stream at several encode batch caps, stage by stage."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    path = ROOT / "bench" / "trace_encode_batch.py"
    spec = importlib.util.spec_from_file_location("trace_encode_batch", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_each_cap_bounds_its_encode_batches_and_the_share_follows_the_table():
    bench = _bench()
    small, large = bench.rows(None, "azure", 0.6, "E2x2 P0x2 D1x4 s0", [2, 4])
    assert max(small["encode_batches"]) == 2 and max(large["encode_batches"]) == 4
    # the built-in table keeps 0.2 of the SMs for batches of 1-2 and 0.4 for 3-4
    assert small["encode_share"] == pytest.approx(0.2)
    assert large["encode_share"] > 0.2
    # the cap holds requests before encoding; without it they wait for local Prefill instead
    assert small["wait_encode_p50_s"] > large["wait_encode_p50_s"]
    assert small["wait_prefill_p50_s"] < large["wait_prefill_p50_s"]


def test_one_share_for_every_batch_size_holds_each_encode_batch_at_it():
    (row,) = _bench().rows(None, "azure", 0.6, "E2x2 P0x2 D1x4 s0", [4], encode_share=0.2)
    assert max(row["encode_batches"]) > 2 and row["encode_share"] == pytest.approx(0.2)


@pytest.mark.parametrize(("argv", "says"), [
    (["--allocation", "E2x2 P0x2"], "--allocation: expected like 'E2x2 P0x2 D1x4 s0', got 'E2x2 P0x2'"),
    (["--batches", "2,x"], "--batches: whole numbers >= 1, comma-separated, got '2,x'"),
    (["--trace-load", "0.5"], "--trace-load: goes with --trace"),
    (["--trace", "t.csv", "--trace-load", "0"], "--trace-load"),
    (["--trace", "t.csv", "--trace-load", "5"], "--trace-load must be a fraction in (0, 1]"),
    (["--encode-share", "0"], "--encode-share: a fraction in (0, 1], got '0'"),
    (["--encode-share", "x"], "--encode-share: a fraction in (0, 1], got 'x'"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says, capsys):
    assert _bench().main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trace_encode_batch: error: ") and says in err[0], err
