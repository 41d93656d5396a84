"""A model spec's ``processor`` table: the parameters of the rule that turns raw items into LM tokens.

One rule per ``kind`` (the arithmetic is in
:mod:`calibration.importers.processor_rules`; the table of kinds, the raw
sizes each takes and its function is :data:`calibration.sizes.RULES`):

``anyres``   LLaVA-NeXT anyres grids: ``tile_px``, ``patch_px``,
             ``pinpoints_px`` ([[height, width], ...]), ``base_extra_tokens``;
             ``anyres_max`` N pools large grids as LLaVA-OneVision does (0: not);
             ``video_frame_pool`` S: videos, each frame one tile pooled S x S
             (ceil), plus one newline per clip, as LLaVA-OneVision (0: no videos)
``qwen``     Qwen2/2.5/3-VL: ``patch_px``, ``merge``, ``temporal_patch``, the
             image pixel bounds ``min_pixels``/``max_pixels`` and the video
             bounds ``video_min_pixels``/``video_max_pixels``, which hold each
             frame (``video_pixels_per = "frame"``, Qwen2/2.5-VL) or the whole
             clip, frames x height x width (``"clip"``, Qwen3-VL); a clip given in
             seconds samples between ``min_frames`` and ``max_frames`` frames
             when the table says (0: no bound)
``fixed``    a fixed number of LM tokens per image: ``tokens_per_image``
``tiles``    InternVL's dynamic tiling: ``tile_px`` square tiles, between
             ``min_tiles`` and ``max_tiles`` of them (the grid closest to the
             image's aspect ratio) plus a thumbnail when there are several,
             ``tokens_per_tile`` LM tokens each
``split``    Idefics3 / SmolVLM: the longest side scaled to
             ``longest_edge_px``, then split into ``tile_px`` tiles plus a global
             view when larger than one tile, ``tokens_per_tile`` each
``whisper``  Whisper encoder positions (100 mel frames/s, stride 2), then
             either Qwen2-Audio's average pool by 2 over at most
             ``max_audio_s`` (``stack_factor`` 0) or Ultravox's stacking of
             ``stack_factor`` positions per token

A spec without the table has no rule, and a workload giving raw sizes for
it is refused. The table is left out of :meth:`ModelSpec.to_dict` (the dict
analytic profiles embed): it changes request sizes, not costs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from calibration._fields import validate_kind

#: kind -> the fields it needs (> 0)
NEEDS: dict[str, tuple[str, ...]] = {
    "anyres": ("tile_px", "patch_px"),
    "qwen": ("patch_px", "merge", "temporal_patch", "min_pixels", "max_pixels",
             "video_min_pixels", "video_max_pixels"),
    "fixed": ("tokens_per_image",),
    "tiles": ("tile_px", "tokens_per_tile", "min_tiles", "max_tiles"),
    "split": ("tile_px", "tokens_per_tile", "longest_edge_px"),
    "whisper": (),
}

#: the most tiles a ``tiles`` table may allow: the rule weighs every grid of up to that many (InternVL
#: ships 12; 256 leaves room for any released tiler and keeps a bad table from taking the host's memory)
MAX_TILES = 256
#: what a ``qwen`` table's video bounds hold: one frame's pixels, or the clip's
VIDEO_PIXELS_PER = ("frame", "clip")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessorSpec:
    """The processor rule's parameters (see the module docstring)."""

    kind: str
    tile_px: int = 0
    patch_px: int = 0
    pinpoints_px: tuple[tuple[int, int], ...] = field(default=())
    base_extra_tokens: int = 0
    anyres_max: int = 0
    video_frame_pool: int = 0
    merge: int = 0
    temporal_patch: int = 0
    min_pixels: int = 0
    max_pixels: int = 0
    video_min_pixels: int = 0
    video_max_pixels: int = 0
    video_pixels_per: str = "frame"
    min_frames: int = 0
    max_frames: int = 0
    tokens_per_image: int = 0
    tokens_per_tile: int = 0
    min_tiles: int = 0
    max_tiles: int = 0
    longest_edge_px: int = 0
    stack_factor: int = 0
    max_audio_s: float = 0.0

    def __post_init__(self) -> None:
        validate_kind(self, NEEDS)
        object.__setattr__(self, "pinpoints_px", pinpoint_pairs(self.pinpoints_px, self.tile_px))
        if self.kind == "anyres" and not self.pinpoints_px:
            raise ValueError("ProcessorSpec.pinpoints_px must not be empty for kind 'anyres'")
        if self.kind == "whisper" and not (self.stack_factor or self.max_audio_s):
            raise ValueError("ProcessorSpec: kind 'whisper' needs stack_factor (Ultravox) or "
                             "max_audio_s (Qwen2-Audio)")
        if self.kind == "anyres" and self.patch_px > self.tile_px:
            raise ValueError(f"ProcessorSpec.patch_px ({self.patch_px!r}) must be <= tile_px "
                             f"({self.tile_px!r})")
        if self.max_tiles > MAX_TILES:
            raise ValueError(f"ProcessorSpec.max_tiles must be <= {MAX_TILES}, got {self.max_tiles!r}")
        if self.min_tiles > self.max_tiles:
            raise ValueError("ProcessorSpec: min_tiles must be <= max_tiles")
        if self.video_pixels_per not in VIDEO_PIXELS_PER:
            raise ValueError(f"ProcessorSpec.video_pixels_per must be one of {', '.join(VIDEO_PIXELS_PER)}, "
                             f"got {self.video_pixels_per!r}")
        for low, high in (("min_pixels", "max_pixels"), ("video_min_pixels", "video_max_pixels"),
                          ("min_frames", "max_frames")):
            if getattr(self, low) > getattr(self, high):
                raise ValueError(f"ProcessorSpec.{low} must be <= {high}, "
                                 f"got {getattr(self, low)!r} > {getattr(self, high)!r}")

    @classmethod
    def from_dict(cls, data: Any) -> ProcessorSpec:
        if not isinstance(data, dict):
            raise ValueError(f"processor must be a table, got {data!r}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise ValueError(f"processor is malformed: {exc}") from None


def pinpoint_pairs(pairs: Any, tile_px: int,
                   where: str = "ProcessorSpec.pinpoints_px") -> tuple[tuple[int, int], ...]:
    """LLaVA-NeXT's grid pinpoints as (height, width) pairs of whole pixels, each side at least a
    tile (each grid holds one); a bad pair is named by its index in ``where`` (the list can be long)."""
    if not isinstance(pairs, list | tuple):
        raise ValueError(f"{where} must be [[height, width], ...], got {pairs!r}")
    pins = []
    for i, pair in enumerate(pairs):
        whole = isinstance(pair, list | tuple) and len(pair) == 2 and all(
            not isinstance(v, bool) and (isinstance(v, int) or (isinstance(v, float) and v.is_integer()))
            for v in pair)
        if not whole:
            raise ValueError(f"{where}[{i}] must be [height, width] in whole pixels, got {pair!r}")
        if min(pair) < max(1, tile_px):
            raise ValueError(f"{where}[{i}] must be at least tile_px ({tile_px}) on each side, got {pair!r}")
        pins.append((int(pair[0]), int(pair[1])))
    return tuple(pins)
