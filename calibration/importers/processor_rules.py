"""How a processor turns a raw item (image size, video frames, audio seconds) into LM tokens.

Pure arithmetic, one function per rule, each checked against the
``transformers`` processor on tiny inputs (tests/calibration/test_processor_rules.py):
LLaVA-NeXT anyres grids, Qwen's resize to whole merged patches within pixel
bounds (images and videos), InternVL's tile canvas, Idefics3/SmolVLM's
splitting, fixed-token towers, and Whisper-based audio (Qwen2-Audio's pooling,
Ultravox's frame stacking).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: Whisper's log-mel features per second (hop 160 at 16 kHz)
MEL_FRAMES_PER_S = 100


def select_best_resolution(height: int, width: int, pinpoints: Sequence[Sequence[int]]) -> tuple[int, int]:
    """The anyres grid (height, width) an image of ``height`` x ``width`` is resized into: the most
    effective resolution, then the least waste."""
    best, best_effective, best_waste = (0, 0), -1, math.inf
    for grid_h, grid_w in pinpoints:
        scale = min(grid_w / width, grid_h / height)
        effective = min(int(width * scale) * int(height * scale), width * height)
        waste = grid_w * grid_h - effective
        if effective > best_effective or (effective == best_effective and waste < best_waste):
            best, best_effective, best_waste = (int(grid_h), int(grid_w)), effective, waste
    return best


def llava_next_tokens(
    width: int,
    height: int,
    *,
    tile_px: int,
    patch_px: int,
    pinpoints: Sequence[Sequence[int]],
    base_extra: int = 0,
    anyres_max: int = 0,
) -> int:
    """LM tokens of one image under LLaVA-NeXT anyres: the base view, then the grid's features
    with the padding rows or columns removed, plus one newline per row. ``base_extra`` is 1 when
    the CLS position is kept (``vision_feature_select_strategy = "full"``). ``anyres_max`` N
    (LLaVA-OneVision's ``anyres_max_N``) pools a grid of more than 1.1^2 x N tiles' features down
    by its square root of that excess, rows and newlines alike."""
    per_side = tile_px // patch_px
    grid_h, grid_w = select_best_resolution(height, width, pinpoints)
    cur_h, cur_w = grid_h // tile_px * per_side, grid_w // tile_px * per_side
    if width / height > cur_w / cur_h:
        new_h = int(round(height * (cur_w / width), 7))
        cur_h -= (cur_h - new_h) // 2 * 2
    else:
        new_w = int(round(width * (cur_h / height), 7))
        cur_w -= (cur_w - new_w) // 2 * 2
    features, newlines = cur_h * cur_w, cur_h
    if anyres_max:
        ratio = math.sqrt(cur_h * cur_w / (anyres_max * per_side * per_side))
        if ratio > 1.1:
            features, newlines = int(cur_h // ratio) * int(cur_w // ratio), int(cur_h // ratio)
    return per_side * per_side + base_extra + features + newlines


def llava_grid_tiles(width: int, height: int, *, tile_px: int, pinpoints: Sequence[Sequence[int]]) -> int:
    """The tiles of the grid LLaVA-NeXT pads an image to, the base view not counted: the processor
    crops all of them and the tower encodes every one, however much of the grid is padding."""
    grid_h, grid_w = select_best_resolution(height, width, pinpoints)
    return (grid_h // tile_px) * (grid_w // tile_px)


def llava_tower_tokens(tiles: int, *, tile_px: int, patch_px: int, base_extra: int = 0) -> int:
    """The encoder's work of a base view and ``tiles`` more tower forwards, in the units of the
    ``tiles`` item mapping (:class:`calibration.specs.ItemMapping`): the base view's tokens, then
    each tile as its rows of features with one newline each, before any are unpadded or pooled.
    The mapping reads it back as exactly ``1 + tiles`` forwards (up to its ``max_tiles``)."""
    per_side = tile_px // patch_px
    return per_side * per_side + base_extra + tiles * per_side * (per_side + 1)


def llava_onevision_video_tokens(frames: int, *, tile_px: int, patch_px: int, pool: int) -> int:
    """LM tokens of one clip under LLaVA-OneVision: every frame is one tile whose ``tile/patch``
    square of features is pooled ``pool`` x ``pool`` (rounding up), then one newline for the clip
    (``LlavaOnevisionProcessor``, ``LlavaOnevisionModel.apply_pooling``); the encoder's work is
    one tower forward a frame (:func:`llava_tower_tokens`)."""
    side = math.ceil(tile_px // patch_px / pool)
    return frames * side * side + 1


def smart_resize(
    height: int, width: int, *, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """Qwen's resize: each side to a multiple of ``factor`` (patch x merge), the area within bounds."""
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def qwen_image_tokens(
    width: int, height: int, *, patch_px: int, merge: int, min_pixels: int, max_pixels: int
) -> int:
    """LM tokens of one image under Qwen2/2.5/3-VL: resized patches / merge^2."""
    h, w = smart_resize(height, width, factor=patch_px * merge, min_pixels=min_pixels, max_pixels=max_pixels)
    return (h // patch_px) * (w // patch_px) // (merge * merge)


def qwen_video_tokens(
    width: int,
    height: int,
    num_frames: int,
    *,
    patch_px: int,
    merge: int,
    temporal_patch: int,
    min_pixels: int,
    max_pixels: int,
    per_clip: bool = False,
) -> int:
    """LM tokens of a video of ``num_frames`` sampled frames (padded to whole temporal patches).

    The bounds hold each frame (Qwen2/2.5-VL's video processor) or, with ``per_clip``, the whole
    clip, frames x height x width (Qwen3-VL's: :func:`qwen3_video_resize`)."""
    groups = math.ceil(num_frames / temporal_patch)
    if per_clip:
        h, w = qwen3_video_resize(num_frames, height, width, factor=patch_px * merge,
                                  temporal_patch=temporal_patch, min_pixels=min_pixels, max_pixels=max_pixels)
        return groups * (h // patch_px) * (w // patch_px) // (merge * merge)
    return groups * qwen_image_tokens(
        width, height, patch_px=patch_px, merge=merge, min_pixels=min_pixels, max_pixels=max_pixels
    )


def qwen3_video_resize(
    num_frames: int, height: int, width: int, *, factor: int, temporal_patch: int, min_pixels: int,
    max_pixels: int
) -> tuple[int, int]:
    """Qwen3-VL's video resize: as :func:`smart_resize`, but the bounds hold the clip's pixels
    (frames, rounded to whole temporal patches, x height x width), a side under ``factor`` is
    first scaled up to it, and a clip of fewer frames than a temporal patch counts as one patch."""
    num_frames = max(num_frames, temporal_patch)
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    t_bar = round(num_frames / temporal_patch) * temporal_patch
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt(num_frames * height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def tile_canvas(width: int, height: int, *, tile_px: int, min_tiles: int, max_tiles: int) -> tuple[int, int]:
    """The (columns, rows) of square ``tile_px`` tiles an image is resized onto (InternVL's
    dynamic tiling, transformers' ``GotOcr2ImageProcessor``): of the grids of ``min_tiles`` to
    ``max_tiles`` tiles, fewest tiles first, the one whose aspect ratio is closest to the image's;
    on an exact tie the larger grid, while the image's area exceeds half of it."""
    grids = sorted(((c, r) for c in range(1, max_tiles + 1) for r in range(1, max_tiles + 1)
                    if min_tiles <= c * r <= max_tiles), key=lambda g: g[0] * g[1])
    aspect, area = width / height, width * height
    best, best_diff = (1, 1), math.inf
    for cols, rows in grids:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and area > 0.5 * tile_px * tile_px * cols * rows:
            best = (cols, rows)
    return best


def internvl_image_tokens(
    width: int, height: int, *, tile_px: int, tokens_per_tile: int, min_tiles: int, max_tiles: int
) -> int:
    """LM tokens of one image under InternVL: each tile of :func:`tile_canvas`, and a thumbnail of
    the whole image when there is more than one tile, ``tokens_per_tile`` each (the start and end
    markers around them are not counted)."""
    cols, rows = tile_canvas(width, height, tile_px=tile_px, min_tiles=min_tiles, max_tiles=max_tiles)
    tiles = cols * rows
    return tokens_per_tile * (tiles + (tiles > 1))


#: the side no Idefics3 image is resized past (transformers' ``MAX_IMAGE_SIZE``, "4k")
IDEFICS3_MAX_SIDE_PX = 4096


def idefics3_image_tokens(width: int, height: int, *, tile_px: int, longest_edge_px: int,
                          tokens_per_tile: int) -> int:
    """LM tokens of one image under Idefics3 / SmolVLM: its longest side scaled to
    ``longest_edge_px`` (up or down, the other side kept in proportion and made even), then split
    into square ``tile_px`` tiles plus a global view when it is larger than one tile;
    ``tokens_per_tile`` each (the row/column and global markers are not counted)."""
    if width >= height:
        w = longest_edge_px
        h = int(w / (width / height))
        h += h % 2
    else:
        h = longest_edge_px
        w = int(h * (width / height))
        w += w % 2
    h, w = max(h, 1), max(w, 1)
    if max(h, w) > IDEFICS3_MAX_SIDE_PX:  # scaled below the bound, the aspect ratio kept
        aspect = w / h
        if w >= h:
            w, h = IDEFICS3_MAX_SIDE_PX, max(1, int(IDEFICS3_MAX_SIDE_PX / aspect))
        else:
            h, w = IDEFICS3_MAX_SIDE_PX, max(1, int(IDEFICS3_MAX_SIDE_PX * aspect))
    rows, cols = math.ceil(h / tile_px), math.ceil(w / tile_px)
    return tokens_per_tile * (rows * cols + 1 if rows * cols > 1 else 1)


def sampled_frames(seconds: float, fps: float, *, temporal_patch: int = 1, min_frames: int = 0,
                   max_frames: int = 0) -> int:
    """Frames sampled from ``seconds`` of video at ``fps``, between ``min_frames`` and ``max_frames``
    when given (the Qwen samplers' 4 and 768), rounded up to whole temporal patches."""
    frames = round(seconds * fps)
    if max_frames:
        frames = min(max(frames, min_frames), max_frames)
    frames = max(temporal_patch, frames)
    return math.ceil(frames / temporal_patch) * temporal_patch


def whisper_positions(seconds: float) -> int:
    """Encoder positions of ``seconds`` of audio: mel frames through Whisper's stride-2 conv."""
    frames = math.ceil(seconds * MEL_FRAMES_PER_S)
    return (frames - 1) // 2 + 1


def qwen2_audio_tokens(seconds: float, *, max_seconds: float = 30.0) -> int:
    """LM tokens of a clip under Qwen2-Audio: Whisper positions, then average-pooled by 2."""
    return (whisper_positions(min(seconds, max_seconds)) - 2) // 2 + 1


def ultravox_tokens(seconds: float, *, stack_factor: int) -> int:
    """LM tokens of a clip under Ultravox: Whisper positions stacked ``stack_factor`` at a time."""
    return math.ceil(whisper_positions(seconds) / stack_factor)
