"""The processor rules (calibration.importers.processor_rules) against transformers' processors.

Each rule is run beside the processor on tiny inputs, offline: LLaVA-NeXT's
anyres token count, Qwen's resize (``smart_resize``) and image/video token
counts, Qwen2-Audio's pooled audio length. Defaults the importer assumes are
checked against the processor classes.
"""

from __future__ import annotations

import math

import pytest

from calibration.importers import processor_rules as rules

PINS = [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]


@pytest.mark.parametrize("size", [(672, 672), (1280, 720), (500, 300), (336, 1008), (100, 900), (640, 480)])
def test_llava_next_tokens_match_processor(size: tuple[int, int]) -> None:
    from transformers import LlavaNextProcessor

    width, height = size
    proc = LlavaNextProcessor.__new__(LlavaNextProcessor)  # only the token-count arithmetic is used
    proc.patch_size, proc.num_additional_image_tokens = 14, 1
    proc.vision_feature_select_strategy = "default"
    proc.image_processor = type("IP", (), {"image_grid_pinpoints": PINS, "size": {"shortest_edge": 336},
                                           "crop_size": {"height": 336, "width": 336}})()
    expected = proc._get_number_of_features(height, width, 336, 336) - 1  # "default" drops the CLS
    assert rules.llava_next_tokens(width, height, tile_px=336, patch_px=14, pinpoints=PINS) == expected


@pytest.mark.parametrize("size", [(1280, 720), (120, 170), (28, 28), (4000, 3000), (57, 2000)])
def test_smart_resize_matches_transformers(size: tuple[int, int]) -> None:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    width, height = size
    kw = {"factor": 28, "min_pixels": 56 * 56, "max_pixels": 28 * 28 * 1280}
    assert rules.smart_resize(height, width, **kw) == smart_resize(height, width, **kw)


def test_qwen_image_tokens_match_processor() -> None:
    import numpy as np
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    proc = Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=224 * 224, patch_size=14, merge_size=2,
                                    temporal_patch_size=2)
    for width, height in [(170, 120), (64, 64), (300, 90)]:
        image = np.zeros((height, width, 3), dtype=np.uint8)
        grid = proc(images=[image], return_tensors="np")["image_grid_thw"][0]
        expected = int(grid[0] * grid[1] * grid[2]) // 4
        assert rules.qwen_image_tokens(width, height, patch_px=14, merge=2, min_pixels=56 * 56,
                                       max_pixels=224 * 224) == expected


def test_qwen_video_defaults() -> None:
    size = {"shortest_edge": 128 * 28 * 28, "longest_edge": 768 * 28 * 28}
    try:  # the video processor class needs torchvision, which these machines lack
        from transformers.models.qwen2_vl import video_processing_qwen2_vl as video

        assert video.Qwen2VLVideoProcessor.size == size
    except ImportError:
        pass
    # 10 s of 720p at 2 fps: 20 frames, 10 temporal groups of 720 tokens (the paper's Qwen spec).
    frames = rules.sampled_frames(10, 2, temporal_patch=2)
    assert rules.qwen_video_tokens(1280, 720, frames, patch_px=14, merge=2, temporal_patch=2,
                                   min_pixels=size["shortest_edge"], max_pixels=size["longest_edge"]) == 7200


@pytest.mark.parametrize("bounds", [(128 * 32 * 32, 768 * 32 * 32), (4_096, 25_165_824)])
def test_qwen3_video_resize_matches_transformers(bounds: tuple[int, int]) -> None:
    """Qwen3-VL bounds the clip's pixels, frames x height x width (the class's defaults, then the
    checkpoints'), where Qwen2/2.5-VL bound each frame's."""
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor, smart_resize

    low, high = bounds
    for width, height in [(1280, 720), (1920, 1080), (320, 240), (40, 900), (3840, 2160), (20, 20)]:
        for frames in (2, 3, 16, 20, 64, 121):
            kw = {"factor": 32, "min_pixels": low, "max_pixels": high}
            assert rules.qwen3_video_resize(frames, height, width, temporal_patch=2, **kw) == \
                smart_resize(frames, height, width, temporal_factor=2, **kw)
    assert Qwen3VLVideoProcessor.size == {"shortest_edge": 128 * 32 * 32, "longest_edge": 768 * 32 * 32}
    # per clip, 120 frames of 1080p share the bound; per frame, each would take it whole
    per_clip, per_frame = (rules.qwen_video_tokens(1920, 1080, 120, patch_px=16, merge=2, temporal_patch=2,
                                                   min_pixels=low, max_pixels=high, per_clip=clip)
                           for clip in (True, False))
    assert per_clip < per_frame


def test_frames_sampled_from_seconds_match_qwen3s_sampler() -> None:
    """A clip given in seconds samples fps x seconds frames, at least 4 and at most 768, as
    Qwen3VLVideoProcessor.sample_frames does (its count padded to whole temporal patches)."""
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
    from transformers.video_utils import VideoMetadata

    processor = Qwen3VLVideoProcessor()
    for seconds in (0.5, 1, 3, 10, 60, 383.5, 384, 1000):
        metadata = VideoMetadata(total_num_frames=int(seconds * 30), fps=30, duration=seconds)
        sampled = len(processor.sample_frames(metadata, fps=2))
        assert rules.sampled_frames(seconds, 2, temporal_patch=2, min_frames=processor.min_frames,
                                    max_frames=processor.max_frames) == math.ceil(sampled / 2) * 2
    assert rules.sampled_frames(1000, 2, temporal_patch=2) == 2000  # no bounds: a hand-written spec's


@pytest.mark.parametrize("seconds", [1.0, 3.0, 10.0, 29.5])
def test_qwen2_audio_tokens_match_model_rule(seconds: float) -> None:
    import torch
    from transformers import Qwen2AudioConfig, Qwen2AudioEncoder

    config = Qwen2AudioConfig().audio_config
    frames = round(seconds * 100)
    encoder = Qwen2AudioEncoder.__new__(Qwen2AudioEncoder)
    _, out = Qwen2AudioEncoder._get_feat_extract_output_lengths(encoder, torch.tensor([frames]))
    assert config.max_source_positions == 1500
    assert rules.qwen2_audio_tokens(seconds) == int(out[0])


def test_ultravox_tokens() -> None:
    """10 s -> 500 Whisper positions -> 63 stacks of 8 (the paper's Ultravox spec)."""
    assert rules.ultravox_tokens(10.0, stack_factor=8) == 63


@pytest.mark.parametrize("size", [(1280, 720), (720, 1280), (448, 448), (500, 300), (3000, 400), (2000, 2000),
                                  (100, 100), (896, 448), (1920, 1080), (300, 2000)])
def test_internvl_tiles_match_the_image_processor(size: tuple[int, int]) -> None:
    from PIL import Image
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

    width, height = size
    processor = GotOcr2ImageProcessorPil(crop_to_patches=True, size={"height": 448, "width": 448},
                                         min_patches=1, max_patches=12)  # InternVL's processor settings
    out = processor(Image.new("RGB", (width, height)))
    tiles = int(out["num_patches"][0])  # thumbnail included
    assert rules.internvl_image_tokens(width, height, tile_px=448, tokens_per_tile=256, min_tiles=1,
                                       max_tiles=12) == 256 * tiles


@pytest.mark.parametrize("size", [(1280, 720), (720, 1280), (364, 364), (100, 100), (500, 300), (3000, 400),
                                  (4000, 4000), (1920, 1080), (300, 2000), (729, 365)])
@pytest.mark.parametrize(("tile", "longest"), [(364, 4 * 364), (512, 4 * 512), (384, 3 * 384)])
def test_idefics3_splitting_matches_the_image_processor(size: tuple[int, int], tile: int,
                                                        longest: int) -> None:
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    width, height = size
    kwargs = {"size": {"longest_edge": longest}, "max_image_size": {"longest_edge": tile}}
    patches, _, _ = Idefics3ImageProcessorPil().get_number_of_image_patches(height, width, kwargs)
    views = patches or 1  # no split: the image alone, one view
    assert rules.idefics3_image_tokens(width, height, tile_px=tile, longest_edge_px=longest,
                                       tokens_per_tile=169) == 169 * views


@pytest.mark.parametrize("size", [(1280, 720), (100, 100), (300, 2000)])
def test_idefics3_splitting_matches_the_processed_views(size: tuple[int, int]) -> None:
    from PIL import Image
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    out = Idefics3ImageProcessorPil()(Image.new("RGB", size))  # 4 x 364 px, 364 px tiles: its defaults
    views = len(out["pixel_values"][0])
    tokens = rules.idefics3_image_tokens(*size, tile_px=364, longest_edge_px=4 * 364, tokens_per_tile=1)
    assert tokens == views


@pytest.mark.parametrize("size", [(1280, 720), (384, 384), (500, 300), (2304, 2304), (3000, 400), (720, 1280),
                                  (1920, 1080), (100, 900)])
def test_llava_onevision_anyres_max_matches_the_processor(size: tuple[int, int]) -> None:
    from transformers import LlavaOnevisionConfig, LlavaOnevisionProcessor

    pins = LlavaOnevisionConfig().image_grid_pinpoints  # the class's grids, 384 px tiles up to 6x6
    width, height = size
    proc = LlavaOnevisionProcessor.__new__(LlavaOnevisionProcessor)  # only the token-count arithmetic
    proc.num_image_tokens, proc.vision_aspect_ratio = 729, "anyres_max_9"
    proc.image_processor = type("IP", (), {"image_grid_pinpoints": pins})()
    expected = proc._get_number_of_features(height, width, 384, 384)
    assert rules.llava_next_tokens(width, height, tile_px=384, patch_px=14, pinpoints=pins,
                                   anyres_max=9) == expected
