"""Records, the DataFrame schema, SLO tiers, goodput and summaries."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from easerve_core import RECORD_COLUMNS, Modality, Record, Request, Status
from easerve_core.request import records_from_columns, records_to_frame
from easerve_core.slo import SLO, max_rate_within_slo, summarize


def rec(i, arrival, first, finish, out=11, status="ok"):
    r = Record(request_id=i, modality="image", arrival_s=arrival, prompt_tokens=10,
               mm_tokens=100, output_tokens=out)
    r.encode_start_s, r.encode_end_s, r.encode_batch_size, r.route = arrival, arrival, 1, "local"
    r.prefill_start_s, r.first_token_s, r.finish_s, r.status = arrival, first, finish, status
    return r


def test_frame_has_the_schema_columns_and_dtypes():
    frame = records_to_frame([rec(1, 0.0, 1.0, 2.0), rec(0, 0.5, 1.0, 3.0)])
    assert list(frame.columns) == list(RECORD_COLUMNS)
    for col, dtype in RECORD_COLUMNS.items():
        assert str(frame[col].dtype) == dtype, col
    assert list(frame["request_id"]) == [0, 1]


def test_unreached_stages_are_nan_and_nullable_ints_na():
    r = Record.for_request(Request(request_id=3, arrival_s=1.0, modality="audio",
                                   prompt_tokens=5, output_tokens=3, mm_tokens_per_item=(63,)))
    r.fail("encoder died")
    frame = records_to_frame([r])
    assert math.isnan(frame.loc[0, "first_token_s"])
    assert pd.isna(frame.loc[0, "encode_batch_size"])
    assert frame.loc[0, "status"] == "failed" and frame.loc[0, "error"] == "encoder died"


def test_records_from_columns_is_records_to_frame(tmp_path):
    """Column by column or row by row, the same frame and the same Parquet bytes."""
    failed = Record.for_request(Request(request_id=3, arrival_s=1.0, modality="audio",
                                        prompt_tokens=5, output_tokens=3, mm_tokens_per_item=(63,)))
    failed.fail("encoder died")
    records = [rec(2, 0.5, 1.0, 3.0), failed, rec(0, 0.0, 1.0, 2.0, out=1)]
    records[0].decode_worker = records[0].encode_worker = 1
    rows = records_to_frame(records)
    cols = records_from_columns({c: [getattr(r, c) for r in records] for c in RECORD_COLUMNS})
    pd.testing.assert_frame_equal(cols, rows, check_exact=True)
    rows.to_parquet(tmp_path / "rows.parquet")
    cols.to_parquet(tmp_path / "cols.parquet")
    assert (tmp_path / "rows.parquet").read_bytes() == (tmp_path / "cols.parquet").read_bytes()
    with pytest.raises(ValueError, match="finish_s"):
        records_from_columns({c: [] for c in RECORD_COLUMNS if c != "finish_s"})


def test_request_validation_names_fields():
    with pytest.raises(ValueError, match="modality"):
        Request(request_id=0, arrival_s=0, modality="smell", prompt_tokens=1, output_tokens=1)
    with pytest.raises(ValueError, match="arrival_s"):
        Request(request_id=0, arrival_s=-1, modality="text", prompt_tokens=1, output_tokens=1)
    with pytest.raises(ValueError, match="mm_tokens_per_item"):
        Request(request_id=0, arrival_s=0, modality=Modality.IMAGE, prompt_tokens=1, output_tokens=1)


def test_goodput_counts_requests_meeting_both_limits():
    slo = SLO(ttft_s=1.0, tpot_s=0.1)
    frame = records_to_frame([
        rec(0, 0.0, 0.5, 1.0),          # ttft .5, tpot .05 -> meets
        rec(1, 0.0, 2.0, 2.5),          # ttft 2 -> misses
        rec(2, 0.0, 0.5, 10.0),         # tpot .95 -> misses
        rec(3, 0.0, 0.5, 0.5, out=1),   # one token: no tpot -> meets
        rec(4, 0.0, 0.1, 0.2, status=Status.FAILED.value),
    ])
    s = summarize(frame, slo)
    assert s.makespan_s == 10.0
    assert s.goodput_rps == pytest.approx(2 / 10.0)
    assert s.attainment == pytest.approx(2 / 5)
    assert s.num_ok == 4 and s.num_failed == 1
    assert s.throughput_rps == pytest.approx(0.4)


def test_tiers_scale_unloaded_latency():
    slo = SLO.from_tier("moderate", unloaded_ttft_s=2.0, unloaded_tpot_s=0.05)
    assert slo.ttft_s == pytest.approx(30.0) and slo.tpot_s == pytest.approx(0.25)
    with pytest.raises(ValueError, match="slo tier"):
        SLO.from_tier("lenient", unloaded_ttft_s=1, unloaded_tpot_s=1)


def test_max_rate_within_slo_stops_at_first_failure():
    slo = SLO(ttft_s=1.0, tpot_s=1.0)
    good = summarize(records_to_frame([rec(0, 0.0, 0.5, 1.0)]), slo)
    bad = summarize(records_to_frame([rec(0, 0.0, 5.0, 6.0)]), slo)
    assert max_rate_within_slo({1.0: good, 2.0: good, 3.0: bad, 4.0: good}) == 2.0
    assert max_rate_within_slo({1.0: bad}) == 0.0
