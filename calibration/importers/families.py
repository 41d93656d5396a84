"""The one table of importable families: ``model_type`` -> where its LM and tower live.

Each :class:`Family` names its text sub-config, its tower sub-config and the
tower function (:mod:`calibration.importers.towers`), and the modalities it
serves (the first is the default). :data:`REFUSED` lists model types easerve
cannot serve, each with the one-line reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from calibration.importers import tower_parts, towers, towers_audio, towers_tiled
from calibration.importers._read import Keys, value

TowerFn = Callable[[Keys, Keys, int, Mapping[str, Any], str], tower_parts.Tower]


@dataclass(frozen=True, slots=True)
class Family:
    what: str
    tower_key: str
    build: TowerFn
    modalities: tuple[str, ...] = ("image",)
    text_key: str = "text_config"


def _clip(siglip: bool, anyres: bool) -> TowerFn:
    return lambda t, top, h, pre, m: towers.clip_anyres(t, top, h, siglip=siglip, anyres=anyres)


def _qwen(version: int) -> TowerFn:
    return lambda t, top, h, pre, m: towers.qwen_vl(t, top, h, pre, m, version=version)


def _whisper(stacked: bool) -> TowerFn:
    return lambda t, top, h, pre, m: towers_audio.whisper(
        t, top, h, stack=value(top.get("stack_factor", default=8, least=1)) if stacked else None
    )


#: model_type -> family
FAMILIES: dict[str, Family] = {
    "llava": Family("LLaVA (CLIP, one view)", "vision_config", _clip(False, False)),
    "llava_next": Family("LLaVA-NeXT (CLIP anyres)", "vision_config", _clip(False, True)),
    "llava_onevision": Family("LLaVA-OneVision (SigLIP anyres)", "vision_config", _clip(True, True),
                              ("image", "video")),
    "gemma3": Family(
        "Gemma-3 (SigLIP, 256 tokens per image)",
        "vision_config",
        lambda t, top, h, pre, m: towers.siglip_fixed(t, top, h),
    ),
    "qwen2_vl": Family("Qwen2-VL", "vision_config", _qwen(2), ("image", "video")),
    "qwen2_5_vl": Family("Qwen2.5-VL (windowed ViT)", "vision_config", _qwen(25), ("image", "video")),
    "qwen3_vl": Family("Qwen3-VL (deepstack)", "vision_config", _qwen(3), ("image", "video")),
    "qwen3_vl_moe": Family("Qwen3-VL MoE (deepstack)", "vision_config", _qwen(3), ("image", "video")),
    "internvl": Family(
        "InternVL (InternViT tiles)",
        "vision_config",
        lambda t, top, h, pre, m: towers_tiled.internvit(t, top, h, pre),
    ),
    "idefics3": Family(
        "Idefics3 (SigLIP tiles)", "vision_config",
        lambda t, top, h, pre, m: towers_tiled.idefics3(t, top, h, pre)
    ),
    "smolvlm": Family(
        "SmolVLM (SigLIP tiles)", "vision_config",
        lambda t, top, h, pre, m: towers_tiled.idefics3(t, top, h, pre)
    ),
    "qwen2_audio": Family("Qwen2-Audio (Whisper encoder)", "audio_config", _whisper(False), ("audio",)),
    "ultravox": Family(
        "Ultravox (Whisper encoder, stacked frames)", "audio_config", _whisper(True), ("audio",)
    ),
    "gemma4": Family(
        "Gemma-4 (pooled ViT, fixed token budget)",
        "vision_config",
        lambda t, top, h, pre, m: towers_tiled.fixed_pooled(
            t,
            top,
            h,
            tokens_key="vision_soft_tokens_per_image",
            kernel_key="pooling_kernel_size",
            what="Gemma-4 vision",
        ),
    ),
    "llama4": Family(
        "Llama-4 (tiled ViT)", "vision_config",
        lambda t, top, h, pre, m: towers_tiled.llama4_vision(t, top, h)
    ),
}

#: model_type -> why easerve refuses it
REFUSED: dict[str, str] = {
    "mllama": "Llama-3.2-Vision feeds the image through cross-attention layers inside the LM; easerve models "
    "encoders whose tokens enter the LM's sequence, so it cannot price it",
    "idefics": "Idefics (v1) uses gated cross-attention; easerve models encoders whose tokens enter the LM",
    "internvl_chat": "remote-code InternVL config; convert it to the transformers 'internvl' format "
    "(e.g. an -hf checkpoint's config.json)",
}
