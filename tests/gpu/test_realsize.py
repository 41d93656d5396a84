"""Real-size stage modules: tiny forwards on the CPU, full dimensions checked on the meta device."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from live.gpu.realsize import PAIRS, build_encoder, build_lm
from live.gpu.realsize_lm import FULL_DIMS, cache_kwarg, lm_dims, random_cache

SPECS = Path(__file__).resolve().parents[2] / "calibration" / "specs" / "models"


@pytest.mark.parametrize(("model", "encoder"), [(m, e) for m, (e, _) in PAIRS.items()])
def test_tiny_encoder_runs_and_projects_to_the_lm_width(model: str, encoder: str) -> None:
    stage = build_encoder(encoder)
    out = stage.run(stage.make_inputs(2))
    assert out.shape[-1] == lm_dims(PAIRS[model][1], "tiny").hidden
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("lm", sorted(FULL_DIMS))
def test_tiny_lm_prefill_and_decode_on_a_random_cache(lm: str) -> None:
    stage = build_lm(lm, num_layers=2)
    out = stage.model(input_ids=torch.randint(3, 500, (1, 12)), logits_to_keep=1, use_cache=True)
    assert out.logits.shape == (1, 1, stage.dims.vocab)
    cache = random_cache(stage, 3, 10)
    step = stage.model(input_ids=torch.randint(3, 500, (3, 1)), use_cache=True,
                       **{cache_kwarg(stage.model): cache})
    assert step.logits.shape == (3, 1, stage.dims.vocab)


def test_gemma_builds_one_layer_of_each_type_and_scales_by_type() -> None:
    stage = build_lm("gemma-3-27b", size="full", device="meta")
    assert stage.built_types == ("sliding_attention", "full_attention")
    assert stage.model.config.layer_types == ["sliding_attention", "full_attention"]
    assert stage.full_type_counts() == {"sliding_attention": 52, "full_attention": 10}
    assert stage.scale_s(1.0, {"sliding_attention": 0.5, "full_attention": 2.0}) == 1.0 + 26.0 + 20.0
    with pytest.raises(ValueError, match="layer types"):
        stage.scale_s(1.0, {"full_attention": 1.0})


@pytest.mark.parametrize(("encoder", "tower_m", "tokens"), [
    ("clip-vit-l-336", 303.5, 2880), ("whisper-large-v3", 635.7, 63), ("qwen2.5-vl-vit", 684.4, 720)])
def test_full_encoders_have_published_sizes(encoder: str, tower_m: float, tokens: int) -> None:
    stage = build_encoder(encoder, size="full", device="meta")
    params = sum(p.numel() for p in stage.tower.parameters()) / 1e6
    assert params == pytest.approx(tower_m, rel=0.01)
    assert stage.lm_tokens_per_item == tokens


@pytest.mark.parametrize(("lm", "layer_m"),
                         [("yi-34b", 557.9), ("qwen2.5-32b", 487.6), ("gemma-3-27b", 412.9)])
def test_full_lm_layers_have_published_sizes(lm: str, layer_m: float) -> None:
    stage = build_lm(lm, size="full", device="meta")
    assert sum(p.numel() for p in stage.layers[0].parameters()) / 1e6 == pytest.approx(layer_m, rel=0.01)


@pytest.mark.parametrize("model", sorted(PAIRS))
def test_full_dims_agree_with_calibration_specs(model: str) -> None:
    path = SPECS / f"{model}.json"
    if not path.exists():
        pytest.skip(f"no calibration spec {path.name}")
    spec = {k: v["value"] for k, v in json.loads(path.read_text())["lm"].items() if isinstance(v, dict)}
    dims = FULL_DIMS[PAIRS[model][1]]
    assert (dims.hidden, dims.intermediate, dims.num_layers, dims.num_heads, dims.num_kv_heads,
            dims.head_dim, dims.vocab) == (spec["hidden_size"], spec["intermediate_size"], spec["num_layers"],
                                           spec["num_heads"], spec["num_kv_heads"], spec["head_dim"],
                                           spec["vocab_size"])


def test_unknown_names_and_sizes_fail_loudly() -> None:
    with pytest.raises(ValueError, match="unknown encoder"):
        build_encoder("vit-huge")
    with pytest.raises(ValueError, match="unknown size"):
        build_lm("yi-34b", size="small")
    with pytest.raises(ValueError, match="num_layers"):
        build_lm("yi-34b", num_layers=0)
    with pytest.raises(ValueError, match="batch_size"):
        build_encoder("clip-vit-l-336").make_inputs(0)
