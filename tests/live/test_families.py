"""Model zoo and families: configs per size, input shapes, token counts, validation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers.models.llava_next.modeling_llava_next import image_size_to_num_patches

from easerve_core.request import Modality
from live.families import FAMILIES, MMInput, get_family
from live.families.llava_next import image_tokens
from live.stages import encode_batch
from live.zoo import ModelSpec, build_model, count_params

CASES = [
    ("llava-next", Modality.IMAGE, [16, 40, 70, 88]),
    ("qwen2.5-vl", Modality.IMAGE, [9, 24, 7]),
    ("qwen2.5-vl", Modality.VIDEO, [16, 9]),
    ("qwen2-audio", Modality.AUDIO, [8, 30, 50]),
]


@pytest.fixture(scope="module")
def tiny_models():
    return {name: build_model(ModelSpec(name=name, size="tiny")) for name in FAMILIES}


@pytest.mark.parametrize(("name", "modality", "tokens"), CASES)
def test_encoder_gives_the_validated_token_counts(tiny_models, name, modality, tokens):
    model, family = tiny_models[name], get_family(name)
    mm = family.make_input(model.config, modality, tokens, np.random.default_rng(0))
    counts = family.validate(model.config, mm)
    feats = encode_batch(model, family, [mm, mm])
    assert [tuple(f.shape[0] for f in req) for req in feats] == [counts, counts]
    assert all(f.shape[1] == model.config.text_config.hidden_size for f in feats[0])
    if name != "llava-next":  # anyres only approximates the request; the others are exact
        assert list(counts) == [t if name == "qwen2.5-vl" else max(2, t) for t in tokens]


def test_llava_token_formula_matches_the_encoder(tiny_models):
    model = tiny_models["llava-next"]
    family = get_family("llava-next")
    for h, w in [(40, 60), (32, 32), (64, 30), (50, 50), (17, 90)]:
        size = model.config.vision_config.image_size
        tiles = image_size_to_num_patches((h, w), model.config.image_grid_pinpoints, size)
        mm = MMInput(modality=Modality.IMAGE, items=(torch.randn(tiles, 3, size, size),), meta=((h, w),))
        assert encode_batch(model, family, [mm])[0][0].shape[0] == image_tokens(model.config, h, w)


@pytest.mark.parametrize(("name", "modality", "tokens"), CASES)
def test_malformed_inputs_are_rejected(tiny_models, name, modality, tokens):
    model, family = tiny_models[name], get_family(name)
    mm = family.make_input(model.config, modality, tokens[:1], np.random.default_rng(0))
    bad_shape = MMInput(modality=modality, items=(mm.items[0][..., :-1],), meta=mm.meta)
    with pytest.raises(ValueError, match="shape"):
        family.validate(model.config, bad_shape)
    with pytest.raises(ValueError, match="zero items"):
        family.validate(model.config, MMInput(modality=modality, items=(), meta=()))
    with pytest.raises(ValueError, match="does not take"):
        family.validate(model.config, MMInput(modality=Modality.TEXT, items=mm.items, meta=mm.meta))


@pytest.mark.parametrize(("name", "low", "high"), [
    ("llava-next", 33e9, 36e9),  # LLaVA-v1.6-34B
    ("qwen2.5-vl", 32e9, 35e9),  # Qwen2.5-VL-32B
    ("qwen2-audio", 7.5e9, 9e9),  # Qwen2-Audio-7B
])
def test_full_sizes_build_on_the_meta_device(name, low, high):
    model = build_model(ModelSpec(name=name, size="full"), device="meta")
    assert low < count_params(model) < high


def test_small_is_a_few_million_params():
    for name in FAMILIES:
        assert 1e6 < count_params(build_model(ModelSpec(name=name, size="small"))) < 10e6


def test_unknown_names_fail_loudly():
    with pytest.raises(ValueError, match="known: "):
        get_family("gpt-4o")
    with pytest.raises(ValueError, match="size"):
        ModelSpec(name="llava-next", size="huge")
    assert get_family("ultravox").name == "qwen2-audio"
