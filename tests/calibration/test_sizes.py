"""Raw item sizes to LM tokens by the model's processor rule (calibration.sizes), checked three ways.

* Against ``transformers``' processors on tiny inputs, offline: a tiny
  Qwen2.5-VL and a tiny LLaVA-NeXT imported with their processor settings;
  Qwen2-Audio's feature-length rule; Qwen3-VL's video token count
  (``Qwen3VLVideoProcessor.get_num_of_video_patches``). Qwen2's video processor
  needs torchvision, which these machines lack: its videos are checked by arithmetic.
* The three paper specs reproduce the token counts of the named mixes.
* End to end: ``easerve sim`` and ``easerve workload`` print the resolved
  tokens and the requests carry them; bad input is one line, exit 2, nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calibration.sizes import resolve_workload
from easerve.cli import main
from easerve_core.workload import WorkloadSpec, mix
from tests.calibration import importer_configs as cfgs
from tests.cli.refusal import refused

PRE = {"min_pixels": 56 * 56, "max_pixels": 224 * 224, "patch_size": 14, "merge_size": 2,
       "temporal_patch_size": 2}
SIZES = [[170, 120], [64, 64], [300, 90], [1024, 768]]


def _tokens(table: dict[str, object], model: str) -> tuple[int, ...]:
    spec = resolve_workload(WorkloadSpec.from_dict({"rate_hz": 1.0, **table}), model)
    return spec.mix.item_tokens


def _imported(tmp_path: Path, family: str, pre: dict[str, object] | None = None) -> str:
    folder = cfgs.write(tmp_path / family, cfgs.tiny_configs()[family])
    if pre is not None:
        (folder / "preprocessor_config.json").write_text(json.dumps(pre))
    out = tmp_path / f"{family}.json"
    assert main(["model", "import", str(folder), "--out", str(out)]) == 0
    return str(out)


def test_qwen_images_match_the_processor(tmp_path: Path) -> None:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    spec = _imported(tmp_path, "qwen2_5_vl", PRE)
    proc = Qwen2VLImageProcessorPil(**PRE)
    expected = []
    for width, height in SIZES:
        image = np.zeros((height, width, 3), dtype=np.uint8)
        grid = proc(images=[image], return_tensors="np")["image_grid_thw"][0]
        expected.append(int(grid[0] * grid[1] * grid[2]) // 4)
    assert _tokens({"images": SIZES}, spec) == tuple(expected)


def test_llava_next_images_match_the_processor(tmp_path: Path) -> None:
    from transformers import LlavaNextProcessor

    spec = _imported(tmp_path, "llava_next")
    config = cfgs.tiny_configs()["llava_next"]
    proc = LlavaNextProcessor.__new__(LlavaNextProcessor)  # only the token-count arithmetic is used
    proc.patch_size, proc.num_additional_image_tokens = config.vision_config.patch_size, 1
    proc.vision_feature_select_strategy = "default"
    side = config.vision_config.image_size
    proc.image_processor = type("IP", (), {"image_grid_pinpoints": config.image_grid_pinpoints,
                                           "size": {"shortest_edge": side},
                                           "crop_size": {"height": side, "width": side}})()
    expected = tuple(proc._get_number_of_features(h, w, side, side) - 1 for w, h in SIZES)  # CLS dropped
    assert _tokens({"images": SIZES}, spec) == expected


@pytest.mark.parametrize("seconds", [1.0, 10.0, 29.5, 45.0])
def test_qwen2_audio_matches_the_model_rule(tmp_path: Path, seconds: float) -> None:
    import torch
    from transformers import Qwen2AudioEncoder

    spec = _imported(tmp_path, "qwen2_audio")
    frames = round(min(seconds, 30.0) * 100)  # the feature extractor cuts clips at 30 s
    encoder = Qwen2AudioEncoder.__new__(Qwen2AudioEncoder)
    _, out = Qwen2AudioEncoder._get_feat_extract_output_lengths(encoder, torch.tensor([frames]))
    assert _tokens({"audio_s": [seconds]}, spec) == (int(out[0]),)


def test_paper_specs_reproduce_the_named_mixes() -> None:
    """docs/workloads.md's sizes (width x height) give the presets' tokens."""
    llava = [[672, 672], [640, 480], [1280, 720], [1920, 1080], [1008, 336]]
    assert _tokens({"images": llava}, "llava-v1.6-34b") == (2928, 2340, 1948, 1948, 2328)
    assert _tokens({"images": [[1024, 1024], [1280, 720], [1920, 1080]]}, "qwen2.5-vl-32b") == \
        mix("qwen-image").item_tokens
    clips = [{"size": [1280, 720], "seconds": s, "fps": 2} for s in (5, 10, 20)]
    assert _tokens({"videos": clips}, "qwen2.5-vl-32b") == mix("qwen-video").item_tokens
    assert _tokens({"videos": [{"size": [1280, 720], "frames": 16}]}, "qwen2.5-vl-32b") == \
        mix("qwen-video-rmm16").item_tokens
    assert _tokens({"audio_s": [5, 10, 15, 20, 30]}, "ultravox-v0.6-gemma3-27b") == \
        mix("ultravox-audio").item_tokens
    table = {"rate_hz": 1.0, "images": [[1024, 1024], [1280, 720], [1920, 1080]],
             "image_weights": [.4, .3, .3]}
    assert resolve_workload(WorkloadSpec.from_dict(table), "qwen2.5-vl-32b").mix == mix("qwen-image")


def _config(tmp_path: Path, model: str, workload: str, *, name: str = "run.toml") -> Path:
    key = "spec" if model.endswith(".json") else "name"
    path = tmp_path / name
    path.write_text("\n".join([
        "seed = 0", "[model]", f'{key} = "{model}"', "[cluster]", 'gpu = "h200"', "num_gpus = 8",
        "[deployment]", "encode = { num_workers = 2, tp = 1 }", "prefill = { num_workers = 1, tp = 2 }",
        "decode = { num_workers = 2, tp = 2 }", "max_encode_batch = 4", "remote_fraction = 1.0",
        "[workload]", workload, "rate_hz = 1.0", "num_requests = 30", ""]))
    return path


@pytest.mark.parametrize(("model", "expected"), [
    ("qwen2.5-vl-32b", {999, 2691}),   # 1024x768 -> 1,036x756 px = 37x27 tokens; 1920x1080 -> 1,932x1,092
    ("llava-v1.6-34b", {2340, 1948}),  # both on the 672x672 grid, padding rows removed (4:3, 16:9)
])
def test_sim_runs_on_raw_image_sizes(tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str,
                                     expected: set[int]) -> None:
    tokens = set(_tokens({"images": [[1024, 768], [1920, 1080]]}, model))
    assert tokens == expected
    images = "images = [[1024, 768], [1920, 1080]]\nimage_weights = [1, 1]"
    capsys.readouterr()
    assert main(["sim", str(_config(tmp_path, model, images)), "--out", str(tmp_path / "sim"),
                 "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "workload.images: 1024x768 -> " in out and f"{model} processor" in out
    records = pd.read_parquet(tmp_path / "sim" / "records.parquet")
    assert set(records["mm_tokens"].astype(int)) == tokens  # one image per request


def test_workload_command_writes_resolved_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _imported(tmp_path, "qwen2_5_vl", PRE)
    config = _config(tmp_path, Path(spec).name, "images = [[170, 120]]")
    capsys.readouterr()
    assert main(["workload", str(config), "--out", str(tmp_path / "t.csv")]) == 0
    assert "workload.images: 170x120 -> 24 LM tokens" in capsys.readouterr().out
    rows = pd.read_csv(tmp_path / "t.csv")
    assert set(rows["mm_tokens_per_item"].astype(str)) == {"24"}  # 168x112 px = 6x4 merged patches


@pytest.mark.parametrize("command", ["sim", "workload"])
def test_raw_sizes_for_a_spec_without_a_rule_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         command: str) -> None:
    data = json.loads(Path(_imported(tmp_path, "internvl")).read_text())
    del data["processor"]  # a spec without a rule (as Llama-4's, or one written by hand)
    (tmp_path / "no-rule.json").write_text(json.dumps(data))
    config = _config(tmp_path, "no-rule.json", "images = [[640, 480]]")
    refused(tmp_path, capsys, [command, str(config), "--out", str(tmp_path / "out.csv")],
            "workload.images", "has no processor rule")


def test_a_processor_table_whose_video_bounds_hold_neither_a_frame_nor_a_clip_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(Path(_imported(tmp_path, "qwen2_5_vl", PRE)).read_text())
    data["processor"]["video_pixels_per"] = "second"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    config = _config(tmp_path, "bad.json", "images = [[640, 480]]")
    refused(tmp_path, capsys, ["sim", str(config), "--out", str(tmp_path / "sim")],
            "video_pixels_per", "frame, clip")


@pytest.mark.parametrize("command", ["sim", "workload"])
def test_raw_sizes_of_the_wrong_modality_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     command: str) -> None:
    config = _config(tmp_path, "llava-v1.6-34b", "audio_s = [5, 10]")
    refused(tmp_path, capsys, [command, str(config), "--out", str(tmp_path / "out.csv")],
            "workload.audio_s", "takes workload.images")


def test_raw_sizes_without_a_model_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "w.toml"
    config.write_text("[workload]\nimages = [[640, 480]]\nrate_hz = 1.0\n")
    refused(tmp_path, capsys, ["workload", str(config), "--out", str(tmp_path / "t.csv")],
            "workload.images", "need a [model]")


@pytest.mark.parametrize(("spec", "expected"), [
    # 32 px merged patches (patch 16, merge 2): 1,280x704 px and 1,920x1,088 px, within the bounds
    # Qwen3-VL checkpoints ship (65,536-16,777,216 px; with Qwen2VLImageProcessor's defaults, which
    # the spec carried before bench/import_examples.py typed them in, 1920x1080 was scaled to 943)
    ("qwen3-vl-8b", (880, 2040)),
    ("gemma-4-26b-a4b", (280, 280)),  # vision_soft_tokens_per_image, whatever the size
])
def test_the_shipped_aiconfigurator_specs_take_raw_image_sizes(spec: str, expected: tuple[int, ...]) -> None:
    from easerve.resources import CONFIGS_DIR

    path = CONFIGS_DIR / "specs" / "models" / f"{spec}.json"
    assert _tokens({"images": [[1280, 720], [1920, 1080]]}, str(path)) == expected


def test_the_shipped_qwen3_vl_samples_long_videos_as_its_processor_does() -> None:
    """20 minutes at 2 fps is 768 frames, not 2,400 (the sampler's max_frames); the clip's pixel
    bound then shares 25,165,824 px among them: 128x224 px a frame, 384 groups of 28 tokens."""
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    from easerve.resources import CONFIGS_DIR

    path = CONFIGS_DIR / "specs" / "models" / "qwen3-vl-8b.json"
    processor = Qwen3VLVideoProcessor(size={"shortest_edge": 4_096, "longest_edge": 25_165_824})
    expected = processor.get_num_of_video_patches(768, 1080, 1920) // 4
    assert _tokens({"videos": [{"size": [1920, 1080], "seconds": 1200, "fps": 2}]}, str(path)) == (expected,)


@pytest.mark.parametrize("shipped", [False, True])
def test_an_imported_qwen3_vl_sizes_videos_as_its_video_processor_does(tmp_path: Path, shipped: bool) -> None:
    """Qwen3-VL's video bounds hold the clip (frames x height x width), read from
    video_preprocessor_config.json (the checkpoint's) or, without one, the class's defaults."""
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    source = cfgs.aic_config("Qwen--Qwen3-VL-2B-Instruct")
    folder = tmp_path / "qwen3-vl-2b"
    folder.mkdir()
    (folder / source.name).write_text(source.read_text())
    bounds = {"shortest_edge": 4_096, "longest_edge": 25_165_824}
    if shipped:
        (folder / "video_preprocessor_config.json").write_text(json.dumps({"size": bounds}))
    spec = tmp_path / "qwen3-vl-2b.json"
    assert main(["model", "import", str(folder / source.name), "--out", str(spec)]) == 0
    table = json.loads(spec.read_text())["processor"]
    assert table["video_pixels_per"]["value"] == "clip"
    assert table["video_max_pixels"]["mark"] == ("V" if shipped else "D")
    processor = Qwen3VLVideoProcessor(**({"size": bounds} if shipped else {}))
    clips = [(1280, 720, 20), (1920, 1080, 120), (640, 480, 16), (100, 3000, 5), (20, 20, 2)]
    expected = tuple(processor.get_num_of_video_patches(f, h, w) // 4 for w, h, f in clips)
    assert len(set(expected)) == len(clips)
    videos = [{"size": [w, h], "frames": f} for w, h, f in clips]
    assert _tokens({"videos": videos}, str(spec)) == expected


def test_an_imported_qwen_reads_the_video_processors_own_bounds(tmp_path: Path) -> None:
    """video_preprocessor_config.json's min_pixels/max_pixels win over its size, as in
    Qwen2VLVideoProcessor; before Qwen3-VL the bounds hold each frame."""
    from calibration.importers import processor_rules as rules

    folder = cfgs.write(tmp_path / "qwen", cfgs.tiny_configs()["qwen2_5_vl"])
    (folder / "preprocessor_config.json").write_text(json.dumps(PRE))
    video = {"min_pixels": 56 * 56, "max_pixels": 112 * 112, "size": {"shortest_edge": 1, "longest_edge": 2}}
    (folder / "video_preprocessor_config.json").write_text(json.dumps(video))
    spec = tmp_path / "qwen.json"
    assert main(["model", "import", str(folder), "--out", str(spec)]) == 0
    table = json.loads(spec.read_text())["processor"]
    assert table["video_max_pixels"] == {"value": 112 * 112, "mark": "V",
                                         "source": "video_preprocessor_config.json min_pixels/max_pixels"}
    assert "video_pixels_per" not in table  # per frame
    frame = rules.qwen_image_tokens(224, 224, patch_px=PRE["patch_size"], merge=2, min_pixels=56 * 56,
                                    max_pixels=112 * 112)
    assert frame < rules.qwen_image_tokens(224, 224, patch_px=PRE["patch_size"], merge=2, min_pixels=56 * 56,
                                           max_pixels=224 * 224)
    assert _tokens({"videos": [{"size": [224, 224], "frames": 4}]}, str(spec)) == (2 * frame,)


def test_an_imported_internvl_tiles_raw_images_as_its_processor_does(tmp_path: Path) -> None:
    from PIL import Image
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

    spec = _imported(tmp_path, "internvl")
    table = json.loads(Path(spec).read_text())["processor"]
    tile, per_tile = table["tile_px"]["value"], table["tokens_per_tile"]["value"]
    processor = GotOcr2ImageProcessorPil(crop_to_patches=True, size={"height": tile, "width": tile},
                                         min_patches=1, max_patches=12)  # InternVLProcessor's defaults
    sizes = [[1280, 720], [300, 300], [90, 700]]
    tiles = [int(processor(Image.new("RGB", tuple(size)))["num_patches"][0]) for size in sizes]
    assert len(set(tiles)) > 1  # the sizes take different grids
    assert _tokens({"images": sizes}, spec) == tuple(per_tile * n for n in tiles)


def test_an_imported_idefics3_splits_raw_images_as_its_processor_does(tmp_path: Path) -> None:
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    spec = _imported(tmp_path, "idefics3")
    table = json.loads(Path(spec).read_text())["processor"]
    tile, longest = table["tile_px"]["value"], table["longest_edge_px"]["value"]
    per_tile = table["tokens_per_tile"]["value"]
    kwargs = {"size": {"longest_edge": longest}, "max_image_size": {"longest_edge": tile}}
    sizes = [[1280, 720], [300, 300], [90, 700]]
    views = [Idefics3ImageProcessorPil().get_number_of_image_patches(h, w, kwargs)[0] or 1 for w, h in sizes]
    assert len(set(views)) > 1  # the sizes split differently
    assert _tokens({"images": sizes}, spec) == tuple(per_tile * n for n in views)


def test_an_imported_llava_onevision_pools_large_images_as_its_processor_does(tmp_path: Path) -> None:
    from transformers import LlavaOnevisionProcessor

    spec = _imported(tmp_path, "llava_onevision")
    table = json.loads(Path(spec).read_text())["processor"]
    tile, patch = table["tile_px"]["value"], table["patch_px"]["value"]
    proc = LlavaOnevisionProcessor.__new__(LlavaOnevisionProcessor)  # only the token-count arithmetic
    proc.num_image_tokens = (tile // patch) ** 2
    proc.vision_aspect_ratio = f"anyres_max_{table['anyres_max']['value']}"
    proc.image_processor = type("IP", (), {"image_grid_pinpoints": table["pinpoints_px"]["value"]})()
    sizes = [[1280, 720], [tile, tile], [8 * tile, 8 * tile]]
    expected = tuple(proc._get_number_of_features(h, w, tile, tile) for w, h in sizes)
    assert _tokens({"images": sizes}, spec) == expected


SPECS = Path(__file__).parents[2] / "easerve" / "configs" / "specs" / "models"
ONEVISION = str(SPECS / "llava-onevision-qwen2-7b.json")


def _crops(family: str, pinpoints: object, tile: int, sizes: list[list[int]]) -> list[int]:
    """Tower forwards per image: the crops ``transformers``' own image processor makes of a blank
    image of each size (the base view and every tile of the grid it is padded to)."""
    if family == "llava_next":
        from transformers.models.llava_next.image_processing_pil_llava_next import (
            LlavaNextImageProcessorPil as Processor,
        )
        size: dict[str, int] = {"shortest_edge": tile}
    else:
        from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
            LlavaOnevisionImageProcessorPil as Processor,
        )
        size = {"height": tile, "width": tile}
    proc = Processor(image_grid_pinpoints=pinpoints, size=size, crop_size={"height": tile, "width": tile})
    blanks = [np.zeros((h, w, 3), dtype=np.uint8) for w, h in sizes]
    return [int(proc(images=[image], return_tensors="np")["pixel_values"].shape[1]) for image in blanks]


@pytest.mark.parametrize("model", ["llava-v1.6-34b", str(SPECS / "llava-v1.6-vicuna-13b.json")])
def test_llava_next_prices_its_encoder_on_every_tile_of_the_padded_grid(model: str) -> None:
    """LLaVA-NeXT pads an image to its grid, and the tower encodes every tile before the padding's
    features are removed: a 4:3 or 16:9 image on the 672x672 grid leaves fewer LM tokens than
    the five tiles it costs. Raw sizes keep the encoder's tokens, which the item mapping reads back
    as ``transformers``' own crop count, where the LM tokens alone would give another."""
    from calibration.specs import model_spec

    spec = model_spec(model)
    assert spec.processor is not None
    pins, tile = [list(p) for p in spec.processor.pinpoints_px], spec.processor.tile_px
    sizes = [[672, 672], [640, 480], [1280, 720], [720, 1280], [1008, 336], [300, 90], [4032, 3024]]
    mix = resolve_workload(WorkloadSpec.from_dict({"rate_hz": 1.0, "images": sizes}), model).mix
    forwards = [len(spec.mapping.segments(t)) for t in mix.item_encode_tokens]
    assert forwards == _crops("llava_next", pins, tile, sizes) == [5, 5, 5, 5, 4, 3, 5]
    kept = [t == e for t, e in zip(mix.item_tokens, mix.item_encode_tokens, strict=True)]
    assert kept == [True, False, False, False, True, True, False]  # the LM's count where it gives them
    assert [len(spec.mapping.segments(t)) for t in mix.item_tokens] == [5, 4, 4, 4, 4, 3, 4]  # one short
    # an image whose LM tokens already give its tiles carries no second list
    square = resolve_workload(WorkloadSpec.from_dict({"rate_hz": 1.0, "images": [[672, 672], [1008, 336]]}),
                              model).mix
    assert square.item_encode_tokens == ()


def test_llava_onevision_prices_its_encoder_on_every_tile_it_encodes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``anyres_max`` pools a large image's features, and unpadding removes the padding's, after
    the tower has encoded every tile: the mix keeps each item's encoder tokens (the item mapping
    reads them back as the processor's own crop count), and both the simulator's encoder and the
    capacity screen work on them, not on the pooled LM tokens."""
    from transformers import LlavaOnevisionProcessor

    from calibration.specs import model_spec
    from easerve_core.has.screen import typical_shape

    table = json.loads(Path(ONEVISION).read_text())["processor"]
    tile, patch = table["tile_px"]["value"], table["patch_px"]["value"]
    proc = LlavaOnevisionProcessor.__new__(LlavaOnevisionProcessor)  # only the token-count arithmetic
    proc.num_image_tokens = (tile // patch) ** 2
    proc.image_processor = type("IP", (), {"image_grid_pinpoints": table["pinpoints_px"]["value"]})()
    proc.vision_aspect_ratio = f"anyres_max_{table['anyres_max']['value']}"
    sizes = [[1280, 720], [2304, 2304], [4032, 3024]]
    pooled = tuple(proc._get_number_of_features(h, w, tile, tile) for w, h in sizes)
    workload = resolve_workload(WorkloadSpec.from_dict({"rate_hz": 1.0, "images": sizes}), ONEVISION)
    assert workload.mix.item_tokens == pooled
    encoded = workload.mix.item_encode_tokens
    mapping = model_spec(ONEVISION).mapping
    assert [len(mapping.segments(t)) for t in encoded] == \
        _crops("llava_onevision", table["pinpoints_px"]["value"], tile, sizes) == [9, 37, 31]
    assert [len(mapping.segments(t)) for t in pooled] == [8, 10, 10]  # what the LM tokens alone imply
    shape = typical_shape(workload.mix)
    assert shape.encode_tokens_per_item == (round(sum(encoded) / 3),)
    # an image whose LM tokens already give its tiles carries no second list
    assert resolve_workload(WorkloadSpec.from_dict({"rate_hz": 1.0, "images": [[672, 672]]}),
                            ONEVISION).mix.item_encode_tokens == ()

    def encode_s(name: str, workload_lines: str) -> pd.DataFrame:
        config = _config(tmp_path, ONEVISION, workload_lines, name=f"{name}.toml")
        assert main(["sim", str(config), "--out", str(tmp_path / name), "--no-plots"]) == 0
        return pd.read_parquet(tmp_path / name / "records.parquet")

    capsys.readouterr()
    raw = encode_s("raw", "images = [[2304, 2304]]")
    assert f"2304x2304 -> {pooled[1]:,} (encoder: {encoded[1]:,}) LM tokens" in capsys.readouterr().out
    lm_only = encode_s("lm", f"item_tokens = [{pooled[1]}]")
    told = encode_s("told", f"item_tokens = [{pooled[1]}]\nitem_encode_tokens = [{encoded[1]}]")
    for frame in (raw, lm_only, told):
        assert set(frame["mm_tokens"].astype(int)) == {pooled[1]}  # Prefill sees the pooled tokens
    took = {name: float((f["encode_end_s"] - f["encode_start_s"]).median())
            for name, f in (("raw", raw), ("lm", lm_only), ("told", told))}
    assert took["raw"] == took["told"]
    assert took["raw"] > 2.5 * took["lm"]  # 37 tiles' tower forwards against the 10 the LM tokens imply


def test_llava_onevision_s_typical_request_prefills_pooled_tokens_and_encodes_every_tile(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The imported spec's typical request (the largest grid) gives the LM its pooled tokens and
    the encoder the tiles before pooling; ``profile show`` prices each stage on its own count, and a
    model that pools nothing embeds no second list in its profiles."""
    from calibration.specs import model_spec

    typical = model_spec(ONEVISION).typical_request
    workload = resolve_workload(WorkloadSpec.from_dict({"rate_hz": 1.0, "images": [[2304, 2304]]}), ONEVISION)
    assert typical.mm_tokens_per_item == workload.mix.item_tokens
    assert typical.encode_tokens_per_item == workload.mix.item_encode_tokens
    assert "encode_tokens_per_item" not in model_spec("llava-v1.6-34b").to_dict()["typical_request"]
    assert model_spec(ONEVISION).to_dict()["typical_request"]["encode_tokens_per_item"] == \
        list(typical.encode_tokens_per_item)
    doc = tmp_path / "ov.json"
    assert main(["profile", "analytic", "--model", ONEVISION, "--gpu", "b200", "--out", str(doc)]) == 0
    capsys.readouterr()
    assert main(["profile", "show", str(doc)]) == 0
    out = capsys.readouterr().out
    (pooled,), (tower,) = typical.mm_tokens_per_item, typical.encode_tokens_per_item
    assert f"items=[{pooled}] (encoder: [{tower}] before pooling)" in out
    assert f"(seq {typical.prompt_tokens + pooled} tokens)" in out
    assert main(["profile", "show", str(doc), "--items", "576"]) == 0  # told LM tokens: the encoder's too
    assert "items=[576] output" in capsys.readouterr().out


def test_llava_onevision_sizes_videos_as_its_processor_does(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A clip is its frames, each one 384 px tile pooled 2x2 (rounding up), plus one newline:
    ``LlavaOnevisionProcessor.replace_video_token``'s count; the encoder works on the frames' features
    before pooling, and the simulator serves the videos (the spec takes them)."""
    from transformers import LlavaOnevisionProcessor

    from calibration.specs import model_spec

    table = json.loads(Path(ONEVISION).read_text())["processor"]
    tile, patch = table["tile_px"]["value"], table["patch_px"]["value"]
    proc = LlavaOnevisionProcessor.__new__(LlavaOnevisionProcessor)
    proc.num_image_tokens = (tile // patch) ** 2
    proc.video_token = "<v>"
    clips = [1, 8, 16, 32]
    expected = tuple(proc.replace_video_token({"pixel_values_videos": [np.zeros((n, 3, tile, tile))]}, 0)
                     .count("<v>") for n in clips)
    videos = [{"size": [1280, 720], "frames": n} for n in clips]
    workload = resolve_workload(WorkloadSpec.from_dict({"rate_hz": 1.0, "videos": videos}), ONEVISION)
    assert workload.mix.item_tokens == expected == tuple(196 * n + 1 for n in clips)
    # one tower forward a frame, as the item mapping reads them back (the first where the base view is)
    # (a single frame's LM tokens give its one forward already: kept as they are)
    assert workload.mix.item_encode_tokens == (196 + 1, *(729 + (n - 1) * 756 for n in clips[1:]))
    mapping = model_spec(ONEVISION).mapping
    assert [len(mapping.segments(t)) for t in workload.mix.item_encode_tokens] == clips
    seconds = resolve_workload(WorkloadSpec.from_dict(
        {"rate_hz": 1.0, "videos": [{"size": [640, 360], "seconds": 8, "fps": 2}]}), ONEVISION)
    assert seconds.mix.item_tokens == (196 * 16 + 1,)  # the caller samples: 8 s at 2 fps, 16 frames
    assert "video" in model_spec(ONEVISION).modalities
    config = _config(tmp_path, ONEVISION, 'videos = [{ size = [1280, 720], frames = 16 }]')
    capsys.readouterr()
    assert main(["sim", str(config), "--out", str(tmp_path / "sim"), "--no-plots"]) == 0
    assert f"-> {196 * 16 + 1:,} (encoder: {729 + 15 * 756:,}) LM tokens" in capsys.readouterr().out
    records = pd.read_parquet(tmp_path / "sim" / "records.parquet")
    assert set(records["modality"]) == {"video"} and set(records["mm_tokens"].astype(int)) == {196 * 16 + 1}
    # LLaVA-NeXT's anyres table serves no videos: refused with the key named
    next_config = _config(tmp_path, "llava-v1.6-34b", 'videos = [{ size = [1280, 720], frames = 16 }]',
                          name="next.toml")
    refused(tmp_path, capsys, ["sim", str(next_config), "--out", str(tmp_path / "next")],
            "workload.videos", "takes workload.images, not workload.videos")
