"""Request-size mixes: how many tokens each request brings, per modality.

A :class:`RequestMix` draws the text prompt length, the output length and the
multimodal items (LM tokens per item) of each request. The named presets
follow the facts in docs/workloads.md (from the team's notes, systems.md §2):

* ``llava-image``: one image through LLaVA-v1.6 anyres: 2,928 LM tokens for
  672x672/1024x1024, 2,340 for 480x640, 1,948 for 720p/1080p, 2,328 for
  336x1008.
* ``qwen-image``: one image at 1 LM token per 28x28 px: 1,369 (1024^2),
  1,196 (720p), 2,691 (1080p).
* ``qwen-video``: one 720p clip at 2 fps, frames in pairs, 768 px-tokens per
  frame cap: 720 LM tokens per second; clips of 5, 10 and 20 s.
* ``qwen-video-rmm16``: the one video bucket vLLM's ``random-mm`` generator
  documents, ``(720, 1280, 16)``: 16 frames of 720x1280, which the Qwen2.5-VL
  video processor resizes to 560x1008 (its 768 x 28^2 px frame cap) and
  patches in frame pairs: 8 x 720 = 5,760 LM tokens.
* ``ultravox-audio``: one clip at 6.25 LM tokens per second of audio; clip
  lengths spread like LibriSpeech utterances (5 to 30 s).
* ``text``: no multimodal item.

Text lengths follow vLLM's ``random-mm`` examples (128-512 prompt tokens,
128-256 output tokens); the paper does not state its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from easerve_core import checks, limits
from easerve_core.request import Modality, Request, encode_tokens

#: the upper bound of each [min, max] range of a mix, and why (easerve_core.limits)
_RANGE_LIMITS = {
    "items_per_request": (limits.MAX_ITEMS_PER_REQUEST, "items one request carries"),
    "prompt_tokens": (limits.MAX_TOKENS, "the longest context of public LLMs"),
    "output_tokens": (limits.MAX_TOKENS, "the longest context of public LLMs"),
}


#: one request's items: a count per item
Items = tuple[int, ...]


def _range(name: str, value: Sequence[int]) -> tuple[int, int]:
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be [min, max], got {value!r}") from None
    lo = checks.integer(f"{name}[0]", lo, minimum=0)
    hi = checks.integer(f"{name}[1]", hi, minimum=0)
    limit, why = _RANGE_LIMITS[name]
    limits.at_most(f"{name}[1]", hi, limit, why)
    if hi < lo:
        raise ValueError(f"{name} must be [min, max] with min <= max, got {value!r}")
    return lo, hi


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestMix:
    """Distribution of request sizes for one modality.

    Args:
        modality: the requests' modality.
        item_tokens: LM tokens per multimodal item, one value per choice.
        item_weights: relative weights of ``item_tokens`` (uniform if empty).
        item_encode_tokens: where the model cuts or pools an item's features
            after its projector (LLaVA-NeXT's unpadding, LLaVA-OneVision's
            ``anyres_max``), the tokens each choice would be before that: the
            encoder's work (``Request.encode_tokens_per_item``); empty:
            ``item_tokens``.
        items_per_request: [min, max] items per request (inclusive).
        prompt_tokens: [min, max] text prompt tokens, uniform.
        output_tokens: [min, max] output tokens, uniform.
    """

    modality: Modality
    item_tokens: tuple[int, ...] = ()
    item_weights: tuple[float, ...] = ()
    item_encode_tokens: tuple[int, ...] = ()
    items_per_request: tuple[int, int] = (1, 1)
    prompt_tokens: tuple[int, int] = (128, 512)
    output_tokens: tuple[int, int] = (128, 256)
    _probs: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "modality", Modality.parse(self.modality))
        tokens = tuple(limits.at_most("item_tokens", checks.integer("item_tokens", t, minimum=1),
                                      limits.MAX_TOKENS, "the longest context of public LLMs")
                       for t in self.item_tokens)
        set_(self, "item_tokens", tokens)
        set_(self, "items_per_request", _range("items_per_request", self.items_per_request))
        set_(self, "prompt_tokens", _range("prompt_tokens", self.prompt_tokens))
        set_(self, "output_tokens", _range("output_tokens", self.output_tokens))
        if self.output_tokens[0] < 1:
            raise ValueError(f"output_tokens must be >= 1, got {self.output_tokens!r}")
        if self.modality is Modality.TEXT:
            if tokens:
                raise ValueError("item_tokens must be empty for a text mix")
        else:
            if not tokens:
                raise ValueError(f"item_tokens must not be empty for a {self.modality} mix")
            if self.items_per_request[0] < 1:
                raise ValueError(f"items_per_request must be >= 1, got {self.items_per_request!r}")
        weights = tuple(checks.non_negative("item_weights", w) for w in self.item_weights)
        if weights and len(weights) != len(tokens):
            raise ValueError(
                f"item_weights must have one weight per item_tokens choice "
                f"({len(tokens)}), got {len(weights)}"
            )
        if weights and sum(weights) <= 0:
            raise ValueError("item_weights must not all be zero")
        set_(self, "item_weights", weights)
        if self.item_encode_tokens:
            set_(self, "item_encode_tokens", encode_tokens(self.item_encode_tokens, len(tokens),
                                                           "item_encode_tokens", per="item_tokens choice"))
        probs = np.array(weights or [1.0] * len(tokens), dtype=float)
        set_(self, "_probs", probs / probs.sum() if probs.size else probs)

    @property
    def longest_items_tokens(self) -> int:
        """The most LM tokens one request's items can hold (the most items, each of the largest
        size the weights can draw; 0 for a text mix)."""
        drawn = [t for t, p in zip(self.item_tokens, self._probs, strict=True) if p > 0]
        return self.items_per_request[1] * max(drawn) if drawn else 0

    @property
    def longest_input_tokens(self) -> int:
        """The longest input (prompt and items) this mix can draw."""
        return self.prompt_tokens[1] + self.longest_items_tokens

    def with_items(self, tokens: tuple[int, ...], weights: tuple[float, ...] = (),
                   encode_tokens: tuple[int, ...] = ()) -> RequestMix:
        """This mix with ``tokens`` as its item choices, and their own weights and encoder counts
        (uniform and none by default): the mix's were for its own choices and never carry over."""
        return replace(self, item_tokens=tokens, item_weights=weights, item_encode_tokens=encode_tokens)

    def with_item_scale(self, scale: float) -> RequestMix:
        """This mix with every item's LM tokens times ``scale`` (rounded, at least 1)."""
        return replace(self, item_tokens=scale_items(self.item_tokens, scale),
                       item_encode_tokens=scale_items(self.item_encode_tokens, scale))

    def draw(self, request_id: int, arrival_s: float, rng: np.random.Generator) -> Request:
        """One request; draws in a fixed order so a seed fixes every size."""
        prompt = int(rng.integers(self.prompt_tokens[0], self.prompt_tokens[1] + 1))
        output = int(rng.integers(self.output_tokens[0], self.output_tokens[1] + 1))
        picks = self._picks(rng)
        return Request(
            request_id=request_id,
            arrival_s=float(arrival_s),
            modality=self.modality,
            prompt_tokens=prompt,
            output_tokens=output,
            mm_tokens_per_item=tuple(self.item_tokens[i] for i in picks),
            encode_tokens_per_item=tuple(self.item_encode_tokens[i] for i in picks)
            if self.item_encode_tokens else (),
        )

    def _picks(self, rng: np.random.Generator) -> Sequence[int]:
        """One request's item choices (indices); a text mix draws nothing."""
        if self.modality is Modality.TEXT:
            return ()
        lo, hi = self.items_per_request
        k = int(rng.integers(lo, hi + 1))
        picks: list[int] = rng.choice(len(self.item_tokens), size=k, p=self._probs).tolist()
        return picks

    def draw_item_lists(self, n: int, rng: np.random.Generator) -> list[tuple[Items, Items]]:
        """``n`` requests' items at once, every count first, then every item (for long traces): each
        request's (LM tokens, encoder's tokens) per item, the second empty unless the mix has them."""
        if self.modality is Modality.TEXT:
            return [((), ())] * n
        lo, hi = self.items_per_request
        counts = rng.integers(lo, hi + 1, size=n)
        picks = rng.choice(len(self.item_tokens), size=int(counts.sum()), p=self._probs)
        tokens = np.asarray(self.item_tokens)[picks].tolist()
        tower = np.asarray(self.item_encode_tokens)[picks].tolist() if self.item_encode_tokens else None
        ends = np.cumsum(counts).tolist()
        return [(tuple(tokens[end - k:end]), tuple(tower[end - k:end]) if tower is not None else ())
                for end, k in zip(ends, counts.tolist(), strict=True)]


def scale_items(tokens: Sequence[int], scale: float) -> tuple[int, ...]:
    """Each item's LM tokens times ``scale``, rounded, at least 1 (a small live model's items)."""
    return tuple(max(1, round(t * scale)) for t in tokens)


def _audio_tokens(seconds: Sequence[float]) -> tuple[int, ...]:
    return tuple(int(np.ceil(6.25 * s)) for s in seconds)


MIXES: Mapping[str, RequestMix] = {
    "llava-image": RequestMix(
        modality=Modality.IMAGE,
        item_tokens=(2928, 2340, 1948, 2328),
        item_weights=(0.4, 0.2, 0.3, 0.1),
    ),
    "qwen-image": RequestMix(
        modality=Modality.IMAGE, item_tokens=(1369, 1196, 2691), item_weights=(0.4, 0.3, 0.3)
    ),
    "qwen-video": RequestMix(
        modality=Modality.VIDEO, item_tokens=(3600, 7200, 14400), item_weights=(0.3, 0.5, 0.2)
    ),
    "qwen-video-rmm16": RequestMix(modality=Modality.VIDEO, item_tokens=(5760,)),
    "ultravox-audio": RequestMix(
        modality=Modality.AUDIO,
        item_tokens=_audio_tokens((5, 10, 15, 20, 30)),
        item_weights=(0.2, 0.3, 0.25, 0.15, 0.1),
    ),
    "text": RequestMix(modality=Modality.TEXT),
}


def mix(name: str) -> RequestMix:
    checks.one_of("mix", name, MIXES)
    return MIXES[name]
