"""Measured host preprocessing as data: the table, its size rule, and the analytic profile's use of it."""

from __future__ import annotations

import pytest

from calibration import Efficiency, analytic_profile
from calibration.host_preprocess import (
    HostPreprocessEntry,
    HostPreprocessTable,
    host_preprocess_efficiency,
    item_host_s,
    load_table,
    write_table,
)
from easerve_core.profile import HostPreprocessing, host_preprocess_s


def test_committed_table_covers_the_three_paper_models_with_its_source():
    table = load_table()
    assert "bench/encoder_call_cost.py" in table.source and table.measured and table.cpu
    for model, modality in (("llava-v1.6-34b", "image"), ("qwen2.5-vl-32b", "video"),
                            ("ultravox-v0.6-gemma3-27b", "audio")):
        assert table.entry(model, modality).seconds > 0
    with pytest.raises(ValueError, match=r"known: llava-v1\.6-34b/image"):
        table.entry("llava-v1.6-34b", "audio")


def test_size_rule_per_item_or_per_token():
    item = HostPreprocessEntry(model="m", modality="image", item="x", ref_tokens=100, decode_s=0.01,
                               processor_s=0.03, scales_with="item")
    tokens = HostPreprocessEntry(model="m", modality="video", item="x", ref_tokens=100, decode_s=0.2,
                                 processor_s=0.8, scales_with="tokens")
    assert item_host_s(item, [50, 400]) == pytest.approx(0.08)  # a constant per item
    assert item_host_s(tokens, [50]) == pytest.approx(0.5)  # proportional to the tokens
    assert item_host_s(tokens, [100]) == pytest.approx(tokens.seconds)
    with pytest.raises(ValueError, match="scales_with"):
        HostPreprocessEntry(model="m", modality="image", item="x", ref_tokens=1, decode_s=0.0,
                            processor_s=0.0, scales_with="pixels")


def test_table_round_trips(tmp_path):
    table = load_table()
    assert load_table(write_table(table, tmp_path / "t.json")) == table
    with pytest.raises(ValueError, match=r"easerve\.host_preprocess"):
        HostPreprocessTable.from_dict({"format": "other", "version": 1})


def test_profile_charges_the_measured_host_part_on_its_own_not_in_encode_s():
    video = host_preprocess_efficiency(Efficiency(), "qwen2.5-vl-32b", "video")
    plain = analytic_profile("qwen2.5-vl-32b", "rtx6000ada").for_tp(1)
    measured = analytic_profile("qwen2.5-vl-32b", "rtx6000ada", efficiency=video).for_tp(1)
    entry = load_table().entry("qwen2.5-vl-32b", "video")
    assert isinstance(measured, HostPreprocessing)
    assert measured.host_preprocess_s([5760]) == pytest.approx(entry.seconds)
    assert measured.host_preprocess_s([2880, 2880]) == pytest.approx(entry.seconds)  # by tokens
    assert host_preprocess_s(plain, [5760]) == 0.0  # the roofline has none
    for share in (1.0, 0.5, 0.2):  # the host part is not in encode_s, so no SM share scales it
        assert measured.encode_s([5760], share) == plain.encode_s([5760], share)


def test_host_part_is_the_same_under_tensor_parallelism():
    eff = host_preprocess_efficiency(Efficiency(), "llava-v1.6-34b", "image")
    profile = analytic_profile("llava-v1.6-34b", "rtx6000ada", efficiency=eff)
    assert profile.for_tp(2).host_preprocess_s([2340, 2340]) == profile.for_tp(1).host_preprocess_s(
        [2340, 2340]) == pytest.approx(2 * load_table().entry("llava-v1.6-34b", "image").seconds)


def test_residual_is_a_per_call_cost_on_the_encoder():
    base = analytic_profile("llava-v1.6-34b", "rtx6000ada").for_tp(1)
    with_residual = analytic_profile("llava-v1.6-34b", "rtx6000ada",
                                     efficiency=Efficiency(encode_call_residual_s=1.0)).for_tp(1)
    assert with_residual.encode_s([2340]) == pytest.approx(base.encode_s([2340]) + 1.0)
    assert with_residual.encode_s([2340] * 8) == pytest.approx(base.encode_s([2340] * 8) + 1.0)
