"""Qwen2.5-VL (image and video): window-attention ViT + patch merger + Qwen2 LM with M-RoPE.

Inputs are flattened patches ``(t*h*w, 3*temporal_patch*patch**2)`` with a grid
``(t, h, w)`` in patches; ``h`` and ``w`` are even and the item gives
``t*h*w/4`` LM tokens. Each item sits between ``<vision_start>`` and
``<vision_end>``. Prefill computes 3-D M-RoPE positions with
``get_rope_index`` (which needs ``mm_token_type_ids``: 1 under image pads,
2 under video pads) and hands the request's ``rope_delta`` to Decode, which
must pass explicit positions (notes/tiny-models.md, pitfall P4).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

from easerve_core.request import Modality
from live.families import shapes
from live.families.base import (
    MMInput,
    PrefillInputs,
    check_items,
    check_size,
    layout_ids,
    merge_embeds,
    randn,
)

_SECONDS_PER_GRID = 1.0  # video: temporal spacing of one grid step (2 frames at 2 fps)
_TYPE = {Modality.IMAGE: 1, Modality.VIDEO: 2}


def _config(lm: shapes.LMShape, tower: shapes.TowerShape, *, specials: tuple[int, int, int, int],
            out_hidden: int | None = None, fullatt: list[int] | None = None) -> Qwen2_5_VLConfig:
    hd = lm.head_dim
    image, video, start, end = specials
    return Qwen2_5_VLConfig(
        vision_config=dict(
            depth=tower.num_layers, hidden_size=tower.hidden, intermediate_size=tower.intermediate,
            num_heads=tower.num_heads, patch_size=14, spatial_merge_size=2, temporal_patch_size=2,
            window_size=112, out_hidden_size=out_hidden or lm.hidden,
            fullatt_block_indexes=fullatt or [tower.num_layers - 1], tokens_per_second=2,
        ),
        # mrope_section must sum to head_dim / 2
        text_config=shapes.text_config(lm, mrope_section=[hd // 8, hd * 3 // 16, hd * 3 // 16]),
        image_token_id=image, video_token_id=video, vision_start_token_id=start,
        vision_end_token_id=end,
    )


def _tiny_specials(vocab: int) -> tuple[int, int, int, int]:
    return vocab - 1, vocab - 2, vocab - 3, vocab - 4


def _full_config() -> Qwen2_5_VLConfig:
    """Qwen2.5-VL-32B (notes/systems.md §3.2; out_hidden and mrope sections assumed)."""
    lm = shapes.LMShape(hidden=5120, num_layers=64, num_heads=40, num_kv_heads=8,
                        intermediate=27648, vocab=152064, max_positions=128000, rope_theta=1e6)
    tower = shapes.TowerShape(hidden=1280, num_layers=32, num_heads=16, intermediate=3420)
    return _config(lm, tower, specials=(151655, 151656, 151652, 151653), fullatt=[7, 15, 23, 31])


def _grid_for(tokens: int, frames: int) -> tuple[int, int, int]:
    """A grid (t, h, w) with t*h*w/4 == tokens: as square as the factors allow."""
    per_frame = tokens // frames
    a = max(d for d in range(1, math.isqrt(per_frame) + 1) if per_frame % d == 0)
    return frames, 2 * a, 2 * (per_frame // a)


class Qwen25VL:
    """The Qwen2.5-VL family (see the module docstring)."""

    name = "qwen2.5-vl"
    modalities = frozenset({Modality.IMAGE, Modality.VIDEO})
    mrope = True

    model_cls: type = Qwen2_5_VLForConditionalGeneration

    def config(self, size: str) -> Qwen2_5_VLConfig:
        if check_size(size) == "full":
            return _full_config()
        lm, tower = (shapes.TINY_LM, shapes.TINY_TOWER) if size == "tiny" else (
            shapes.SMALL_LM, shapes.SMALL_TOWER)
        return _config(lm, tower, specials=_tiny_specials(lm.vocab))

    @staticmethod
    def patch_dim(config: Any) -> int:
        vc = config.vision_config
        return vc.in_channels * vc.temporal_patch_size * vc.patch_size**2

    def make_input(
        self, config: Any, modality: Modality, tokens_per_item: Sequence[int], rng: np.random.Generator
    ) -> MMInput:
        items, meta = [], []
        for tokens in tokens_per_item:
            frames = 2 if modality is Modality.VIDEO and tokens % 2 == 0 else 1
            t, h, w = _grid_for(max(1, tokens), frames)
            items.append(randn(rng, t * h * w, self.patch_dim(config)))
            meta.append((t, h, w))
        return MMInput(modality=modality, items=tuple(items), meta=tuple(meta))

    def validate(self, config: Any, mm: MMInput) -> tuple[int, ...]:
        check_items(mm, self)
        dim = self.patch_dim(config)
        tokens = []
        for i, (x, m) in enumerate(zip(mm.items, mm.meta, strict=True)):
            if len(m) != 3 or min(m) < 1 or m[1] % 2 or m[2] % 2:
                raise ValueError(f"item {i}: grid must be (t, h, w) >= 1 with even h, w; got {m!r}")
            if mm.modality is Modality.IMAGE and m[0] != 1:
                raise ValueError(f"image {i}: grid t must be 1, got {m[0]}")
            want = (m[0] * m[1] * m[2], dim)
            if tuple(x.shape) != want:
                raise ValueError(f"item {i}: patch tensor shape {tuple(x.shape)}, expected {want}")
            tokens.append(m[0] * m[1] * m[2] // 4)
        return tuple(tokens)

    def encode(self, model: Any, inputs: Sequence[MMInput]) -> list[list[torch.Tensor]]:
        feats: dict[Modality, list[torch.Tensor]] = {}
        for modality in (Modality.IMAGE, Modality.VIDEO):
            group = [mm for mm in inputs if mm.modality is modality]
            if not group:
                continue
            pixels = torch.cat([t for mm in group for t in mm.items])
            grid = torch.tensor([m for mm in group for m in mm.meta], dtype=torch.long)
            fn = model.get_image_features if modality is Modality.IMAGE else model.get_video_features
            feats[modality] = list(fn(pixels, grid).pooler_output)
        out = []
        for mm in inputs:
            queue = feats[mm.modality]
            out.append(queue[: len(mm.items)])
            del queue[: len(mm.items)]
        return out

    def _ids(self, config: Any, text_ids: Sequence[int], modality: Modality,
             counts: Sequence[int]) -> torch.Tensor:
        pad = config.image_token_id if modality is Modality.IMAGE else config.video_token_id
        start, end = config.vision_start_token_id, config.vision_end_token_id
        return torch.tensor([layout_ids(text_ids, [[start, *([pad] * n), end] for n in counts])])

    def _rope(self, model: Any, ids: torch.Tensor, modality: Modality,
              meta: Sequence[tuple[int, ...]]) -> tuple[torch.Tensor, int]:
        cfg = model.config
        pad = cfg.image_token_id if modality is Modality.IMAGE else cfg.video_token_id
        mm_tt = (ids == pad).long() * _TYPE[modality]
        grid = torch.tensor(meta, dtype=torch.long)
        video = modality is Modality.VIDEO
        pos, deltas = model.model.get_rope_index(
            ids, mm_token_type_ids=mm_tt,
            image_grid_thw=None if video else grid, video_grid_thw=grid if video else None,
            second_per_grid_ts=torch.full((len(meta),), _SECONDS_PER_GRID) if video else None,
            attention_mask=torch.ones_like(ids),
        )
        return pos, int(deltas.reshape(-1)[0])

    def prefill_inputs(self, model: Any, text_ids: Sequence[int], modality: Modality,
                       meta: Sequence[tuple[int, ...]], feats: Sequence[torch.Tensor]) -> PrefillInputs:
        if not feats:  # text only: plain 1-D positions
            input_ids, embeds = merge_embeds(model, list(text_ids), -1, ())
            return PrefillInputs(input_ids=input_ids, inputs_embeds=embeds, position_ids=None,
                                 rope_delta=0)
        ids = self._ids(model.config, text_ids, modality, [f.shape[0] for f in feats])
        pad = model.config.image_token_id if modality is Modality.IMAGE else model.config.video_token_id
        input_ids, embeds = merge_embeds(model, ids[0].tolist(), pad, feats)
        pos, delta = self._rope(model, input_ids, modality, meta)
        return PrefillInputs(input_ids=input_ids, inputs_embeds=embeds, position_ids=pos,
                             rope_delta=delta)

    def generate_kwargs(self, model: Any, text_ids: Sequence[int], mm: MMInput) -> dict[str, Any]:
        counts = self.validate(model.config, mm)
        ids = self._ids(model.config, text_ids, mm.modality, counts)
        pad = (model.config.image_token_id if mm.modality is Modality.IMAGE
               else model.config.video_token_id)
        kwargs: dict[str, Any] = {
            "input_ids": ids, "attention_mask": torch.ones_like(ids),
            "mm_token_type_ids": (ids == pad).long() * _TYPE[mm.modality],
        }
        grid = torch.tensor(mm.meta, dtype=torch.long)
        if mm.modality is Modality.IMAGE:
            kwargs.update(pixel_values=torch.cat(mm.items), image_grid_thw=grid)
        else:
            kwargs.update(pixel_values_videos=torch.cat(mm.items), video_grid_thw=grid,
                          second_per_grid_ts=torch.full((len(mm.meta),), _SECONDS_PER_GRID))
        return kwargs
