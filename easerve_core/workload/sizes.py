"""Raw item sizes in a ``[workload]`` table: images in pixels, videos in frames, audio in seconds.

A workload may give its multimodal items as the user knows them instead of
as LM tokens (docs/workloads.md, "Raw item sizes"):

``images``   ``[[width, height], ...]`` in pixels, with ``image_weights``
``videos``   ``[{ size = [width, height], frames = N }, ...]`` (frames already
             sampled) or ``{ size = [...], seconds = S, fps = F }`` (sampled
             at ``fps``), with ``video_weights``
``audio_s``  ``[seconds, ...]`` clip lengths, with ``audio_weights``

:class:`RawSizes` holds them as parsed, validated data. Turning them into LM
tokens needs the model's processor rule, which the core does not know: the
layer that knows the model (``calibration.sizes``) computes the tokens and
hands them back through :meth:`RawSizes.resolved`. Until then the workload
refuses to draw requests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from easerve_core import checks
from easerve_core.request import Modality


@dataclass(frozen=True, slots=True)
class ImageSize:
    """One image, ``width`` x ``height`` pixels."""

    width_px: int
    height_px: int

    def label(self) -> str:
        return f"{self.width_px}x{self.height_px}"


@dataclass(frozen=True, slots=True)
class VideoClip:
    """One clip of ``width`` x ``height`` frames: ``frames`` sampled frames, or ``seconds`` at ``fps``."""

    width_px: int
    height_px: int
    frames: int = 0
    seconds: float = 0.0
    fps: float = 0.0

    def label(self) -> str:
        when = f"{self.frames} frames" if self.frames else f"{self.seconds:g} s at {self.fps:g} fps"
        return f"{self.width_px}x{self.height_px} {when}"


@dataclass(frozen=True, slots=True)
class AudioClip:
    """One clip of ``seconds`` of audio."""

    seconds: float

    def label(self) -> str:
        return f"{self.seconds:g} s"


RawItem = ImageSize | VideoClip | AudioClip
#: raw-size key -> (its weights key, the modality of its items)
KEYS: Mapping[str, tuple[str, Modality]] = {
    "images": ("image_weights", Modality.IMAGE),
    "videos": ("video_weights", Modality.VIDEO),
    "audio_s": ("audio_weights", Modality.AUDIO),
}
WEIGHT_KEYS = frozenset(weights for weights, _ in KEYS.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class RawSizes:
    """The raw items of a workload (one key of :data:`KEYS`), and their LM tokens once resolved.

    ``tokens`` (one per item) and ``rule`` (what computed them, for the
    user) are empty until :meth:`resolved`. ``encode_tokens``, where the
    rule cuts or pools features after the projector (LLaVA-NeXT's unpadding,
    LLaVA-OneVision's ``anyres_max``), holds each item's tokens before that:
    the encoder's work (empty: nothing cut or pooled).
    """

    key: str
    items: tuple[RawItem, ...]
    weights: tuple[float, ...] = ()
    tokens: tuple[int, ...] = ()
    rule: str = ""
    encode_tokens: tuple[int, ...] = ()

    @property
    def modality(self) -> Modality:
        return KEYS[self.key][1]

    @property
    def is_resolved(self) -> bool:
        return bool(self.tokens)

    def resolved(self, tokens: tuple[int, ...], rule: str, encode_tokens: tuple[int, ...] = ()) -> RawSizes:
        for given in (tokens, encode_tokens or tokens):
            if len(given) != len(self.items):
                raise ValueError(f"workload.{self.key}: {len(given)} token counts for "
                                 f"{len(self.items)} items")
        return replace(self, tokens=tuple(tokens), rule=rule, encode_tokens=tuple(encode_tokens))

    def describe(self) -> str:
        """One line: each item and its LM tokens (after :meth:`resolved`), and the encoder's
        tokens before unpadding and pooling where they differ."""
        tower = self.encode_tokens or self.tokens
        pairs = ", ".join(f"{item.label()} -> {t:,}" + (f" (encoder: {e:,})" if e != t else "")
                          for item, t, e in zip(self.items, self.tokens, tower, strict=True))
        return f"workload.{self.key}: {pairs} LM tokens ({self.rule})"

    @classmethod
    def from_table(cls, data: Mapping[str, Any]) -> RawSizes | None:
        """The table's raw sizes, or None when it gives none."""
        given = [key for key in KEYS if key in data]
        for key, (weights, _) in KEYS.items():
            if weights in data and key not in given:
                raise ValueError(f"workload.{weights} weighs workload.{key}, which is not given")
        if not given:
            return None
        if len(given) > 1:
            raise ValueError(f"give one of workload.{', workload.'.join(given)}: a mix has one modality")
        key = given[0]
        raw = data[key]
        if not isinstance(raw, list | tuple) or not raw:
            raise ValueError(f"workload.{key} must be a non-empty list, got {raw!r}")
        items = tuple(_PARSERS[key](f"workload.{key}[{i}]", item) for i, item in enumerate(raw))
        return cls(key=key, items=items, weights=_weights(KEYS[key][0], data, len(items)))


def _weights(name: str, data: Mapping[str, Any], count: int) -> tuple[float, ...]:
    if name not in data:
        return ()
    raw = data[name]
    if not isinstance(raw, list | tuple):
        raise ValueError(f"workload.{name} must be a list, got {raw!r}")
    weights = tuple(checks.non_negative(f"workload.{name}[{i}]", w) for i, w in enumerate(raw))
    if len(weights) != count:
        raise ValueError(f"workload.{name} must have one weight per item ({count}), got {len(weights)}")
    if sum(weights) <= 0:
        raise ValueError(f"workload.{name} must not all be zero")
    return weights


def _size(name: str, raw: Any) -> tuple[int, int]:
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        raise ValueError(f"{name} must be [width, height] in pixels, got {raw!r}")
    return (checks.integer(f"{name}[0] (width)", raw[0], minimum=1),
            checks.integer(f"{name}[1] (height)", raw[1], minimum=1))


def _image(name: str, raw: Any) -> ImageSize:
    return ImageSize(*_size(name, raw))


_VIDEO_FIELDS = frozenset({"size", "frames", "seconds", "fps"})


def _video(name: str, raw: Any) -> VideoClip:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{name} must be a table {{ size = [width, height], frames = N }} "
                         f"or {{ size = [...], seconds = S, fps = F }}, got {raw!r}")
    unknown = sorted(set(raw) - _VIDEO_FIELDS)
    if unknown:
        raise ValueError(f"{name}.{unknown[0]} is not a video field "
                         f"(fields: {', '.join(sorted(_VIDEO_FIELDS))})")
    if "size" not in raw:
        raise ValueError(f"{name}.size is required ([width, height] in pixels)")
    width, height = _size(f"{name}.size", raw["size"])
    if "frames" in raw:
        for other in ("seconds", "fps"):
            if other in raw:
                raise ValueError(f"{name}.{other}: give frames (already sampled) or seconds and fps, "
                                 "not both")
        return VideoClip(width, height, frames=checks.integer(f"{name}.frames", raw["frames"], minimum=1))
    for needed in ("seconds", "fps"):
        if needed not in raw:
            raise ValueError(f"{name}.{needed} is required without frames")
    return VideoClip(width, height, seconds=checks.positive(f"{name}.seconds", raw["seconds"]),
                     fps=checks.positive(f"{name}.fps", raw["fps"]))


def _audio(name: str, raw: Any) -> AudioClip:
    return AudioClip(checks.positive(name, raw))


_PARSERS: Mapping[str, Callable[[str, Any], RawItem]] = {
    "images": _image, "videos": _video, "audio_s": _audio}
