"""Qwen2-Audio (audio): Whisper-style encoder + linear projector + Qwen2 LM.

Stands in for Ultravox, which `transformers` 5.24 does not ship. The encoder
always takes ``2 * max_source_positions`` mel frames (one full window per
clip, whatever its length, pitfall P6); a clip of ``n`` real frames gives
``((n - 1)//2 + 1 - 2)//2 + 1`` LM tokens. The model class has no
``get_audio_features``, so :meth:`Qwen2Audio.encode` mirrors the audio branch
of ``Qwen2AudioModel.forward``. A clip must give at least two tokens: with one
placeholder per clip the model takes its legacy merge path.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers import (
    Qwen2AudioConfig,
    Qwen2AudioEncoderConfig,
    Qwen2AudioForConditionalGeneration,
    Qwen2Config,
)
from transformers.masking_utils import create_bidirectional_mask

from easerve_core.request import Modality
from live.families import shapes
from live.families.base import MMInput, PlaceholderFamily, check_items, check_size, per_request, randn

MIN_CLIP_TOKENS = 2


def _config(lm: shapes.LMShape, tower: shapes.TowerShape, *, max_source_positions: int,
            audio_token: int) -> Qwen2AudioConfig:
    audio = Qwen2AudioEncoderConfig(
        d_model=tower.hidden, encoder_layers=tower.num_layers,
        encoder_attention_heads=tower.num_heads, encoder_ffn_dim=tower.intermediate,
        num_mel_bins=128, max_source_positions=max_source_positions,
    )
    return Qwen2AudioConfig(audio_config=audio, text_config=Qwen2Config(**shapes.text_config(lm)),
                            audio_token_index=audio_token)


def clip_tokens(frames: int) -> int:
    """LM tokens from a clip of ``frames`` real mel frames."""
    return ((frames - 1) // 2 + 1 - 2) // 2 + 1


@functools.lru_cache(maxsize=64)
def _frames_for(tokens: int, max_frames: int) -> int:
    """The fewest frames giving at least ``tokens`` tokens, capped at ``max_frames``."""
    for frames in range(1, max_frames + 1):
        if clip_tokens(frames) >= tokens:
            return frames
    return max_frames


class Qwen2Audio(PlaceholderFamily):
    """The Qwen2-Audio family (see the module docstring)."""

    model_cls: type = Qwen2AudioForConditionalGeneration
    name = "qwen2-audio"
    modalities = frozenset({Modality.AUDIO})

    def config(self, size: str) -> Qwen2AudioConfig:
        if check_size(size) == "tiny":
            return _config(shapes.TINY_LM, shapes.TINY_TOWER, max_source_positions=100,
                           audio_token=shapes.TINY_VOCAB - 1)
        if size == "small":
            return _config(shapes.SMALL_LM, shapes.SMALL_TOWER, max_source_positions=500,
                           audio_token=shapes.TINY_VOCAB - 1)
        # Qwen2-Audio-7B: Whisper-large-v3 encoder + Qwen-7B LM (docs/live.md: from memory).
        lm = shapes.LMShape(hidden=4096, num_layers=32, num_heads=32, num_kv_heads=32,
                            intermediate=11008, vocab=156032, max_positions=8192)
        tower = shapes.TowerShape(hidden=1280, num_layers=32, num_heads=20, intermediate=5120)
        return _config(lm, tower, max_source_positions=1500, audio_token=151646)

    @staticmethod
    def window_frames(config: Any) -> int:
        return 2 * config.audio_config.max_source_positions

    def make_input(
        self, config: Any, modality: Modality, tokens_per_item: Sequence[int], rng: np.random.Generator
    ) -> MMInput:
        window = self.window_frames(config)
        mels = config.audio_config.num_mel_bins
        items, meta = [], []
        for tokens in tokens_per_item:
            frames = _frames_for(max(MIN_CLIP_TOKENS, tokens), window)
            feats = torch.zeros(mels, window)
            feats[:, :frames] = randn(rng, mels, frames)
            items.append(feats)
            meta.append((frames,))
        return MMInput(modality=modality, items=tuple(items), meta=tuple(meta))

    def validate(self, config: Any, mm: MMInput) -> tuple[int, ...]:
        check_items(mm, self)
        window = self.window_frames(config)
        want = (config.audio_config.num_mel_bins, window)
        tokens = []
        for i, (x, m) in enumerate(zip(mm.items, mm.meta, strict=True)):
            if tuple(x.shape) != want:
                raise ValueError(f"clip {i}: mel tensor shape {tuple(x.shape)}, expected {want}")
            if len(m) != 1 or not 1 <= m[0] <= window:
                raise ValueError(f"clip {i}: meta must be (frames,) in [1, {window}], got {m!r}")
            n = clip_tokens(m[0])
            if n < MIN_CLIP_TOKENS:
                raise ValueError(f"clip {i}: {m[0]} frames give {n} token(s), need >= {MIN_CLIP_TOKENS}")
            tokens.append(n)
        return tuple(tokens)

    def encode(self, model: Any, inputs: Sequence[MMInput]) -> list[list[torch.Tensor]]:
        tower = model.model.audio_tower
        features = torch.stack([t for mm in inputs for t in mm.items])
        frames = torch.tensor([m[0] for mm in inputs for m in mm.meta])
        batch, _, window = features.shape
        positions = (window - 2) // 2 + 1
        feat_len, out_len = tower._get_feat_extract_output_lengths(frames)
        mask2d = (torch.arange(positions)[None] < feat_len[:, None]).long()
        mask = create_bidirectional_mask(
            config=tower.config, inputs_embeds=torch.zeros(batch, positions, 1), attention_mask=mask2d
        )
        hidden = tower(features, attention_mask=mask).last_hidden_state
        projected = model.model.multi_modal_projector(hidden)
        clips = [projected[i, : int(out_len[i])] for i in range(batch)]
        return per_request(clips, inputs)

    def placeholder(self, config: Any) -> int:
        return int(config.audio_token_index)

    def generate_kwargs(self, model: Any, text_ids: Sequence[int], mm: MMInput) -> dict[str, Any]:
        prompt = self.prompt_kwargs(model, text_ids, mm)
        window = self.window_frames(model.config)
        frames = torch.tensor([m[0] for m in mm.meta])
        return {
            **prompt,
            "input_features": torch.stack(mm.items),
            "feature_attention_mask": (torch.arange(window)[None] < frames[:, None]).long(),
        }
