"""What every encoder tower of an imported spec shares: the :class:`Tower` result and its table builders.

The tower kinds live in :mod:`calibration.importers.towers` (CLIP / SigLIP and
Qwen-VL), :mod:`calibration.importers.towers_tiled` (InternViT, Idefics3 /
SmolVLM, pooled towers, Llama-4) and :mod:`calibration.importers.towers_audio`
(Whisper). Typical items (marked G): the image that fills the most tiles for a
tiled tower, a 1280x720 image for Qwen, 10 s of 720p at 2 fps for video, 10 s
of audio.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from calibration.importers import processor_rules as rules
from calibration.importers._read import Keys, derived, leaf, value

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
    #: the typical item's tokens before pooling (the encoder's work), where the tower pools
    typical_encode_tokens: dict[str, Any] | None = None


def fixed_image_processor(tokens: int, why: str) -> dict[str, Any]:
    return {"kind": "fixed", "tokens_per_image": derived(tokens, why)}


def square_side(keys: Keys, name: str) -> dict[str, Any]:
    """A pixel size that configs write as an int or as [h, w] (square assumed)."""
    raw = keys.raw_value(name)
    if isinstance(raw, list | tuple):
        if len(set(raw)) != 1:
            raise ValueError(f"{keys.file}: {keys.key(name)} {raw!r}: only square sizes are modelled")
        if isinstance(raw[0], bool) or not isinstance(raw[0], int) or raw[0] < 1:
            raise ValueError(f"{keys.file}: {keys.key(name)} must be a whole number of pixels, got {raw!r}")
        return leaf(int(raw[0]), "V", f"config.json {keys.key(name)} (square)")
    return keys.get(name, least=1)


def square_vit(tower: Keys) -> tuple[Any, Any, Any]:
    """(hidden size, image side, patch side) of a ViT tower with square images and patches."""
    size, patch = value(square_side(tower, "image_size")), value(square_side(tower, "patch_size"))
    if patch > size:
        raise ValueError(f"{tower.file}: {tower.key('patch_size')} ({patch}) must be at most "
                         f"{tower.key('image_size')} ({size})")
    return value(tower.get("hidden_size", least=1)), size, patch


def patch_stem(hid: int, patch: int, positions: int, *, what: str = "patch conv") -> dict[str, Any]:
    """The stem of a ViT: a ``patch`` x ``patch`` RGB patch embedding and ``positions`` learned positions."""
    return derived(
        3 * patch * patch * hid + positions * hid,
        f"{what} 3*{patch}*{patch}*{hid} + {positions} positions * {hid}",
    )


def vit_encoder(
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


def tiles_mapping(
    base: int, per_tile: int, max_tiles: int, positions: int, why: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "kind": "tiles",
        "base_lm_tokens": derived(base, why["base"]),
        "lm_tokens_per_tile": derived(per_tile, why["per_tile"]),
        "max_tiles": derived(max_tiles, why["max_tiles"]),
        "positions_per_tile": derived(positions, why["positions"]),
    }


def onevision_pooling(top: Keys, processor: dict[str, Any], notes: list[str], grid: Sequence[int]) -> int:
    """LLaVA-OneVision on top of the LLaVA-NeXT ``anyres`` table: its ``anyres_max`` and
    ``video_frame_pool`` go into ``processor``, its note into ``notes``; returns the LM tokens of
    the ``grid`` ([height, width]) image once pooled."""
    notes.append(
        "LLaVA-OneVision anyres_max pools large images after the tower encodes every tile: "
        "workload.item_tokens alone price the encoder on the pooled tokens (give raw sizes or "
        "workload.item_encode_tokens); a request of several images gets base views only in "
        "transformers' LlavaOnevisionProcessor and model, and each its anyres grid in vLLM's model, "
        "as priced here"
    )
    aspect = str(top.raw_value("vision_aspect_ratio", "anyres_max_9"))
    if not aspect.startswith("anyres_max_") or not aspect.removeprefix("anyres_max_").isdigit():
        raise ValueError(f"{top.file}: vision_aspect_ratio {aspect!r}: only anyres_max_N is modelled")
    where = ("config.json vision_aspect_ratio" if top.raw.get("vision_aspect_ratio") is not None
             else "LlavaOnevisionConfig default vision_aspect_ratio")
    processor["anyres_max"] = leaf(int(aspect.removeprefix("anyres_max_")),
                                   "V" if where.startswith("config") else "D", f"{where} {aspect!r}")
    processor["video_frame_pool"] = leaf(
        2, "V", "transformers LlavaOnevisionModel.apply_pooling: each frame's features pooled 2x2 "
                "(ceil), one newline per clip")
    return rules.llava_next_tokens(grid[1], grid[0], tile_px=value(processor["tile_px"]),
                                   patch_px=value(processor["patch_px"]),
                                   pinpoints=value(processor["pinpoints_px"]),
                                   base_extra=value(processor["base_extra_tokens"]),
                                   anyres_max=value(processor["anyres_max"]))
