"""LLaVA-NeXT (image): CLIP tower + MLP projector + Llama LM, with anyres tiling.

An image of original size ``(H, W)`` becomes one base tile plus the tiles of
its best-fitting grid pinpoint; its LM tokens are the base tile's patches plus
the unpadded grid features with one newline token per row. :func:`image_tokens`
computes that count without running the model (a test checks it against the
encoder), so the executor can lay out a prompt and check its length up front.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers import (
    CLIPVisionConfig,
    LlamaConfig,
    LlavaNextConfig,
    LlavaNextForConditionalGeneration,
)
from transformers.models.llava_next.modeling_llava_next import (
    get_anyres_image_grid_shape,
    image_size_to_num_patches,
)

from easerve_core.request import Modality
from live.families import shapes
from live.families.base import MMInput, PlaceholderFamily, check_items, check_size, per_request, randn


def _small_config(lm: shapes.LMShape, tower: shapes.TowerShape, image_size: int) -> LlavaNextConfig:
    vision = CLIPVisionConfig(
        hidden_size=tower.hidden, intermediate_size=tower.intermediate,
        num_hidden_layers=tower.num_layers, num_attention_heads=tower.num_heads,
        image_size=image_size, patch_size=8, projection_dim=tower.hidden,
    )
    s = image_size
    return LlavaNextConfig(
        vision_config=vision, text_config=LlamaConfig(**shapes.text_config(lm)),
        image_token_index=lm.vocab - 1,
        image_grid_pinpoints=[[s, 2 * s], [2 * s, s], [2 * s, 2 * s]],
        vision_feature_layer=-1, vision_feature_select_strategy="default",
    )


def _full_config() -> LlavaNextConfig:
    """LLaVA-v1.6-34B: CLIP ViT-L/14-336 + Yi-34B (notes/systems.md §3.1)."""
    vision = CLIPVisionConfig(
        hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
        image_size=336, patch_size=14, projection_dim=768, hidden_act="quick_gelu",
    )
    lm = shapes.LMShape(hidden=7168, num_layers=60, num_heads=56, num_kv_heads=8,
                        intermediate=20480, vocab=64064, max_positions=4096, rope_theta=5e6)
    return LlavaNextConfig(
        vision_config=vision, text_config=LlamaConfig(**shapes.text_config(lm)), image_token_index=64000,
        image_grid_pinpoints=[[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]],
        vision_feature_layer=-2, vision_feature_select_strategy="default",
    )


def image_tokens(config: Any, height: int, width: int) -> int:
    """LM tokens of one image of original size ``(height, width)`` (mirrors pack_image_features)."""
    size, patch = config.vision_config.image_size, config.vision_config.patch_size
    side = size // patch
    grid_h, grid_w = get_anyres_image_grid_shape((height, width), config.image_grid_pinpoints, size)
    cur_h, cur_w = grid_h * side, grid_w * side
    if width / height > cur_w / cur_h:
        new_h = int(round(height * (cur_w / width), 7))
        rows, cols = cur_h - 2 * ((cur_h - new_h) // 2), cur_w
    else:
        new_w = int(round(width * (cur_h / height), 7))
        rows, cols = cur_h, cur_w - 2 * ((cur_w - new_w) // 2)
    return side * side + rows * (cols + 1)


@functools.lru_cache(maxsize=8)
def _size_menu(
    image_size: int, patch: int, pinpoints: tuple[tuple[int, int], ...]
) -> dict[int, tuple[int, int]]:
    """Token count -> the smallest image size (H, W) that gives it, over a grid of sizes."""
    cfg = _Geometry(image_size, patch, [list(p) for p in pinpoints])
    step = max(1, image_size // 8)
    menu: dict[int, tuple[int, int]] = {}
    for h in range(step, 3 * image_size + 1, step):
        for w in range(step, 3 * image_size + 1, step):
            menu.setdefault(image_tokens(cfg, h, w), (h, w))
    return dict(sorted(menu.items()))


class _Geometry:
    """Just the config fields :func:`image_tokens` reads."""

    def __init__(self, image_size: int, patch: int, pinpoints: list[list[int]]) -> None:
        self.vision_config = type("V", (), {"image_size": image_size, "patch_size": patch})()
        self.image_grid_pinpoints = pinpoints


class LlavaNext(PlaceholderFamily):
    """The LLaVA-NeXT family (see the module docstring)."""

    name = "llava-next"
    modalities = frozenset({Modality.IMAGE})

    model_cls: type = LlavaNextForConditionalGeneration

    def config(self, size: str) -> LlavaNextConfig:
        if check_size(size) == "full":
            return _full_config()
        if size == "tiny":
            return _small_config(shapes.TINY_LM, shapes.TINY_TOWER, 32)
        return _small_config(shapes.SMALL_LM, shapes.SMALL_TOWER, 32)

    def image_size_for(self, config: Any, tokens: int) -> tuple[int, int]:
        """The image size whose token count is nearest ``tokens`` (ties: fewer tokens)."""
        vc = config.vision_config
        pins = tuple(tuple(p) for p in config.image_grid_pinpoints)
        menu = _size_menu(vc.image_size, vc.patch_size, pins)
        best = min(menu, key=lambda n: (abs(n - tokens), n))
        return menu[best]

    def make_input(
        self, config: Any, modality: Modality, tokens_per_item: Sequence[int], rng: np.random.Generator
    ) -> MMInput:
        size = config.vision_config.image_size
        items, meta = [], []
        for tokens in tokens_per_item:
            h, w = self.image_size_for(config, tokens)
            tiles = image_size_to_num_patches((h, w), config.image_grid_pinpoints, size)
            items.append(randn(rng, tiles, 3, size, size))
            meta.append((h, w))
        return MMInput(modality=modality, items=tuple(items), meta=tuple(meta))

    def validate(self, config: Any, mm: MMInput) -> tuple[int, ...]:
        check_items(mm, self)
        size = config.vision_config.image_size
        tokens = []
        for i, (t, m) in enumerate(zip(mm.items, mm.meta, strict=True)):
            if len(m) != 2 or min(m) < 1:
                raise ValueError(f"image {i}: meta must be (height, width) >= 1, got {m!r}")
            tiles = image_size_to_num_patches(tuple(m), config.image_grid_pinpoints, size)
            want = (tiles, 3, size, size)
            if tuple(t.shape) != want:
                raise ValueError(f"image {i}: pixel tensor shape {tuple(t.shape)}, expected {want}")
            tokens.append(image_tokens(config, *m))
        return tuple(tokens)

    def encode(self, model: Any, inputs: Sequence[MMInput]) -> list[list[torch.Tensor]]:
        pixels = torch.cat([t for mm in inputs for t in mm.items])
        sizes = torch.tensor([m for mm in inputs for m in mm.meta], dtype=torch.long)
        feats = list(model.get_image_features(pixel_values=pixels, image_sizes=sizes).pooler_output)
        return per_request(feats, inputs)

    def placeholder(self, config: Any) -> int:
        return int(config.image_token_index)

    def generate_kwargs(self, model: Any, text_ids: Sequence[int], mm: MMInput) -> dict[str, Any]:
        return {
            **self.prompt_kwargs(model, text_ids, mm),
            "pixel_values": torch.cat(mm.items),
            "image_sizes": torch.tensor(mm.meta, dtype=torch.long),
        }
