"""The paper-anchored encoder call taken apart: measured host part + named residual, and its switch."""

from __future__ import annotations

import pytest

from calibration.host_preprocess import load_table
from easerve.experiments.anchor import ANCHOR_RPS, encode_call_parts, paper_anchored_efficiency
from easerve.experiments.setup import load_setup


def test_parts_add_up_to_the_papers_call_for_llava():
    parts = encode_call_parts()
    image = parts["image"]
    assert image.kernel_s + image.host_s + image.residual_s == pytest.approx(1.0 / ANCHOR_RPS)
    assert image.anchor_overhead_s == pytest.approx(1.0 / ANCHOR_RPS - image.kernel_s)
    assert image.explained_frac == pytest.approx(image.host_s / image.anchor_overhead_s)
    assert 0 < image.explained_frac < 1
    assert image.host_s == pytest.approx(load_table().entry("llava-v1.6-34b", "image").seconds)
    assert {p.residual_s for p in parts.values()} == {image.residual_s}  # one residual for every model


def test_residual_switch_drops_only_the_residual():
    on = paper_anchored_efficiency(modality="video")
    off = paper_anchored_efficiency(modality="video", residual=False)
    assert on.encode_call_residual_s == pytest.approx(encode_call_parts()["image"].residual_s)
    assert off.encode_call_residual_s == 0.0
    assert off.host_preprocess_s_per_mm_token == on.host_preprocess_s_per_mm_token > 0
    with pytest.raises(TypeError):
        paper_anchored_efficiency()  # type: ignore[call-arg]  # the host part needs the model


def test_load_setup_switch_changes_the_encoder_by_the_residual():
    on, off = load_setup("image", anchored=True), load_setup("image", anchored=True, residual=False)
    items = [2340]
    enc_on, enc_off = on.profile.for_tp(1), off.profile.for_tp(1)
    assert enc_on.encode_s(items) - enc_off.encode_s(items) == pytest.approx(
        on.efficiency.encode_call_residual_s)
    assert enc_on.host_preprocess_s(items) == enc_off.host_preprocess_s(items) > 0
    assert off.slos["moderate"].ttft_s < on.slos["moderate"].ttft_s
    with pytest.raises(ValueError, match="not both"):
        load_setup("image", anchored=True, efficiency=on.efficiency)


def test_free_in_step_encoder_keeps_the_host_part():
    free = load_setup("audio", anchored=True, free_in_step_encoder=True)
    assert free.aggregated_profile.efficiency.encode_call_residual_s == 0.0
    assert free.aggregated_profile.efficiency.host_preprocess_s_per_item == \
        free.efficiency.host_preprocess_s_per_item > 0
