"""Encode-stage modules at published sizes (and tiny twins for the CPU), random weights.

Each encoder is the `transformers` tower class built from a config written
here, plus the projector its LLM uses; :func:`build_encoder` returns an
:class:`EncoderStage` that makes a random input for ``B`` requests and runs
tower + projector on it.

* ``clip-vit-l-336`` (LLaVA-v1.6-34B): ``CLIPVisionModel`` (hidden 1024, 24
  layers, 16 heads, MLP 4096, patch 14, 336 px), features from layer -2
  without CLS, then the mlp2x_gelu projector (1024 -> 7168 -> 7168). One
  request is a 672x672 image: ``crops_per_item`` = 5 CLIP crops.
* ``whisper-large-v3`` (Ultravox v0.6): ``WhisperEncoder`` (d_model 1280, 32
  layers, 20 heads, FFN 5120, 128 mel bins), then Ultravox's projector: stack
  8 frames, RMSNorm, Linear(10240 -> 4096), SwiGLU (-> 2048), RMSNorm,
  Linear(2048 -> 5376). HF's encoder insists on ``2 * max_source_positions``
  mel frames, so ``max_source_positions`` is set to the clip's positions (50
  per second): the unpadded input Ultravox's own encoder accepts.
* ``qwen2.5-vl-vit`` (Qwen2.5-VL-32B): ``Qwen2_5_VisionTransformerPretrainedModel``
  (depth 32, hidden 1280, MLP 3420, 16 heads, window 112, full attention in
  blocks 7/15/23/31, merger out 5120). One request is one temporal patch group
  of ``grid_hw`` patches (default 40x72 = 2,880 patches = 720 LM tokens).

Dimensions: notes/systems.md §3 and calibration/specs/models/*.json. The LM
side is :mod:`live.gpu.realsize_lm`. Version-sensitive spots (H200: 5.17,
here: 5.24): the Qwen vision tower's import path and the type of its output
(a tensor or a ``ModelOutput``; :func:`first_tensor` takes either).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers import CLIPVisionConfig, CLIPVisionModel, WhisperConfig
from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel
from transformers.models.whisper.modeling_whisper import WhisperEncoder

from live.gpu.realsize_lm import SIZES, build_lm, lm_dims

#: model name (as in calibration/specs/models) -> (encoder, LM)
PAIRS: Mapping[str, tuple[str, str]] = {
    "llava-v1.6-34b": ("clip-vit-l-336", "yi-34b"),
    "qwen2.5-vl-32b": ("qwen2.5-vl-vit", "qwen2.5-32b"),
    "ultravox-v0.6-gemma3-27b": ("whisper-large-v3", "gemma-3-27b"),
}
_LM_OF = {enc: lm for enc, lm in PAIRS.values()}

__all__ = ["PAIRS", "SIZES", "EncoderStage", "build_encoder", "build_lm", "first_tensor"]


def first_tensor(out: Any) -> torch.Tensor:
    """The main tensor of a model output (a tensor, a ModelOutput or a tuple)."""
    if isinstance(out, torch.Tensor):
        return out
    for key in ("pooler_output", "last_hidden_state"):
        value = getattr(out, key, None)
        if isinstance(value, torch.Tensor):
            return value
    return out[0]


class LlavaProjector(nn.Module):
    """LLaVA's mlp2x_gelu: Linear -> GELU -> Linear."""

    def __init__(self, vision_hidden: int, lm_hidden: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(vision_hidden, lm_hidden), nn.GELU(),
                                 nn.Linear(lm_hidden, lm_hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class UltravoxProjector(nn.Module):
    """Stack ``stack`` frames, RMSNorm, Linear, SwiGLU (halves the width), RMSNorm, Linear."""

    def __init__(self, audio_hidden: int, lm_hidden: int, *, stack: int = 8, hidden: int = 4096) -> None:
        super().__init__()
        self.stack = stack
        self.norm_in = nn.RMSNorm(audio_hidden * stack)
        self.up = nn.Linear(audio_hidden * stack, hidden, bias=False)
        self.norm_mid = nn.RMSNorm(hidden // 2)
        self.down = nn.Linear(hidden // 2, lm_hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        pad = (-t) % self.stack
        if pad:
            x = torch.cat([x, x.new_zeros(b, pad, d)], dim=1)
        x = self.up(self.norm_in(x.reshape(b, (t + pad) // self.stack, d * self.stack)))
        value, gate = x.chunk(2, dim=-1)
        return self.down(self.norm_mid(nn.functional.silu(gate) * value))


@dataclass(frozen=True, slots=True, kw_only=True)
class EncoderStage:
    """Tower + projector and how to feed it; ``run`` returns ``(B, tokens, lm_hidden)``-like output."""

    name: str
    tower: nn.Module
    projector: nn.Module
    lm_tokens_per_item: int
    positions_per_item: int
    _make: Callable[[int, torch.device, torch.dtype], dict[str, torch.Tensor]] = field(repr=False)
    _run: Callable[[EncoderStage, dict[str, torch.Tensor]], torch.Tensor] = field(repr=False)

    def make_inputs(self, batch_size: int) -> dict[str, torch.Tensor]:
        """Random inputs for ``batch_size`` requests, on the tower's device and dtype."""
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        p = next(self.tower.parameters())
        return self._make(batch_size, p.device, p.dtype)

    @torch.no_grad()
    def run(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self._run(self, inputs)


def _clip(size: str, lm_hidden: int, crops_per_item: int = 5) -> dict[str, Any]:
    full = size == "full"
    cfg = CLIPVisionConfig(
        hidden_size=1024 if full else 32, intermediate_size=4096 if full else 64,
        num_hidden_layers=24 if full else 2, num_attention_heads=16 if full else 2,
        image_size=336 if full else 28, patch_size=14, hidden_act="quick_gelu")
    side = cfg.image_size

    def make(b: int, device: torch.device, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        return {"pixel_values": torch.randn(b * crops_per_item, 3, side, side, device=device, dtype=dtype)}

    def run(stage: EncoderStage, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        hidden = stage.tower(pixel_values=inputs["pixel_values"], output_hidden_states=True).hidden_states
        return stage.projector(hidden[-2][:, 1:])

    patches = (side // 14) ** 2
    return dict(tower=CLIPVisionModel(cfg), projector=LlavaProjector(cfg.hidden_size, lm_hidden),
                positions_per_item=crops_per_item * (patches + 1),
                lm_tokens_per_item=crops_per_item * patches, _make=make, _run=run)


def _whisper(size: str, lm_hidden: int, audio_s: float = 10.0) -> dict[str, Any]:
    full = size == "full"
    positions = max(1, round(50 * audio_s)) if full else 16
    cfg = WhisperConfig(
        d_model=1280 if full else 32, encoder_layers=32 if full else 2,
        encoder_attention_heads=20 if full else 2, encoder_ffn_dim=5120 if full else 64,
        num_mel_bins=128 if full else 8, max_source_positions=positions,
        decoder_layers=1, decoder_attention_heads=2 if not full else 20, decoder_ffn_dim=64)

    def make(b: int, device: torch.device, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        return {"input_features": torch.randn(b, cfg.num_mel_bins, 2 * positions, device=device, dtype=dtype)}

    def run(stage: EncoderStage, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return stage.projector(first_tensor(stage.tower(input_features=inputs["input_features"])))

    return dict(tower=WhisperEncoder(cfg), projector=UltravoxProjector(cfg.d_model, lm_hidden,
                                                                      hidden=4096 if full else 64),
                positions_per_item=positions, lm_tokens_per_item=-(-positions // 8), _make=make, _run=run)


def _qwen_vit(size: str, lm_hidden: int, grid_hw: tuple[int, int] = (40, 72)) -> dict[str, Any]:
    full = size == "full"
    h, w = grid_hw if full else (8, 8)
    cfg = Qwen2_5_VLVisionConfig(
        depth=32 if full else 2, hidden_size=1280 if full else 32, intermediate_size=3420 if full else 64,
        num_heads=16 if full else 2, patch_size=14, spatial_merge_size=2, temporal_patch_size=2,
        window_size=112 if full else 56, out_hidden_size=lm_hidden,
        fullatt_block_indexes=[7, 15, 23, 31] if full else [1])
    patch_dim = cfg.in_channels * cfg.temporal_patch_size * cfg.patch_size**2

    def make(b: int, device: torch.device, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        return {"hidden_states": torch.randn(b * h * w, patch_dim, device=device, dtype=dtype),
                "grid_thw": torch.tensor([[1, h, w]] * b, device=device, dtype=torch.long)}

    def run(stage: EncoderStage, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return first_tensor(stage.tower(hidden_states=inputs["hidden_states"], grid_thw=inputs["grid_thw"]))

    return dict(tower=Qwen2_5_VisionTransformerPretrainedModel(cfg), projector=nn.Identity(),
                positions_per_item=h * w, lm_tokens_per_item=h * w // 4, _make=make, _run=run)


_BUILDERS: Mapping[str, Callable[..., dict[str, Any]]] = {
    "clip-vit-l-336": _clip, "whisper-large-v3": _whisper, "qwen2.5-vl-vit": _qwen_vit,
}


def build_encoder(name: str, *, size: str = "tiny", device: str | torch.device = "cpu",
                  dtype: torch.dtype = torch.float32, seed: int = 0, **item: Any) -> EncoderStage:
    """Build encoder ``name`` (tower + projector) with random weights.

    ``item`` sets the request shape: ``crops_per_item`` (CLIP), ``audio_s``
    (Whisper), ``grid_hw`` (Qwen ViT); tiny sizes use fixed small items.
    """
    if name not in _BUILDERS:
        raise ValueError(f"unknown encoder {name!r}; known: {', '.join(sorted(_BUILDERS))}")
    lm_hidden = lm_dims(_LM_OF[name], size).hidden
    torch.manual_seed(seed)
    with torch.device(device):
        parts = _BUILDERS[name](size, lm_hidden, **item)
    parts["tower"] = parts["tower"].to(dtype).eval()
    parts["projector"] = parts["projector"].to(dtype).eval()
    return EncoderStage(name=name, **parts)
