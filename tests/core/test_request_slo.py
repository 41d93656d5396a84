"""Records, the DataFrame schema, SLO tiers, goodput and summaries."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from easerve_core import RECORD_COLUMNS, Modality, Record, Request, Status
from easerve_core.request import records_from_columns, records_to_frame
from easerve_core.slo import SLO, max_rate_within_slo, meets_slo, request_meets_slo, summarize


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


def test_rows_as_mappings_and_no_rows_take_the_one_builder():
    row = {c: getattr(rec(4, 0.0, 1.0, 2.0), c) for c in RECORD_COLUMNS} | {"extra_key": 1}
    frame = records_to_frame([row, rec(1, 0.0, 1.0, 2.0)])
    assert list(frame.columns) == list(RECORD_COLUMNS) and list(frame["request_id"]) == [1, 4]
    empty = records_to_frame([])
    assert empty.empty and [str(t) for t in empty.dtypes] == list(RECORD_COLUMNS.values())
    with pytest.raises(ValueError, match="missing fields: finish_s"):
        records_to_frame([{c: v for c, v in row.items() if c != "finish_s"}])


def test_one_request_meets_the_slo_as_its_frame_row_does():
    """The engines' controllers hear per request (request_meets_slo) what meets_slo says per row."""
    slo = SLO(ttft_s=1.0, tpot_s=0.1)
    records = [rec(0, 0.0, 0.5, 1.0), rec(1, 0.0, 1.0, 2.5), rec(2, 0.0, 1.5, 1.6),
               rec(3, 0.0, 0.5, 9.0, out=1), rec(4, 0.0, 0.5, 0.6, status="failed"),
               rec(5, 0.0, 1.0, 2.0), rec(6, 0.0, float("nan"), float("nan"))]
    frame = records_to_frame(records)
    per_row = list(meets_slo(frame, slo))
    assert per_row == [True, False, False, True, False, True, False]  # 5: both on the limit
    one = [request_meets_slo(slo, ok=r.status == "ok", arrival_s=r.arrival_s, first_token_s=r.first_token_s,
                             finish_s=r.finish_s, output_tokens=r.output_tokens) for r in records]
    assert one == per_row
    assert request_meets_slo(None, ok=True, arrival_s=0.0, first_token_s=9.0, finish_s=9.0, output_tokens=2)
    assert not request_meets_slo(None, ok=False, arrival_s=0.0, first_token_s=0.0, finish_s=0.0,
                                 output_tokens=2)


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


def test_five_tiers_strictest_first_with_the_papers_labels_and_the_old_names_unchanged():
    from easerve_core.slo import SLO_TIERS, TIER_ALIASES, tier

    assert list(SLO_TIERS) == ["strict", "tight", "moderate", "loose", "relaxed"]
    assert dict(TIER_ALIASES) == {"s1": "strict", "s2": "tight", "s3": "moderate", "s4": "loose",
                                  "s5": "relaxed"}
    scales = [(t.ttft_scale, t.tpot_scale) for t in SLO_TIERS.values()]
    assert scales == sorted(scales) and len(set(scales)) == 5  # each tier looser on both limits
    # the three names of before mean exactly what they meant
    assert [(tier(n).ttft_scale, tier(n).tpot_scale) for n in ("tight", "moderate", "loose")] == [
        (5.0, 2.0), (15.0, 5.0), (40.0, 10.0)]
    assert tier("s3") is tier("moderate")
    slo = SLO.from_tier("s3", unloaded_ttft_s=2.0, unloaded_tpot_s=0.05)
    assert slo == SLO.from_tier("moderate", unloaded_ttft_s=2.0, unloaded_tpot_s=0.05)
    assert slo.tier == "moderate" and slo.attainment is None


def test_slo_spec_absolute_limits_replace_their_tier_limit_and_the_label_says_custom():
    from easerve_core.slo import SLOSpec

    assert SLOSpec().resolve(unloaded_ttft_s=2.0, unloaded_tpot_s=0.05) == SLO(
        ttft_s=30.0, tpot_s=0.25, tier="moderate")
    both = SLOSpec.from_dict({"ttft_s": 20, "tpot_s": 0.1, "attainment": 0.9})
    assert both.absolute and both.resolve() == SLO(ttft_s=20.0, tpot_s=0.1, tier="custom", attainment=0.9)
    assert both.to_dict() == {"tier": "moderate", "ttft_s": 20.0, "tpot_s": 0.1, "attainment": 0.9}
    assert SLOSpec.from_dict({}).to_dict() == {"tier": "moderate"}
    half = SLOSpec(tier="tight", ttft_s=20.0)
    assert half.resolve(unloaded_ttft_s=2.0, unloaded_tpot_s=0.05) == SLO(ttft_s=20.0, tpot_s=0.1,
                                                                           tier="custom")
    with pytest.raises(ValueError, match=r"slo\.tpot_s is not set and tier 'tight' needs"):
        half.resolve()


@pytest.mark.parametrize(("table", "message"), [
    ({"ttft_s": -1}, "slo.ttft_s must be > 0, got -1"),
    ({"ttft_s": 0}, "slo.ttft_s must be > 0, got 0"),
    ({"tpot_s": "fast"}, "slo.tpot_s must be a number, got 'fast'"),
    ({"tpot_s": float("nan")}, "slo.tpot_s must be finite"),
    ({"attainment": 0}, "slo.attainment must be in (0, 1], got 0"),
    ({"attainment": 1.5}, "slo.attainment must be in (0, 1], got 1.5"),
    ({"attainment": True}, "slo.attainment must be a number"),
    ({"tier": "heroic"}, "unknown slo.tier 'heroic'"),
    ({"tier": 3}, "slo.tier must be a tier name, got 3"),
    ({"ttft_p99": 3}, "unknown slo field(s): ttft_p99"),
])
def test_slo_spec_rejects_bad_values_naming_the_field(table, message):
    from easerve_core.slo import SLOSpec

    with pytest.raises(ValueError) as info:
        SLOSpec.from_dict(table)
    assert message in str(info.value)


def test_a_run_sustains_its_slo_by_p99_or_by_its_attainment_target():
    from easerve_core.slo import sustains

    # 10 requests, one of them slow: attainment 0.9, P99 TTFT over the limit
    frame = records_to_frame([rec(i, 0.0, 0.5, 1.0) for i in range(9)] + [rec(9, 0.0, 5.0, 5.5)])
    assert not sustains(frame, SLO(ttft_s=1.0, tpot_s=1.0))
    assert sustains(frame, SLO(ttft_s=1.0, tpot_s=1.0, attainment=0.9))
    assert not sustains(frame, SLO(ttft_s=1.0, tpot_s=1.0, attainment=0.95))
    assert sustains(frame, SLO(ttft_s=6.0, tpot_s=1.0))
    assert not sustains(frame.iloc[:0], SLO(ttft_s=1.0, tpot_s=1.0, attainment=0.5))
