"""Model configs for the importer tests, built in code (no hub) or read from aiconfigurator-core.

The three paper models are written with the numbers their hand-written specs
cite (the published config.json values); the other families are tiny configs
built from ``transformers``' own config classes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformers import (
    CLIPVisionConfig,
    Gemma3TextConfig,
    Idefics3Config,
    InternVLConfig,
    LlamaConfig,
    LlavaNextConfig,
    LlavaOnevisionConfig,
    Qwen2_5_VLConfig,
    Qwen2AudioConfig,
    Qwen2Config,
    WhisperConfig,
)

AIC_CONFIGS = (
    "Qwen--Qwen3-VL-2B-Instruct",
    "Qwen--Qwen3-VL-4B-Instruct",
    "Qwen--Qwen3-VL-8B-Instruct",
    "Qwen--Qwen3-VL-32B-Instruct",
    "Qwen--Qwen3-VL-30B-A3B-Instruct",
    "Qwen--Qwen3-VL-235B-A22B-Instruct",
    "meta-llama--Llama-4-Scout-17B-16E-Instruct",
    "meta-llama--Llama-4-Maverick-17B-128E-Instruct",
    "google--gemma-4-26B-A4B",
    "nvidia--Gemma-4-31B-IT-NVFP4",
)


#: preprocessor_config.json of a paper model, with the values its hand-written spec cites
PAPER_PREPROCESSORS: dict[str, dict[str, Any]] = {
    "qwen2.5-vl-32b": {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14,
                       "temporal_patch_size": 2, "merge_size": 2},
}


def aic_config(name: str) -> Path:
    """A config.json shipped in the installed aiconfigurator-core (read in place, never copied)."""
    import aiconfigurator_core

    return Path(aiconfigurator_core.__file__).parent / "model_configs" / f"{name}_config.json"


def write(folder: Path, config: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = config if isinstance(config, dict) else config.to_dict()
    (folder / "config.json").write_text(json.dumps(data))
    return folder


def llava_v16_34b() -> LlavaNextConfig:
    text = LlamaConfig(
        num_hidden_layers=60,
        hidden_size=7168,
        intermediate_size=20480,
        num_attention_heads=56,
        num_key_value_heads=8,
        vocab_size=64064,
        tie_word_embeddings=False,
    )
    vision = CLIPVisionConfig(
        hidden_size=1024,
        intermediate_size=4096,
        num_hidden_layers=24,
        num_attention_heads=16,
        image_size=336,
        patch_size=14,
    )
    return LlavaNextConfig(
        text_config=text,
        vision_config=vision,
        dtype="bfloat16",
        image_grid_pinpoints=[[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]],
    )


def qwen25_vl_32b() -> Qwen2_5_VLConfig:
    text = {
        "num_hidden_layers": 64,
        "hidden_size": 5120,
        "intermediate_size": 27648,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "vocab_size": 152064,
        "use_sliding_window": False,
    }
    vision = {
        "depth": 32,
        "hidden_size": 1280,
        "intermediate_size": 3420,
        "num_heads": 16,
        "out_hidden_size": 5120,
        "fullatt_block_indexes": [7, 15, 23, 31],
        "window_size": 112,
        "patch_size": 14,
    }
    return Qwen2_5_VLConfig(
        text_config=text, vision_config=vision, dtype="bfloat16", tie_word_embeddings=False
    )


def ultravox_gemma3_27b() -> dict[str, Any]:
    """Ultravox's config as a dict: transformers has no Ultravox class."""
    whisper = WhisperConfig(
        d_model=1280,
        encoder_layers=32,
        encoder_attention_heads=20,
        encoder_ffn_dim=5120,
        num_mel_bins=128,
        max_source_positions=1500,
    ).to_dict()
    gemma = Gemma3TextConfig(
        num_hidden_layers=62,
        hidden_size=5376,
        intermediate_size=21504,
        num_attention_heads=32,
        num_key_value_heads=16,
        head_dim=128,
        vocab_size=262208,
        sliding_window=1024,
        tie_word_embeddings=True,
    ).to_dict()
    return {
        "model_type": "ultravox",
        "stack_factor": 8,
        "hidden_size": 4096,
        "projector_act": "swiglu",
        "audio_config": whisper,
        "text_config": gemma,
        "torch_dtype": "bfloat16",
    }


def _tiny_llama(**kw: Any) -> dict[str, Any]:
    return {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 512,
        **kw,
    }


def _tiny_vit(image_size: Any, patch_size: Any) -> dict[str, Any]:
    return {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "image_size": image_size,
        "patch_size": patch_size,
    }


def tiny_configs() -> dict[str, Any]:
    """family -> a tiny config built in code."""
    clip = CLIPVisionConfig(**_tiny_vit(32, 8))
    return {
        "llava_next": LlavaNextConfig(
            text_config=LlamaConfig(**_tiny_llama()),
            vision_config=clip,
            image_grid_pinpoints=[[32, 64], [64, 32], [64, 64]],
        ),
        "llava_onevision": LlavaOnevisionConfig(
            text_config=Qwen2Config(**_tiny_llama()),
            vision_config={"model_type": "siglip_vision_model", **_tiny_vit(28, 14)},
            image_grid_pinpoints=[[28, 28], [28, 56], [56, 56]],
        ),
        "qwen2_5_vl": Qwen2_5_VLConfig(
            text_config=_tiny_llama(),
            vision_config={
                "depth": 2,
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_heads": 4,
                "out_hidden_size": 64,
                "fullatt_block_indexes": [1],
                "window_size": 56,
            },
        ),
        "qwen2_audio": Qwen2AudioConfig(
            text_config=Qwen2Config(**_tiny_llama()),
            audio_config={
                "d_model": 32,
                "encoder_layers": 2,
                "encoder_attention_heads": 4,
                "encoder_ffn_dim": 64,
                "num_mel_bins": 128,
            },
        ),
        "internvl": InternVLConfig(
            text_config=Qwen2Config(**_tiny_llama()),
            vision_config=_tiny_vit([56, 56], [14, 14]),
        ),
        "idefics3": Idefics3Config(
            text_config=LlamaConfig(**_tiny_llama()),
            vision_config=_tiny_vit(56, 14),
        ),
        "mqa_sliding_llama": LlavaNextConfig(
            text_config={"model_type": "mistral", **_tiny_llama(num_key_value_heads=1), "sliding_window": 16},
            vision_config=clip,
            image_grid_pinpoints=[[32, 64]],
        ),
    }
