"""Tiled and pooled encoder towers of an imported spec: InternViT, Idefics3 / SmolVLM, pooled towers, Llama-4.

See :mod:`calibration.importers.towers` for what a tower function takes and returns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from calibration.importers._read import Keys, derived, leaf, value
from calibration.importers.tower_parts import (
    Tower,
    patch_stem,
    square_vit,
    tiles_mapping,
    vit_encoder,
)


def internvit(tower: Keys, top: Keys, lm_hidden: int, pre: Mapping[str, Any]) -> Tower:
    """InternVL: 448 px tiles (dynamic tiling + thumbnail), pixel shuffle to 1/4, MLP projector."""
    hid, size, patch = square_vit(tower)
    ratio = top.raw_value("downsample_ratio", 0.5)
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 1:
        raise ValueError(f"{top.file}: downsample_ratio must be a number in (0, 1], got {ratio!r}")
    side = size // patch
    per_tile = int(side * side * ratio * ratio)
    max_patches = _count(pre, "max_patches", 12)
    wide = int(hid / (ratio * ratio))
    enc = vit_encoder(tower, mats=2, mlp_note="InternViT MLP fc1 -> GELU -> fc2")
    enc["projector_params"] = derived(
        wide * lm_hidden + lm_hidden * lm_hidden,
        f"Linear({wide}->{lm_hidden}) + Linear({lm_hidden}->{lm_hidden})",
    )
    enc["stem_params"] = patch_stem(hid, patch, side * side + 1)
    src = (
        "preprocessor_config.json max_patches"
        if "max_patches" in pre
        else "GotOcr2ImageProcessor default max_patches 12"
    )
    mapping = tiles_mapping(
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
    min_patches = _count(pre, "min_patches", 1)
    low_src = ("preprocessor_config.json min_patches" if "min_patches" in pre
               else "GotOcr2ImageProcessor default min_patches 1")
    mark = "V" if "max_patches" in pre else "D"
    processor = {  # InternVLProcessor tiles every image (crop_to_patches), image_seq_length tokens a tile
        "kind": "tiles",
        "tile_px": derived(size, f"vision_config.image_size {size} (square tiles)"),
        "tokens_per_tile": derived(per_tile, f"({size}/{patch})^2 x downsample_ratio^2"),
        "min_tiles": leaf(min_patches, "V" if "min_patches" in pre else "D", low_src),
        "max_tiles": leaf(max_patches, mark, src),
    }
    return Tower(enc, mapping, derived(tokens, f"an image filling {max_patches} tiles + thumbnail"), [],
                 processor)


def idefics3(tower: Keys, top: Keys, lm_hidden: int, pre: Mapping[str, Any]) -> Tower:
    """Idefics3 / SmolVLM: square tiles of max_image_size plus a global view, pixel shuffle."""
    hid, size, patch = square_vit(tower)
    scale = value(top.get("scale_factor", default=2, least=1))
    side = size // patch
    per_tile = side * side // (scale * scale)
    longest = _count(_table(pre, "size"), "longest_edge", 4 * size, "size.")
    grid = math.ceil(longest / size)
    enc = vit_encoder(tower, mats=2, mlp_note="SigLIP-style MLP fc1 -> GELU -> fc2")
    enc["projector_params"] = derived(
        hid * scale * scale * lm_hidden, f"connector Linear({hid}*{scale}^2 -> {lm_hidden})"
    )
    enc["stem_params"] = patch_stem(hid, patch, side * side)
    mapping = tiles_mapping(
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
    tile = _count(_table(pre, "max_image_size"), "longest_edge", size, "max_image_size.")
    longest_src = ("preprocessor_config.json size.longest_edge" if "longest_edge" in _table(pre, "size")
                   else f"4 x vision_config.image_size {size}")
    processor = {  # the image processor's split: the longest side scaled, square tiles, a global view
        "kind": "split",
        "tile_px": leaf(tile, "V" if "max_image_size" in pre else "D",
                        "preprocessor_config.json max_image_size.longest_edge" if "max_image_size" in pre
                        else f"vision_config.image_size {size}"),
        "tokens_per_tile": derived(per_tile, f"({size}/{patch})^2 / scale_factor^2 (image_seq_len)"),
        "longest_edge_px": leaf(longest, "V" if "size" in pre else "D", longest_src),
    }
    return Tower(
        enc,
        mapping,
        derived(tokens, f"an image filling {grid}x{grid} tiles + global view"),
        ["row/column separator tokens between tiles are not counted"],
        processor,
    )


def fixed_pooled(
    tower: Keys, top: Keys, lm_hidden: int, *, tokens_key: str, kernel_key: str, what: str
) -> Tower:
    """Gemma-4 vision: a variable-resolution ViT pooled kernel^2 -> one soft token, a fixed budget."""
    hid, patch = value(tower.get("hidden_size")), value(tower.get("patch_size"))
    tokens, kernel = value(top.get(tokens_key)), value(tower.get(kernel_key))
    positions = tokens * kernel * kernel
    enc = vit_encoder(tower, mats=3, mlp_note=f"{what}: gated MLP")
    enc["projector_params"] = derived(hid * lm_hidden, f"Linear({hid}->{lm_hidden})")
    enc["stem_params"] = derived(3 * patch * patch * hid, f"patch embedding 3*{patch}*{patch}*{hid}")
    mapping = tiles_mapping(
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
    enc = vit_encoder(tower, mats=2, mlp_note="Llama-4 vision MLP fc1 -> GELU -> fc2")
    shuffled = int(hid / (ratio * ratio))
    enc["projector_params"] = derived(
        shuffled * proj_in + proj_in * vout + vout * lm_hidden,
        f"adapter Linear({shuffled}->{proj_in}) + Linear({proj_in}->{vout}) "
        f"+ projector Linear({vout}->{lm_hidden})",
    )
    enc["stem_params"] = patch_stem(hid, patch, side * side + 1, what="patch")
    mapping = tiles_mapping(
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


def _table(pre: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The table ``key`` of preprocessor_config.json ({} when absent)."""
    found = pre.get(key)
    if found is None:
        return {}
    if not isinstance(found, Mapping):
        raise ValueError(f"preprocessor_config.json: {key} must be a table, got {found!r}")
    return found


def _count(table: Mapping[str, Any], key: str, default: int, where: str = "") -> int:
    """A count of preprocessor_config.json (``default`` when absent), at least 1 (its type is
    checked on reading, :data:`calibration.importers._read.PROCESSOR_INT_KEYS`)."""
    found = table.get(key)
    if found is None:
        return default
    if found < 1:
        raise ValueError(f"preprocessor_config.json: {where}{key} must be at least 1, got {found!r}")
    return int(found)
