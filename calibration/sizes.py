"""Raw item sizes to LM tokens, by the model's processor rule, where the model is known.

A ``[workload]`` may give images as ``[width, height]``, videos as frames or
seconds at an fps, audio as seconds (:mod:`easerve_core.workload.sizes`).
The core cannot turn them into tokens: that needs the model spec's
``processor`` table (:mod:`calibration.processor_spec`). :func:`resolve_sizes`
does it once a config is loaded (``easerve.resources.load_config`` and
:func:`calibration.session.compose` call it), and the resolved tokens are what
the mix holds. :data:`RULES` is the one table of rules: kind -> the raw-size
keys it takes and the function of one item. A model without a rule, or a
raw size its rule does not take, is refused with the key named.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from calibration.importers import processor_rules as rules
from calibration.processor_spec import ProcessorSpec
from calibration.specs import is_model, model_spec
from easerve_core import limits
from easerve_core.config import ExperimentConfig
from easerve_core.workload import AudioClip, ImageSize, RawSizes, VideoClip, WorkloadSpec
from easerve_core.workload.sizes import RawItem


@dataclass(frozen=True, slots=True)
class Rule:
    """One processor rule: what it is called, the raw-size keys it takes, one item's tokens, and
    (``encoded``, where the rule cuts or pools features after the projector) the item's tokens
    before that: the encoder's work, in the units of the spec's item mapping."""

    what: str
    takes: tuple[str, ...]
    tokens: Callable[[ProcessorSpec, RawItem], int]
    encoded: Callable[[ProcessorSpec, RawItem], int] | None = None


def _anyres(p: ProcessorSpec, item: RawItem) -> int:
    if isinstance(item, VideoClip):  # LLaVA-OneVision: the frames as they are given or sampled at fps
        return rules.llava_onevision_video_tokens(_frames(item), tile_px=p.tile_px, patch_px=p.patch_px,
                                                  pool=p.video_frame_pool)
    assert isinstance(item, ImageSize)
    return rules.llava_next_tokens(item.width_px, item.height_px, tile_px=p.tile_px, patch_px=p.patch_px,
                                   pinpoints=p.pinpoints_px, base_extra=p.base_extra_tokens,
                                   anyres_max=p.anyres_max)


def _anyres_encoded(p: ProcessorSpec, item: RawItem) -> int:
    """The tower encodes every tile of the grid an image is padded to, and every frame of a clip;
    LLaVA-NeXT removes the padding's features after it, LLaVA-OneVision's ``anyres_max`` and
    frame pooling shrink them after it. Counted as the ``tiles`` item mapping reads them back."""
    if isinstance(item, VideoClip):  # one tower forward a frame; the first stands where the base view does
        tiles = _frames(item) - 1
    else:
        assert isinstance(item, ImageSize)
        tiles = rules.llava_grid_tiles(item.width_px, item.height_px, tile_px=p.tile_px,
                                       pinpoints=p.pinpoints_px)
    return rules.llava_tower_tokens(tiles, tile_px=p.tile_px, patch_px=p.patch_px,
                                    base_extra=p.base_extra_tokens)


def _frames(clip: VideoClip) -> int:
    return clip.frames or rules.sampled_frames(clip.seconds, clip.fps)


def _qwen(p: ProcessorSpec, item: RawItem) -> int:
    if isinstance(item, ImageSize):
        return rules.qwen_image_tokens(item.width_px, item.height_px, patch_px=p.patch_px, merge=p.merge,
                                       min_pixels=p.min_pixels, max_pixels=p.max_pixels)
    assert isinstance(item, VideoClip)
    frames = item.frames or rules.sampled_frames(item.seconds, item.fps, temporal_patch=p.temporal_patch,
                                                 min_frames=p.min_frames, max_frames=p.max_frames)
    return rules.qwen_video_tokens(item.width_px, item.height_px, frames, patch_px=p.patch_px, merge=p.merge,
                                   temporal_patch=p.temporal_patch, min_pixels=p.video_min_pixels,
                                   max_pixels=p.video_max_pixels, per_clip=p.video_pixels_per == "clip")


def _fixed(p: ProcessorSpec, item: RawItem) -> int:
    return p.tokens_per_image


def _tiles(p: ProcessorSpec, item: RawItem) -> int:
    assert isinstance(item, ImageSize)
    return rules.internvl_image_tokens(item.width_px, item.height_px, tile_px=p.tile_px,
                                       tokens_per_tile=p.tokens_per_tile, min_tiles=p.min_tiles,
                                       max_tiles=p.max_tiles)


def _split(p: ProcessorSpec, item: RawItem) -> int:
    assert isinstance(item, ImageSize)
    return rules.idefics3_image_tokens(item.width_px, item.height_px, tile_px=p.tile_px,
                                       longest_edge_px=p.longest_edge_px, tokens_per_tile=p.tokens_per_tile)


def _whisper(p: ProcessorSpec, item: RawItem) -> int:
    assert isinstance(item, AudioClip)
    if p.stack_factor:
        return rules.ultravox_tokens(item.seconds, stack_factor=p.stack_factor)
    return rules.qwen2_audio_tokens(item.seconds, max_seconds=p.max_audio_s)


#: processor kind -> its rule
RULES: Mapping[str, Rule] = {
    "anyres": Rule("LLaVA-NeXT anyres grid; LLaVA-OneVision's pooled frames", ("images", "videos"), _anyres,
                   _anyres_encoded),
    "qwen": Rule("Qwen resize to merged patches within pixel bounds", ("images", "videos"), _qwen),
    "fixed": Rule("fixed tokens per image", ("images",), _fixed),
    "split": Rule("Idefics3 longest side scaled, split into tiles, plus a global view", ("images",), _split),
    "tiles": Rule("InternVL tiles closest to the aspect ratio, plus a thumbnail", ("images",), _tiles),
    "whisper": Rule("Whisper positions, pooled or stacked", ("audio_s",), _whisper),
}


def processor_of(model: str, key: str) -> ProcessorSpec:
    """The processor rule of ``model`` (a spec name or file), refusing one without a rule for ``key``."""
    if not is_model(model):
        raise ValueError(f"workload.{key}: model {model!r} has no model spec, so no processor rule to "
                         "turn raw sizes into LM tokens; give workload.item_tokens instead")
    spec = model_spec(model)
    if spec.processor is None:
        raise ValueError(f"workload.{key}: model {spec.name!r}'s spec has no processor rule (no 'processor' "
                         "table); give workload.item_tokens instead")
    rule = RULES[spec.processor.kind]
    takes = takes_of(spec.processor)
    if key not in takes:
        raise ValueError(f"workload.{key}: model {spec.name!r}'s processor ({rule.what}) takes "
                         f"{' and '.join(f'workload.{k}' for k in takes)}, not workload.{key}")
    return spec.processor


def takes_of(processor: ProcessorSpec) -> tuple[str, ...]:
    """The raw-size keys ``processor``'s rule takes: its kind's, less videos for an ``anyres``
    table without ``video_frame_pool`` (LLaVA-NeXT serves no videos)."""
    takes = RULES[processor.kind].takes
    if processor.kind == "anyres" and not processor.video_frame_pool:
        return tuple(k for k in takes if k != "videos")
    return takes


def item_tokens(processor: ProcessorSpec, sizes: RawSizes, *, encoder: bool = False) -> tuple[int, ...]:
    """LM tokens of each raw item under ``processor``'s rule; ``encoder=True``: the tokens before
    the rule cuts or pools features after the projector (the encoder's work; the same where the
    rule does neither)."""
    rule = RULES[processor.kind]
    count = rule.encoded if encoder and rule.encoded is not None else rule.tokens
    what = "tokens before unpadding and pooling" if encoder else "LM tokens"
    out = []
    for i, item in enumerate(sizes.items):
        tokens = count(processor, item)
        limits.at_most(f"workload.{sizes.key}[{i}] ({item.label()}: {tokens:,} {what})", tokens,
                       limits.MAX_TOKENS, limits.TOKENS_WHY)
        out.append(tokens)
    return tuple(out)


def resolve_workload(workload: WorkloadSpec, model: str) -> WorkloadSpec:
    """``workload`` with its raw sizes (if any, and not yet resolved) in LM tokens of ``model``."""
    if not workload.needs_size_tokens:
        return workload
    assert workload.sizes is not None
    processor = processor_of(model, workload.sizes.key)
    spec = model_spec(model)
    what = f"{spec.name} processor: {RULES[processor.kind].what}"
    tokens = item_tokens(processor, workload.sizes)
    if RULES[processor.kind].encoded is None or spec.mapping.kind != "tiles":  # its counts are tiles'
        return workload.with_size_tokens(tokens, what)
    # the encoder's count only where the LM tokens would price the encoder otherwise (a padded
    # grid, a pooled one), and the list only where some item needs it
    segments, tower = spec.mapping.segments, item_tokens(processor, workload.sizes, encoder=True)
    encoded = tuple(e if segments(e) != segments(t) else t for e, t in zip(tower, tokens, strict=True))
    return workload.with_size_tokens(tokens, what, encoded if encoded != tokens else ())


def resolve_sizes(config: ExperimentConfig) -> ExperimentConfig:
    """``config`` with its workload's raw sizes resolved by its model's rule (unchanged without any)."""
    if not config.workload.needs_size_tokens:
        return config
    return replace(config, workload=resolve_workload(config.workload, config.model))
