"""Encoder towers of an imported spec: the ``encoder`` and ``mapping`` tables and a typical item.

One function per tower kind (CLIP / SigLIP and Qwen-VL here; the tiled and
pooled towers in :mod:`calibration.importers.towers_tiled`, Whisper in
:mod:`calibration.importers.towers_audio`; shared parts in
:mod:`calibration.importers.tower_parts`), each given the tower's sub-config (:class:`Keys`),
the LM hidden size (projectors end there) and the processor's settings
(``preprocessor_config.json`` when the folder has one, and the video processor's
``video_preprocessor_config.json`` under the key :data:`VIDEO_PREPROCESSOR`). A tower returns a
:class:`Tower`; what the cost model has no rule for goes in its ``notes``.
Typical items (marked G): the image that fills the most tiles for a tiled
tower, a 1280x720 image for Qwen, 10 s of 720p at 2 fps for video, 10 s of audio.
A tower whose processor has a rule (:mod:`calibration.processor_spec`) also
returns its ``processor`` table, so workloads may give raw item sizes; Llama-4's
tiles have none yet (raw sizes are refused for them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calibration.importers import processor_rules as rules
from calibration.importers._read import Keys, derived, guess, leaf, value
from calibration.importers.tower_parts import (
    TYPICAL_IMAGE_PX,
    TYPICAL_VIDEO,
    Tower,
    fixed_image_processor,
    onevision_pooling,
    patch_stem,
    square_side,
    square_vit,
    tiles_mapping,
    vit_encoder,
)
from calibration.processor_spec import pinpoint_pairs

#: the video processor's settings file, read beside preprocessor_config.json (Qwen-VL's video bounds)
VIDEO_PREPROCESSOR = "video_preprocessor_config.json"


def clip_anyres(tower: Keys, top: Keys, lm_hidden: int, *, siglip: bool, anyres: bool) -> Tower:
    """CLIP / SigLIP tiles: LLaVA (one view), LLaVA-NeXT and LLaVA-OneVision (anyres grids)."""
    hid, size, patch = square_vit(tower)
    side = size // patch
    cls = 0 if siglip else 1
    strategy = str(top.raw_value("vision_feature_select_strategy", "default"))
    base = side * side + (1 if strategy == "full" and cls else 0)
    layers = top.raw_value("vision_feature_layer", -1)
    width = hid * (len(layers) if isinstance(layers, list) else 1)
    enc = vit_encoder(tower, mats=2, mlp_note="CLIP/SigLIP MLP fc1 -> GELU -> fc2")
    enc["projector_params"] = derived(
        width * lm_hidden + lm_hidden * lm_hidden,
        f"mlp2x_gelu: {width}*{lm_hidden} + {lm_hidden}*{lm_hidden} (biases ignored)",
    )
    enc["stem_params"] = patch_stem(hid, patch, side * side + cls)
    notes = []
    if isinstance(layers, int) and layers != -1:
        notes.append(f"vision_feature_layer {layers}: the tower is priced with all its layers")
    if not anyres:
        mapping = tiles_mapping(base, base, 1, side * side + cls, {
            "base": f"({size}/{patch})^2 patches",
            "per_tile": "one view",
            "max_tiles": "one view per image",
            "positions": f"{side * side} patches + {cls} CLS",
        })
        return Tower(enc, mapping, derived(base, "one image: a fixed token count"), notes,
                     fixed_image_processor(base, f"({size}/{patch})^2 patches of the one view"))
    pins = top.raw_value("image_grid_pinpoints")
    if not pins:
        raise ValueError(f"{top.file}: missing required key image_grid_pinpoints")
    pinpoint_pairs(pins, size, f"{top.file}: image_grid_pinpoints")
    grid = max(pins, key=lambda p: (p[0] // size) * (p[1] // size))
    tiles = (grid[0] // size) * (grid[1] // size)
    tokens = rules.llava_next_tokens(
        grid[1], grid[0], tile_px=size, patch_px=patch, pinpoints=pins, base_extra=base - side * side
    )
    mapping = tiles_mapping(
        base,
        side * (side + 1),
        1 + tiles,
        side * side + cls,
        {
            "base": f"({size}/{patch})^2 = {side * side} patches of the base view"
            + (", CLS dropped" if cls and base == side * side else ""),
            "per_tile": f"one {size} px tile unpadded = {side} rows x ({side} features + 1 newline)",
            "max_tiles": f"base view + {tiles} tiles of the largest image_grid_pinpoints grid {grid}",
            "positions": f"{side * side} patches" + (" + CLS" if cls else "") + " per tower forward",
        },
    )
    processor = {
        "kind": "anyres",
        "tile_px": square_side(tower, "image_size"),
        "patch_px": square_side(tower, "patch_size"),
        "pinpoints_px": leaf(pins, "V", f"{top.file.name} image_grid_pinpoints ([height, width])"),
        "base_extra_tokens": derived(base - side * side, f"vision_feature_select_strategy {strategy!r}"),
    }
    if siglip:
        pooled = onevision_pooling(top, processor, notes, grid)
        if pooled != tokens:  # the LM gets the pooled tokens; the tower still encodes every tile
            tower_tokens = rules.llava_tower_tokens(tiles, tile_px=size, patch_px=patch,
                                                    base_extra=base - side * side)
            return Tower(
                enc, mapping,
                derived(pooled, f"one {grid[1]}x{grid[0]} image -> {pooled} LM tokens, pooled to anyres_max"),
                notes, processor,
                derived(tower_tokens, f"before pooling: the base view and {tiles} tiles, {1 + tiles} tower "
                                      f"forwards, at {side} rows x ({side} features + 1 newline) a tile"))
    return Tower(
        enc,
        mapping,
        derived(tokens, f"one {grid[1]}x{grid[0]} image -> {tokens} LM tokens, {1 + tiles} tower forwards"),
        notes,
        processor,
    )


def siglip_fixed(tower: Keys, top: Keys, lm_hidden: int) -> Tower:
    """Gemma-3: a SigLIP tower pooled to ``mm_tokens_per_image`` tokens (pan-and-scan off)."""
    hid, size, patch = square_vit(tower)
    tokens = value(top.get("mm_tokens_per_image"))
    side = size // patch
    enc = vit_encoder(tower, mats=2, mlp_note="SigLIP MLP fc1 -> GELU -> fc2")
    enc["projector_params"] = derived(hid * lm_hidden, f"mm_input_projection {hid}*{lm_hidden}")
    enc["stem_params"] = patch_stem(hid, patch, side * side)
    mapping = tiles_mapping(
        tokens,
        tokens,
        1,
        side * side,
        {
            "base": "mm_tokens_per_image",
            "per_tile": "mm_tokens_per_image",
            "max_tiles": "one view (pan-and-scan off)",
            "positions": f"({size}/{patch})^2 patches, average-pooled to mm_tokens_per_image",
        },
    )
    return Tower(
        enc,
        mapping,
        derived(tokens, "mm_tokens_per_image per image"),
        ["Gemma-3 pan-and-scan crops are not modelled (one view per image)"],
        {"kind": "fixed", "tokens_per_image": top.get("mm_tokens_per_image")},
    )


def _qwen_bounds(pre: Mapping[str, Any], which: str, *, patch: int, version: int) -> tuple[int, int, str]:
    """(min, max) pixels from the image's file (preprocessor_config.json) or the video's
    (video_preprocessor_config.json): its min_pixels/max_pixels (which win, as in transformers),
    else its size; without them the processor class's defaults (a video's: one frame's before
    Qwen3-VL, the clip's from it)."""
    file = VIDEO_PREPROCESSOR if which == "video" else "preprocessor_config.json"
    table = pre.get(VIDEO_PREPROCESSOR) if which == "video" else pre
    table = table if isinstance(table, Mapping) else {}
    size = table.get("size") if isinstance(table.get("size"), Mapping) else {}
    if table.get("min_pixels") and table.get("max_pixels"):
        return int(table["min_pixels"]), int(table["max_pixels"]), f"{file} min_pixels/max_pixels"
    if size.get("shortest_edge") and size.get("longest_edge"):
        return int(size["shortest_edge"]), int(size["longest_edge"]), f"{file} size"
    if which == "video":
        held = "the clip's frames x height x width" if version == 3 else "one frame"
        cls = "Qwen3VLVideoProcessor" if version == 3 else "Qwen2VLVideoProcessor"
        return (128 * (2 * patch) ** 2, 768 * (2 * patch) ** 2,
                f"{cls} default size {{128, 768}} x {2 * patch}^2 px ({held})")
    return 56 * 56, 1280 * 28 * 28, "Qwen2VLImageProcessor default size {56*56, 28*28*1280}"


def qwen_vl(
    tower: Keys, top: Keys, lm_hidden: int, pre: Mapping[str, Any], modality: str, *, version: int
) -> Tower:
    """Qwen2-VL / Qwen2.5-VL / Qwen3-VL: patches merged 2x2, windowed layers (2.5), deepstack (3)."""
    patch, merge = value(tower.get("patch_size")), value(tower.get("spatial_merge_size"))
    temporal = value(tower.get("temporal_patch_size"))
    if version == 2:
        hid = value(tower.get("embed_dim"))
        enc = {
            "num_layers": tower.get("depth"),
            "hidden_size": tower.get("embed_dim"),
            "intermediate_size": derived(
                hid * int(tower.raw_value("mlp_ratio", 4)),
                f"embed_dim * mlp_ratio = {hid} * {tower.raw_value('mlp_ratio', 4)}",
            ),
            "num_heads": tower.get("num_heads"),
            "mlp_num_matrices": derived(2, "fc1 -> QuickGELU -> fc2"),
        }
        out = value(tower.get("hidden_size"))
    else:
        hid = value(tower.get("hidden_size"))
        gated = version == 25
        enc = {
            "num_layers": tower.get("depth"),
            "hidden_size": tower.get("hidden_size"),
            "intermediate_size": tower.get("intermediate_size"),
            "num_heads": tower.get("num_heads"),
            "mlp_num_matrices": derived(
                3 if gated else 2,
                "SwiGLU vision MLP (gate, up, down)" if gated else "linear_fc1 -> GELU -> linear_fc2",
            ),
        }
        out = value(tower.get("out_hidden_size"))
    wide = hid * merge * merge
    deep = list(tower.raw_value("deepstack_visual_indexes") or []) if version == 3 else []
    mergers = 1 + len(deep)
    enc["projector_params"] = derived(
        mergers * (wide * wide + wide * out),
        f"{mergers} patch merger(s) x (Linear({wide}->{wide}) + Linear({wide}->{out}))"
        + (f"; deepstack_visual_indexes {deep}" if deep else ""),
    )
    stem = 3 * temporal * patch * patch * hid
    pos = int(tower.raw_value("num_position_embeddings", 0)) if version == 3 else 0
    enc["stem_params"] = derived(
        stem + pos * hid,
        f"Conv3d 3*{temporal}*{patch}*{patch}*{hid}"
        + (f" + {pos} position embeddings * {hid}" if pos else ""),
    )
    notes = [f"out_hidden_size {out} != LM hidden {lm_hidden}"] if out != lm_hidden else []
    low, high, where = _qwen_bounds(pre, modality, patch=patch, version=version)
    processor = _qwen_processor(tower, pre, patch, version)
    width, height = TYPICAL_IMAGE_PX
    if modality == "video":
        width, height, seconds, fps = TYPICAL_VIDEO
        frames = rules.sampled_frames(seconds, fps, temporal_patch=temporal,
                                      min_frames=value(processor["min_frames"]),
                                      max_frames=value(processor["max_frames"]))
        tokens = rules.qwen_video_tokens(
            width,
            height,
            frames,
            patch_px=patch,
            merge=merge,
            temporal_patch=temporal,
            min_pixels=low,
            max_pixels=high,
            per_clip=version == 3,
        )
        per_group = tokens // (frames // temporal)
        typical = derived(
            tokens,
            f"{seconds:g} s of {height}p video at {fps:g} fps: {frames} frames -> "
            f"{tokens} LM tokens ({where})",
        )
        span = f"one temporal patch group of a {height}p frame pair = {per_group} LM tokens x {merge * merge}"
    else:
        per_group = rules.qwen_image_tokens(
            width, height, patch_px=patch, merge=merge, min_pixels=low, max_pixels=high
        )
        typical = derived(per_group, f"one {width}x{height} image -> {per_group} LM tokens ({where})")
        span = f"one {width}x{height} image = {per_group} LM tokens x {merge * merge}"
    full = list(tower.raw_value("fullatt_block_indexes") or []) if version == 25 else []
    depth = value(enc["num_layers"])
    mapping: dict[str, Any] = {
        "kind": "linear",
        "positions_per_lm_token": derived(
            merge * merge, f"spatial_merge_size {merge}: {merge}x{merge} patches per LM token"
        ),
        "segment_positions": guess(per_group * merge * merge, f"full-attention span = {span}"),
    }
    if full:
        window = value(tower.get("window_size")) // patch
        mapping["window_positions"] = derived(
            window * window,
            f"window_size {tower.raw_value('window_size')} px / patch {patch} = {window}x{window} patches",
        )
        mapping["num_full_attention_layers"] = derived(len(full), f"fullatt_block_indexes {full}")
    else:
        mapping["window_positions"] = derived(0, "no windowed attention")
        mapping["num_full_attention_layers"] = derived(depth, "every layer attends over the whole item")
    return Tower(enc, mapping, typical, notes, processor)


def _qwen_processor(tower: Keys, pre: Mapping[str, Any], patch: int, version: int) -> dict[str, Any]:
    """The ``qwen`` processor table: image bounds from preprocessor_config.json, video bounds from
    video_preprocessor_config.json (:func:`_qwen_bounds`), each marked V when read from the file."""
    low, high, where = _qwen_bounds(pre, "image", patch=patch, version=version)
    vlow, vhigh, vwhere = _qwen_bounds(pre, "video", patch=patch, version=version)
    mark, vmark = ("V" if "preprocessor_config.json" in w else "D" for w in (where, vwhere))
    table = {
        "kind": "qwen",
        "patch_px": tower.get("patch_size"),
        "merge": tower.get("spatial_merge_size"),
        "temporal_patch": tower.get("temporal_patch_size"),
        "min_pixels": leaf(low, mark, where),
        "max_pixels": leaf(high, mark, where),
        "video_min_pixels": leaf(vlow, vmark, vwhere),
        "video_max_pixels": leaf(vhigh, vmark, vwhere),
    }
    if version == 3:  # Qwen3VLVideoProcessor bounds the clip, not each frame
        table["video_pixels_per"] = derived("clip", "Qwen3VLVideoProcessor: smart_resize over "
                                            "frames x height x width")
    video = pre.get(VIDEO_PREPROCESSOR) if isinstance(pre.get(VIDEO_PREPROCESSOR), Mapping) else {}
    for key, default in (("min_frames", 4), ("max_frames", 768)):
        cls = "Qwen3VLVideoProcessor" if version == 3 else "Qwen2VLVideoProcessor (qwen-vl-utils' sampler)"
        table[key] = (leaf(int(video[key]), "V", f"{VIDEO_PREPROCESSOR} {key}") if video.get(key)
                      else derived(default, f"{cls} default {key}"))
    return table
