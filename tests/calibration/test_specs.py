"""Model and GPU specs: registries, provenance, and the arithmetic built on them."""

from __future__ import annotations

import pytest

from calibration.networks import network_names, network_spec
from calibration.processor_spec import ProcessorSpec
from calibration.specs import ItemMapping, TypicalRequest, gpu_names, gpu_spec, model_names, model_spec

MODELS = ["llava-v1.6-34b", "qwen2.5-vl-32b", "ultravox-v0.6-gemma3-27b"]
GPUS = ["a100-sxm4-80gb", "b200", "h100-sxm", "h20", "h200", "l40s", "mi300x", "rtx6000ada", "rtxpro6000"]


def test_registries_list_the_paper_models_and_gpus():
    assert model_names() == sorted(MODELS)
    assert gpu_names() == GPUS


@pytest.mark.parametrize("lookup, kind", [(model_spec, "model"), (gpu_spec, "GPU")])
def test_unknown_name_fails_listing_known(lookup, kind):
    with pytest.raises(ValueError, match=f"unknown {kind} 'nope'; known: .*"):
        lookup("nope")


@pytest.mark.parametrize("name", MODELS)
def test_every_model_number_has_a_marked_source(name):
    spec = model_spec(name)
    for section in ("lm", "encoder"):
        for key in spec.to_dict()[section]:
            entry = spec.provenance[f"{section}.{key}"]
            assert entry[:3] in ("[V]", "[D]", "[G]") and len(entry) > 8, (section, key)


@pytest.mark.parametrize("name", GPUS)
def test_every_gpu_number_has_a_marked_source(name):
    spec = gpu_spec(name)
    for key in spec.to_dict():
        if key not in ("name", "full_name"):
            assert spec.provenance[key][:3] in ("[V]", "[D]", "[G]"), key


@pytest.mark.parametrize("name, params_b, kv_kib", [
    ("llava-v1.6-34b", 34.4, 240), ("qwen2.5-vl-32b", 32.8, 256), ("ultravox-v0.6-gemma3-27b", 27.0, 496),
])
def test_lm_size_and_kv_per_token_match_published_figures(name, params_b, kv_kib):
    lm = model_spec(name).lm
    assert lm.params / 1e9 == pytest.approx(params_b, abs=0.15)
    assert lm.num_layers * lm.kv_bytes_per_token_layer == kv_kib * 1024


def test_gemma_sliding_layers_keep_only_their_window():
    lm = model_spec("ultravox-v0.6-gemma3-27b").lm
    per_layer = lm.kv_bytes_per_token_layer
    assert lm.kv_bytes(1000) == 62 * 1000 * per_layer
    assert lm.kv_bytes(5000) == (10 * 5000 + 52 * 1024) * per_layer


def test_item_mappings_give_the_encoder_work_of_the_notes():
    assert model_spec("llava-v1.6-34b").mapping.segments(2928) == [577] * 5
    assert model_spec("llava-v1.6-34b").mapping.segments(576) == [577]
    assert sum(model_spec("ultravox-v0.6-gemma3-27b").mapping.segments(63)) == 504
    assert model_spec("ultravox-v0.6-gemma3-27b").mapping.segments(250) == [1500, 500]
    assert sum(model_spec("qwen2.5-vl-32b").mapping.segments(7200)) == 28800


def test_bad_spec_values_are_refused_naming_the_field():
    with pytest.raises(ValueError, match=r"ItemMapping\.kind"):
        ItemMapping(kind="spiral")
    with pytest.raises(ValueError, match=r"ItemMapping\.positions_per_lm_token"):
        ItemMapping(kind="linear", segment_positions=10)
    data = model_spec("llava-v1.6-34b").to_dict()
    data["lm"]["num_layers"] = -1
    with pytest.raises(ValueError, match=r"LMSpec.num_layers must be > 0, got -1"):
        type(model_spec("llava-v1.6-34b")).from_dict(data)


@pytest.mark.parametrize("context", ["4k", 1.5, -1, True])
def test_a_context_that_is_not_a_whole_count_is_refused(context):
    data = model_spec("llava-v1.6-34b").to_dict()
    with pytest.raises(ValueError, match=r"max_context_tokens must be a whole number >= 0"):
        type(model_spec("llava-v1.6-34b")).from_dict({**data, "max_context_tokens": context})


@pytest.mark.parametrize(("build", "needle"), [
    # values whose arithmetic would divide by zero or fill the host's memory: each found by
    # mutating shipped specs at random, each now refused naming the field
    (lambda: ItemMapping(kind="linear", positions_per_lm_token=1e30, segment_positions=1500),
     r"ItemMapping\.segment_positions \(1500\) must hold at least one LM token"),
    (lambda: ProcessorSpec(kind="tiles", tile_px=448, tokens_per_tile=256, min_tiles=1, max_tiles=10**20),
     r"ProcessorSpec\.max_tiles must be <= 256"),
    (lambda: ProcessorSpec(kind="anyres", tile_px=336, patch_px=10**9, pinpoints_px=((336, 672),)),
     r"ProcessorSpec\.patch_px \(1000000000\) must be <= tile_px \(336\)"),
    (lambda: ProcessorSpec(kind="anyres", tile_px=336, patch_px=14, pinpoints_px=((336, 0),)),
     r"ProcessorSpec\.pinpoints_px\[0\] must be at least tile_px \(336\) on each side, got \(336, 0\)"),
    (lambda: ProcessorSpec(kind="anyres", tile_px=336, patch_px=14, pinpoints_px=((336, 672), (336, 1e400))),
     r"ProcessorSpec\.pinpoints_px\[1\] must be \[height, width\] in whole pixels, got \(336, inf\)"),
    (lambda: TypicalRequest(prompt_tokens=128, output_tokens=128, mm_tokens_per_item=(10**20,)),
     r"TypicalRequest\.mm_tokens_per_item\[0\] must be <= 1,048,576"),
    (lambda: TypicalRequest(prompt_tokens=128, output_tokens=128, mm_tokens_per_item=(0,)),
     r"TypicalRequest\.mm_tokens_per_item\[0\] must be a whole number >= 1"),
])
def test_spec_values_that_would_break_the_arithmetic_are_refused(build, needle):
    with pytest.raises(ValueError, match=needle):
        build()


def test_sm_partition_rounds_up_to_the_granularity():
    ada, hopper = gpu_spec("rtx6000ada"), gpu_spec("h200")
    assert ada.partition_share(1.0) == 1.0
    assert ada.partition_share(0.2) == 30 / 142  # 28.4 SMs -> 30 (multiple of 2)
    assert hopper.partition_share(0.2) == 32 / 132  # 26.4 SMs -> 32 (multiple of 8)
    assert hopper.partition_share(0.01) == 8 / 132  # the minimum partition
    with pytest.raises(ValueError, match="sm_share"):
        ada.partition_share(0.0)


def test_network_specs_carry_sources_and_unknown_names_fail() -> None:
    assert network_names() == ["eth-100g", "ndr-200g", "ndr-400g"]
    for name in network_names():
        spec = network_spec(name)
        assert spec.nic_bytes_per_s == spec.line_rate_gbit_per_s * 1e9 / 8
        assert set(spec.provenance) == {"line_rate_gbit_per_s", "nic_bytes_per_s", "nic_latency_s"}
        assert all(p.startswith("[") for p in spec.provenance.values())
    with pytest.raises(ValueError, match="unknown network 'ib9'; known: eth-100g"):
        network_spec("ib9")


def test_what_each_model_takes_beside_text():
    assert model_spec("llava-v1.6-34b").modalities == ("image",)
    assert model_spec("qwen2.5-vl-32b").modalities == ("image", "video")
    assert model_spec("ultravox-v0.6-gemma3-27b").modalities == ("audio",)
    # not a cost: profiles that embed to_dict() stay as they were
    assert "modalities" not in model_spec("qwen2.5-vl-32b").to_dict()


def test_the_context_each_hand_written_spec_says():
    llava = model_spec("llava-v1.6-34b")
    assert llava.max_context_tokens == 4096 and llava.provenance["max_context_tokens"].startswith("[V]")
    # the notes' sources give no context for these two: none is claimed, so nothing is capped
    assert model_spec("qwen2.5-vl-32b").max_context_tokens == 0
    assert model_spec("ultravox-v0.6-gemma3-27b").max_context_tokens == 0
    assert "max_context_tokens" not in llava.to_dict()


@pytest.mark.parametrize(("takes", "what"), [
    (["audio"], r"modalities \['audio'\] must hold its modality 'image'"),
    (["image", "smell"], "unknown modality 'smell'"),
])
def test_a_spec_must_take_its_own_modality_and_known_ones(takes, what):
    data = dict(model_spec("llava-v1.6-34b").to_dict(), modalities=takes)
    with pytest.raises(ValueError, match=what):
        type(model_spec("llava-v1.6-34b")).from_dict(data)


def test_a_spec_file_written_again_is_read_again(tmp_path):
    import json
    import os

    from calibration.specs import SPEC_DIR, model_spec

    data = json.loads((SPEC_DIR / "models" / "llava-v1.6-34b.json").read_text())
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    first = model_spec(str(path))
    assert model_spec(str(path)) is first  # read once while the file stays as it is
    data["max_context_tokens"]["value"] = 8192  # imported again, with another context
    path.write_text(json.dumps(data))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # whatever the clock's grain
    assert first.max_context_tokens == 4096 and model_spec(str(path)).max_context_tokens == 8192
