"""What every model family offers the live executor, and the values it passes around.

A *family* (LLaVA-NeXT, Qwen2.5-VL, Qwen2-Audio) knows four things about its
`transformers` model class: how to write its config in code for a named size,
how to build a multimodal input of the right shape for a requested number of
LM tokens per item, how to run its tower + projector on a micro-batch, and how
to lay the resulting embeddings into a prompt for Prefill (including M-RoPE
positions where the family has them). Everything else (prefill, KV hand-off,
continuous-batching decode) is family-agnostic and lives in ``live.stages``.

Families are stateless: every method takes the model or its config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from easerve_core.request import Modality

SIZES = ("tiny", "small", "full")


@dataclass(frozen=True, slots=True, kw_only=True)
class MMInput:
    """The multimodal part of one request, as raw tensors (what a client uploads).

    ``items[i]`` is the i-th item's tensor (pixels, patches or mel features);
    ``meta[i]`` the integers its family needs to read it: LLaVA-NeXT the
    original ``(height, width)``, Qwen2.5-VL the grid ``(t, h, w)``, Qwen2-Audio
    the number of real mel ``(frames,)``.
    """

    modality: Modality
    items: tuple[torch.Tensor, ...]
    meta: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "modality", Modality.parse(self.modality))
        if len(self.items) != len(self.meta):
            raise ValueError(
                f"items and meta must have the same length, got {len(self.items)} and {len(self.meta)}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefillInputs:
    """One request laid out for the LM: embeddings, ids and optional M-RoPE positions."""

    input_ids: torch.Tensor  # (1, L)
    inputs_embeds: torch.Tensor  # (1, L, hidden)
    position_ids: torch.Tensor | None  # (3, 1, L) for M-RoPE, else None
    rope_delta: int  # decode position = length + step + rope_delta


class Family(Protocol):
    """The seam between the executor and one `transformers` model family."""

    name: str
    modalities: frozenset[Modality]
    mrope: bool

    model_cls: type

    def config(self, size: str) -> Any: ...

    def make_input(
        self, config: Any, modality: Modality, tokens_per_item: Sequence[int], rng: np.random.Generator
    ) -> MMInput: ...

    def validate(self, config: Any, mm: MMInput) -> tuple[int, ...]:
        """Raise ``ValueError`` on a malformed input; else return LM tokens per item."""
        ...

    def encode(self, model: Any, inputs: Sequence[MMInput]) -> list[list[torch.Tensor]]: ...

    def prefill_inputs(self, model: Any, text_ids: Sequence[int], modality: Modality,
                       meta: Sequence[tuple[int, ...]], feats: Sequence[torch.Tensor]) -> PrefillInputs:
        """Lay one request's text and encoder outputs out for the LM."""
        ...

    def generate_kwargs(self, model: Any, text_ids: Sequence[int], mm: MMInput) -> dict[str, Any]: ...


def check_size(size: str) -> str:
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; known: {', '.join(SIZES)}")
    return size


def randn(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    """A float32 standard-normal tensor drawn from the injected generator."""
    return torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))


def check_items(mm: MMInput, family: Family) -> None:
    """Checks every family shares: a supported modality and at least one item."""
    if mm.modality not in family.modalities:
        known = ", ".join(sorted(m.value for m in family.modalities))
        raise ValueError(f"{family.name} does not take {mm.modality.value} input; known: {known}")
    if not mm.items:
        raise ValueError(f"{mm.modality.value} input has zero items")
    for i, t in enumerate(mm.items):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"item {i} is not a tensor: {type(t).__name__}")
        if not torch.isfinite(t).all():
            raise ValueError(f"item {i} holds NaN or infinite values")


def layout_ids(
    text_ids: Sequence[int], blocks: Sequence[Sequence[int]]
) -> list[int]:
    """Place each item's placeholder block in the middle of the text prompt.

    The first half of the text comes first (so a BOS stays first), then the
    items in order, then the rest of the text.
    """
    half = (len(text_ids) + 1) // 2
    ids = list(text_ids[:half])
    for block in blocks:
        ids.extend(block)
    ids.extend(text_ids[half:])
    return ids


def merge_embeds(
    model: Any, ids: list[int], placeholder: int, feats: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token embeddings with the multimodal features scattered over the placeholders."""
    input_ids = torch.tensor([ids], dtype=torch.long)
    embeds = model.get_input_embeddings()(input_ids)
    if feats:
        mask = (input_ids == placeholder)[..., None]
        flat = torch.cat(list(feats)).to(embeds.dtype)
        if int(mask.sum()) != flat.shape[0]:
            raise ValueError(
                f"prompt holds {int(mask.sum())} placeholders but the encoder gave {flat.shape[0]} tokens"
            )
        embeds = embeds.masked_scatter(mask, flat)
    return input_ids, embeds


def set_init_std(config: Any, init_std: float) -> None:
    """Set the weight-init scale on a composite config and its sub-configs (pitfall P1)."""
    subs = ("text_config", "vision_config", "audio_config")
    for cfg in (config, *(getattr(config, n, None) for n in subs)):
        if cfg is None:
            continue
        for attr in ("initializer_range", "init_std"):
            if hasattr(cfg, attr):
                setattr(cfg, attr, init_std)


def per_request(feats: Sequence[torch.Tensor], inputs: Sequence[MMInput]) -> list[list[torch.Tensor]]:
    """Regroup one encoder batch's per-item outputs into one list per request, in input order."""
    out, i = [], 0
    for mm in inputs:
        out.append(list(feats[i : i + len(mm.items)]))
        i += len(mm.items)
    return out


class PlaceholderFamily:
    """What the families whose items are runs of one placeholder token (no M-RoPE) share.

    A subclass says which token that is (:meth:`placeholder`) and checks its
    inputs (``validate``); its Prefill inputs and the prompt half of its
    ``generate`` keywords follow from those.
    """

    mrope = False

    def placeholder(self, config: Any) -> int:
        """The token id whose runs the items' LM tokens replace."""
        raise NotImplementedError

    def validate(self, config: Any, mm: MMInput) -> tuple[int, ...]:
        raise NotImplementedError

    def prefill_inputs(self, model: Any, text_ids: Sequence[int], modality: Modality,
                       meta: Sequence[tuple[int, ...]], feats: Sequence[torch.Tensor]) -> PrefillInputs:
        token = self.placeholder(model.config)
        ids = layout_ids(text_ids, [[token] * f.shape[0] for f in feats])
        input_ids, embeds = merge_embeds(model, ids, token, feats)
        return PrefillInputs(input_ids=input_ids, inputs_embeds=embeds, position_ids=None, rope_delta=0)

    def prompt_kwargs(self, model: Any, text_ids: Sequence[int], mm: MMInput) -> dict[str, Any]:
        """``input_ids`` (one block of placeholders per item, as long as ``validate`` says) and its mask."""
        token = self.placeholder(model.config)
        ids = torch.tensor([layout_ids(text_ids, [[token] * n for n in self.validate(model.config, mm)])])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

