"""Model configs for the importer tests, built in code (no hub) or read from aiconfigurator-core.

The three paper models are written with the numbers their hand-written specs
cite (the published config.json values); the other families are tiny configs
built from ``transformers``' own config classes. Both are spelled through the
same small builders (``_lm``, ``_vit``, ``_qwen_vit``, ``_whisper``) of the
config keys each tower sets.
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


def _lm(*, layers: int, hidden: int, intermediate: int, heads: int, kv_heads: int, vocab: int,
        **extra: Any) -> dict[str, Any]:
    """The LM keys every text config here sets, then ``extra``."""
    return {"num_hidden_layers": layers, "hidden_size": hidden, "intermediate_size": intermediate,
            "num_attention_heads": heads, "num_key_value_heads": kv_heads, "vocab_size": vocab, **extra}


def _vit(*, hidden: int, intermediate: int, layers: int, heads: int, image_size: Any,
         patch_size: Any) -> dict[str, Any]:
    """A ViT (CLIP, SigLIP, InternViT, Idefics3) vision config."""
    return {"hidden_size": hidden, "intermediate_size": intermediate, "num_hidden_layers": layers,
            "num_attention_heads": heads, "image_size": image_size, "patch_size": patch_size}


def _qwen_vit(*, depth: int, hidden: int, intermediate: int, heads: int, out_hidden: int,
              full_attention: list[int], window: int, **extra: Any) -> dict[str, Any]:
    """A Qwen2.5-VL vision config (window attention but in ``full_attention`` blocks)."""
    return {"depth": depth, "hidden_size": hidden, "intermediate_size": intermediate, "num_heads": heads,
            "out_hidden_size": out_hidden, "fullatt_block_indexes": full_attention, "window_size": window,
            **extra}


def _whisper(*, width: int, layers: int, heads: int, ffn: int, **extra: Any) -> dict[str, Any]:
    """A Whisper audio encoder config with 128 mel bins."""
    return {"d_model": width, "encoder_layers": layers, "encoder_attention_heads": heads,
            "encoder_ffn_dim": ffn, "num_mel_bins": 128, **extra}


def llava_v16_34b() -> LlavaNextConfig:
    text = LlamaConfig(**_lm(layers=60, hidden=7168, intermediate=20480, heads=56, kv_heads=8, vocab=64064,
                             tie_word_embeddings=False))
    vision = CLIPVisionConfig(**_vit(hidden=1024, intermediate=4096, layers=24, heads=16, image_size=336,
                                     patch_size=14))
    return LlavaNextConfig(
        text_config=text,
        vision_config=vision,
        dtype="bfloat16",
        image_grid_pinpoints=[[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]],
    )


def qwen25_vl_32b() -> Qwen2_5_VLConfig:
    text = _lm(layers=64, hidden=5120, intermediate=27648, heads=40, kv_heads=8, vocab=152064,
               use_sliding_window=False)
    vision = _qwen_vit(depth=32, hidden=1280, intermediate=3420, heads=16, out_hidden=5120,
                       full_attention=[7, 15, 23, 31], window=112, patch_size=14)
    return Qwen2_5_VLConfig(
        text_config=text, vision_config=vision, dtype="bfloat16", tie_word_embeddings=False
    )


def ultravox_gemma3_27b() -> dict[str, Any]:
    """Ultravox's config as a dict: transformers has no Ultravox class."""
    whisper = WhisperConfig(**_whisper(width=1280, layers=32, heads=20, ffn=5120,
                                       max_source_positions=1500)).to_dict()
    gemma = Gemma3TextConfig(**_lm(layers=62, hidden=5376, intermediate=21504, heads=32, kv_heads=16,
                                   vocab=262208, head_dim=128, sliding_window=1024,
                                   tie_word_embeddings=True)).to_dict()
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
    return _lm(layers=2, hidden=64, intermediate=128, heads=4, kv_heads=2, vocab=512, **kw)


def _tiny_vit(image_size: Any, patch_size: Any) -> dict[str, Any]:
    return _vit(hidden=32, intermediate=64, layers=2, heads=4, image_size=image_size, patch_size=patch_size)


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
            vision_config=_qwen_vit(depth=2, hidden=32, intermediate=64, heads=4, out_hidden=64,
                                    full_attention=[1], window=56),
        ),
        "qwen2_audio": Qwen2AudioConfig(
            text_config=Qwen2Config(**_tiny_llama()),
            audio_config=_whisper(width=32, layers=2, heads=4, ffn=64),
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
