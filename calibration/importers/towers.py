"""Encoder towers of an imported spec: the ``encoder`` and ``mapping`` tables and a typical item.

One function per tower kind, each given the tower's sub-config (:class:`Keys`),
the LM hidden size (projectors end there) and the processor's settings
(``preprocessor_config.json`` when the folder has one). A tower returns a
:class:`Tower`; what the cost model has no rule for goes in its ``notes``.
Typical items (marked G): the image that fills the most tiles for a tiled
tower, a 1280x720 image for Qwen, 10 s of 720p at 2 fps for video, 10 s of audio.
A tower whose processor has a rule (:mod:`calibration.processor_spec`) also
returns its ``processor`` table, so workloads may give raw item sizes; the
tiled towers of InternVL, Idefics3 and Llama-4 and OneVision's pooled anyres
have none yet (raw sizes are refused for them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from calibration.importers import processor_rules as rules
from calibration.importers._read import Keys, derived, guess, leaf, value

TYPICAL_IMAGE_PX = (1280, 720)
TYPICAL_VIDEO = (1280, 720, 10.0, 2.0)  # width, height, seconds, fps
TYPICAL_AUDIO_S = 10.0


@dataclass(frozen=True, slots=True)
class Tower:
    encoder: dict[str, Any]
    mapping: dict[str, Any]
    typical_tokens: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    processor: dict[str, Any] | None = None


def _fixed_processor(tokens: int, why: str) -> dict[str, Any]:
    return {"kind": "fixed", "tokens_per_image": derived(tokens, why)}


def _side(keys: Keys, name: str) -> dict[str, Any]:
    """A pixel size that configs write as an int or as [h, w] (square assumed)."""
    raw = keys.raw_value(name)
    if isinstance(raw, list | tuple):
        if len(set(raw)) != 1:
            raise ValueError(f"{keys.file}: {keys.key(name)} {raw!r}: only square sizes are modelled")
        return leaf(int(raw[0]), "V", f"config.json {keys.key(name)} (square)")
    return keys.get(name)


def _vit(
    tower: Keys,
    *,
    mats: int,
    mlp_note: str,
    layers: str = "num_hidden_layers",
    heads: str = "num_attention_heads",
) -> dict[str, Any]:
    return {
        "num_layers": tower.get(layers),
        "hidden_size": tower.get("hidden_size"),
        "intermediate_size": tower.get("intermediate_size"),
        "num_heads": tower.get(heads),
        "mlp_num_matrices": derived(mats, mlp_note),
    }


def _tiles(
    base: int, per_tile: int, max_tiles: int, positions: int, why: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "kind": "tiles",
        "base_lm_tokens": derived(base, why["base"]),
        "lm_tokens_per_tile": derived(per_tile, why["per_tile"]),
        "max_tiles": derived(max_tiles, why["max_tiles"]),
        "positions_per_tile": derived(positions, why["positions"]),
    }


def clip_anyres(tower: Keys, top: Keys, lm_hidden: int, *, siglip: bool, anyres: bool) -> Tower:
    """CLIP / SigLIP tiles: LLaVA (one view), LLaVA-NeXT and LLaVA-OneVision (anyres grids)."""
    hid, size, patch = (
        value(tower.get("hidden_size")),
        value(_side(tower, "image_size")),
        value(_side(tower, "patch_size")),
    )
    side = size // patch
    cls = 0 if siglip else 1
    strategy = str(top.raw_value("vision_feature_select_strategy", "default"))
    base = side * side + (1 if strategy == "full" and cls else 0)
    layers = top.raw_value("vision_feature_layer", -1)
    width = hid * (len(layers) if isinstance(layers, list) else 1)
    enc = _vit(tower, mats=2, mlp_note="CLIP/SigLIP MLP fc1 -> GELU -> fc2")
    enc["projector_params"] = derived(
        width * lm_hidden + lm_hidden * lm_hidden,
        f"mlp2x_gelu: {width}*{lm_hidden} + {lm_hidden}*{lm_hidden} (biases ignored)",
    )
    enc["stem_params"] = derived(
        3 * patch * patch * hid + (side * side + cls) * hid,
        f"patch conv 3*{patch}*{patch}*{hid} + {side * side + cls} positions * {hid}",
    )
    notes = []
    if isinstance(layers, int) and layers != -1:
        notes.append(f"vision_feature_layer {layers}: the tower is priced with all its layers")
    if not anyres:
        mapping = _tiles(
            base,
            base,
            1,
            side * side + cls,
            {
                "base": f"({size}/{patch})^2 patches",
                "per_tile": "one view",
                "max_tiles": "one view per image",
                "positions": f"{side * side} patches + {cls} CLS",
            },
        )
        return Tower(enc, mapping, derived(base, "one image: a fixed token count"), notes,
                     _fixed_processor(base, f"({size}/{patch})^2 patches of the one view"))
    pins = top.raw_value("image_grid_pinpoints")
    if not pins:
        raise ValueError(f"{top.file}: missing required key image_grid_pinpoints")
    grid = max(pins, key=lambda p: (p[0] // size) * (p[1] // size))
    tiles = (grid[0] // size) * (grid[1] // size)
    tokens = rules.llava_next_tokens(
        grid[1], grid[0], tile_px=size, patch_px=patch, pinpoints=pins, base_extra=base - side * side
    )
    mapping = _tiles(
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
    processor = None
    if siglip:
        notes.append(
            "LLaVA-OneVision anyres_max: LM tokens of large images are pooled down while the "
            "tower still encodes every tile; easerve prices tiles from LM tokens"
        )
        notes.append("LLaVA-OneVision anyres_max pooling has no processor rule: raw image sizes are refused")
    else:
        processor = {
            "kind": "anyres",
            "tile_px": _side(tower, "image_size"),
            "patch_px": _side(tower, "patch_size"),
            "pinpoints_px": leaf(pins, "V", f"{top.file.name} image_grid_pinpoints ([height, width])"),
            "base_extra_tokens": derived(base - side * side, f"vision_feature_select_strategy {strategy!r}"),
        }
    return Tower(
        enc,
        mapping,
        derived(tokens, f"one {grid[1]}x{grid[0]} image -> {tokens} LM tokens, {1 + tiles} tower forwards"),
        notes,
        processor,
    )


def siglip_fixed(tower: Keys, top: Keys, lm_hidden: int) -> Tower:
    """Gemma-3: a SigLIP tower pooled to ``mm_tokens_per_image`` tokens (pan-and-scan off)."""
    hid, size, patch = (
        value(tower.get("hidden_size")),
        value(_side(tower, "image_size")),
        value(_side(tower, "patch_size")),
    )
    tokens = value(top.get("mm_tokens_per_image"))
    side = size // patch
    enc = _vit(tower, mats=2, mlp_note="SigLIP MLP fc1 -> GELU -> fc2")
    enc["projector_params"] = derived(hid * lm_hidden, f"mm_input_projection {hid}*{lm_hidden}")
    enc["stem_params"] = derived(
        3 * patch * patch * hid + side * side * hid,
        f"patch conv 3*{patch}*{patch}*{hid} + {side * side} positions * {hid}",
    )
    mapping = _tiles(
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


def _qwen_bounds(pre: Mapping[str, Any], which: str, *, patch: int) -> tuple[int, int, str]:
    """(min, max) pixels: preprocessor_config.json's min_pixels/max_pixels (which win, as in
    transformers), else its size, else transformers' defaults."""
    size = pre.get("size") if isinstance(pre.get("size"), Mapping) else {}
    if which == "image" and pre.get("min_pixels") and pre.get("max_pixels"):
        where = "preprocessor_config.json min_pixels/max_pixels"
        return int(pre["min_pixels"]), int(pre["max_pixels"]), where
    if which == "image" and size.get("shortest_edge") and size.get("longest_edge"):
        return int(size["shortest_edge"]), int(size["longest_edge"]), "preprocessor_config.json size"
    unit = (2 * patch) ** 2
    if which == "video":
        return 128 * unit, 768 * unit, f"Qwen video processor default size {{128, 768}} x {2 * patch}^2 px"
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
    low, high, where = _qwen_bounds(pre, modality, patch=patch)
    width, height = TYPICAL_IMAGE_PX
    if modality == "video":
        width, height, seconds, fps = TYPICAL_VIDEO
        frames = rules.sampled_frames(seconds, fps, temporal_patch=temporal)
        tokens = rules.qwen_video_tokens(
            width,
            height,
            frames,
            patch_px=patch,
            merge=merge,
            temporal_patch=temporal,
            min_pixels=low,
            max_pixels=high,
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
    return Tower(enc, mapping, typical, notes, _qwen_processor(tower, pre, patch))


def _qwen_processor(tower: Keys, pre: Mapping[str, Any], patch: int) -> dict[str, Any]:
    """The ``qwen`` processor table: image bounds from preprocessor_config.json, video bounds the
    video processor's defaults (a video_preprocessor_config.json is not read)."""
    low, high, where = _qwen_bounds(pre, "image", patch=patch)
    vlow, vhigh, vwhere = _qwen_bounds(pre, "video", patch=patch)
    mark = "V" if where.startswith("preprocessor") else "D"
    return {
        "kind": "qwen",
        "patch_px": tower.get("patch_size"),
        "merge": tower.get("spatial_merge_size"),
        "temporal_patch": tower.get("temporal_patch_size"),
        "min_pixels": leaf(low, mark, where),
        "max_pixels": leaf(high, mark, where),
        "video_min_pixels": derived(vlow, vwhere),
        "video_max_pixels": derived(vhigh, vwhere),
    }


def internvit(tower: Keys, top: Keys, lm_hidden: int, pre: Mapping[str, Any]) -> Tower:
    """InternVL: 448 px tiles (dynamic tiling + thumbnail), pixel shuffle to 1/4, MLP projector."""
    hid, size, patch = (
        value(tower.get("hidden_size")),
        value(_side(tower, "image_size")),
        value(_side(tower, "patch_size")),
    )
    ratio = float(top.raw_value("downsample_ratio", 0.5))
    side = size // patch
    per_tile = int(side * side * ratio * ratio)
    max_patches = int(pre.get("max_patches", 12))
    wide = int(hid / (ratio * ratio))
    enc = _vit(tower, mats=2, mlp_note="InternViT MLP fc1 -> GELU -> fc2")
    enc["projector_params"] = derived(
        wide * lm_hidden + lm_hidden * lm_hidden,
        f"Linear({wide}->{lm_hidden}) + Linear({lm_hidden}->{lm_hidden})",
    )
    enc["stem_params"] = derived(
        3 * patch * patch * hid + (side * side + 1) * hid,
        f"patch conv 3*{patch}*{patch}*{hid} + {side * side + 1} positions * {hid}",
    )
    src = (
        "preprocessor_config.json max_patches"
        if "max_patches" in pre
        else "GotOcr2ImageProcessor default max_patches 12"
    )
    mapping = _tiles(
        per_tile,
        per_tile,
        max_patches + 1,
        side * side + 1,
        {
            "base": f"({size}/{patch})^2 x downsample_ratio^2 = {per_tile}",
            "per_tile": "the same per tile",
            "max_tiles": f"{src} + one thumbnail",
            "positions": f"{side * side} patches + CLS",
        },
    )
    tokens = per_tile * (max_patches + 1)
    return Tower(enc, mapping, derived(tokens, f"an image filling {max_patches} tiles + thumbnail"), [])


def idefics3(tower: Keys, top: Keys, lm_hidden: int, pre: Mapping[str, Any]) -> Tower:
    """Idefics3 / SmolVLM: square tiles of max_image_size plus a global view, pixel shuffle."""
    hid, size, patch = (
        value(tower.get("hidden_size")),
        value(_side(tower, "image_size")),
        value(_side(tower, "patch_size")),
    )
    scale = int(top.raw_value("scale_factor", 2))
    side = size // patch
    per_tile = side * side // (scale * scale)
    longest = int((pre.get("size") or {}).get("longest_edge", 4 * size))
    grid = math.ceil(longest / size)
    enc = _vit(tower, mats=2, mlp_note="SigLIP-style MLP fc1 -> GELU -> fc2")
    enc["projector_params"] = derived(
        hid * scale * scale * lm_hidden, f"connector Linear({hid}*{scale}^2 -> {lm_hidden})"
    )
    enc["stem_params"] = derived(
        3 * patch * patch * hid + side * side * hid,
        f"patch conv 3*{patch}*{patch}*{hid} + {side * side} positions * {hid}",
    )
    mapping = _tiles(
        per_tile,
        per_tile,
        grid * grid + 1,
        side * side,
        {
            "base": f"({size}/{patch})^2 / scale_factor^2 = {per_tile}",
            "per_tile": "the same per tile",
            "max_tiles": f"size.longest_edge {longest} / {size} = {grid}x{grid} tiles + the global view",
            "positions": f"({size}/{patch})^2 patches",
        },
    )
    tokens = per_tile * (grid * grid + 1)
    return Tower(
        enc,
        mapping,
        derived(tokens, f"an image filling {grid}x{grid} tiles + global view"),
        ["row/column separator tokens between tiles are not counted"],
    )


def fixed_pooled(
    tower: Keys, top: Keys, lm_hidden: int, *, tokens_key: str, kernel_key: str, what: str
) -> Tower:
    """Gemma-4 vision: a variable-resolution ViT pooled kernel^2 -> one soft token, a fixed budget."""
    hid, patch = value(tower.get("hidden_size")), value(tower.get("patch_size"))
    tokens, kernel = value(top.get(tokens_key)), value(tower.get(kernel_key))
    positions = tokens * kernel * kernel
    enc = _vit(tower, mats=3, mlp_note=f"{what}: gated MLP")
    enc["projector_params"] = derived(hid * lm_hidden, f"Linear({hid}->{lm_hidden})")
    enc["stem_params"] = derived(3 * patch * patch * hid, f"patch embedding 3*{patch}*{patch}*{hid}")
    mapping = _tiles(
        tokens,
        tokens,
        1,
        positions,
        {
            "base": tokens_key,
            "per_tile": tokens_key,
            "max_tiles": "one view per image",
            "positions": f"{tokens} tokens x pooling {kernel}^2",
        },
    )
    return Tower(
        enc,
        mapping,
        derived(tokens, f"{tokens_key} per image"),
        [f"{what}: position embeddings and images below the token budget are not modelled"],
        {"kind": "fixed", "tokens_per_image": top.get(tokens_key)},
    )


def llama4_vision(tower: Keys, top: Keys, lm_hidden: int) -> Tower:
    """Llama-4: 336 px tiles (up to 16 + a global view), pixel shuffle, a vision adapter MLP."""
    hid, size, patch = (
        value(tower.get("hidden_size")),
        value(tower.get("image_size")),
        value(tower.get("patch_size")),
    )
    ratio = float(tower.raw_value("pixel_shuffle_ratio", 0.5))
    side = size // patch
    per_tile = int(side * side * ratio * ratio)
    proj_in, vout = value(tower.get("projector_input_dim")), value(tower.get("vision_output_dim"))
    enc = _vit(tower, mats=2, mlp_note="Llama-4 vision MLP fc1 -> GELU -> fc2")
    shuffled = int(hid / (ratio * ratio))
    enc["projector_params"] = derived(
        shuffled * proj_in + proj_in * vout + vout * lm_hidden,
        f"adapter Linear({shuffled}->{proj_in}) + Linear({proj_in}->{vout}) "
        f"+ projector Linear({vout}->{lm_hidden})",
    )
    enc["stem_params"] = derived(
        3 * patch * patch * hid + (side * side + 1) * hid,
        f"patch 3*{patch}*{patch}*{hid} + {side * side + 1} positions * {hid}",
    )
    mapping = _tiles(
        per_tile,
        per_tile,
        17,
        side * side + 1,
        {
            "base": f"({size}/{patch})^2 x pixel_shuffle_ratio^2",
            "per_tile": "the same per tile",
            "max_tiles": "Llama4ImageProcessor default max_patches 16 + the global view",
            "positions": f"{side * side} patches + CLS",
        },
    )
    notes = []
    if not tower.raw:
        notes.append(
            "vision_config absent from config.json: the tower is transformers' Llama4VisionConfig "
            "defaults, not the released model's"
        )
    return Tower(enc, mapping, derived(per_tile * 17, "an image filling 16 tiles + global view"), notes)


def whisper(tower: Keys, top: Keys, lm_hidden: int, *, stack: int | None) -> Tower:
    """Whisper encoder: Qwen2-Audio (pooled by 2, padded to 30 s) or Ultravox (frames stacked)."""
    hid, mel = value(tower.get("d_model")), value(tower.get("num_mel_bins"))
    positions = value(tower.get("max_source_positions"))
    enc = {
        "num_layers": tower.get("encoder_layers"),
        "hidden_size": tower.get("d_model"),
        "intermediate_size": tower.get("encoder_ffn_dim"),
        "num_heads": tower.get("encoder_attention_heads"),
        "mlp_num_matrices": derived(2, "Whisper MLP fc1 -> GELU -> fc2"),
    }
    enc["stem_params"] = derived(
        mel * hid * 3 + hid * hid * 3 + positions * hid,
        f"conv1 {mel}*{hid}*3 + conv2 {hid}*{hid}*3 + {positions} positions * {hid}",
    )
    layers = enc["num_layers"]
    if stack is None:  # Qwen2-Audio: every clip runs the full 30 s window
        enc["projector_params"] = derived(
            hid * lm_hidden, f"multi_modal_projector Linear({hid}->{lm_hidden})"
        )
        per_clip = positions // 2
        mapping = _tiles(
            per_clip,
            per_clip,
            1,
            positions,
            {
                "base": f"max_source_positions {positions} / avg-pool 2",
                "per_tile": "one 30 s window",
                "max_tiles": "clips are cut at 30 s",
                "positions": "every clip is padded to the 30 s window",
            },
        )
        tokens = rules.qwen2_audio_tokens(TYPICAL_AUDIO_S)
        seconds = positions * 2 / rules.MEL_FRAMES_PER_S
        processor = {
            "kind": "whisper",
            "max_audio_s": derived(
                seconds,
                f"max_source_positions {positions} x stride 2 / {rules.MEL_FRAMES_PER_S} mel frames/s",
            ),
        }
        typical = derived(tokens, f"{TYPICAL_AUDIO_S:g} s of audio -> {tokens} LM tokens")
        return Tower(enc, mapping, typical, [], processor)
    proj_hidden = value(top.get("hidden_size"))
    enc["projector_params"] = derived(
        hid * stack * proj_hidden + proj_hidden // 2 * lm_hidden,
        f"Linear({hid}*{stack} -> {proj_hidden}) + SwiGLU(-> {proj_hidden // 2}) + "
        f"Linear({proj_hidden // 2} -> "
        f"{lm_hidden})",
    )
    mapping = {
        "kind": "linear",
        "positions_per_lm_token": top.get("stack_factor"),
        "segment_positions": tower.get("max_source_positions"),
        "window_positions": derived(0, "no windowed attention"),
        "num_full_attention_layers": derived(value(layers), "every encoder layer attends over its window"),
    }
    tokens = rules.ultravox_tokens(TYPICAL_AUDIO_S, stack_factor=stack)
    return Tower(
        enc,
        mapping,
        derived(
            tokens,
            f"{TYPICAL_AUDIO_S:g} s of audio at 50 positions/s / stack_factor {stack} -> {tokens} LM tokens",
        ),
        [],
        {"kind": "whisper", "stack_factor": top.get("stack_factor", default=stack)},
    )
