"""Regenerate the imported example specs that are built in code (configs/specs/models/).

Each model below is a ``transformers`` config object: the class's defaults where they
are the model's shape (said so), else the class with the model's published dimensions
typed in as numbers (the hub id whose ``config.json`` carries them is named; no real
``config.json`` is read or copied). Each is written to a temporary ``NAME/config.json``
and imported with ``easerve model import`` (``--name``, ``--hf-id``); the spec's
``imported_from.file`` is then set to the builder that made it, so the output does not
depend on the temporary folder. The examples that read aiconfigurator-core's bundled
configs (Qwen3-VL, Llama-4, Gemma-4; :data:`AIC_EXAMPLES`) are imported from the installed
package's file in place, their ``imported_from.file`` written relative to site-packages
(Qwen3-VL's, whose processor files the bundle lacks, beside the bounds its checkpoints ship:
:data:`QWEN3_VL_PROCESSOR`).

Run: ``PYTHONPATH=. .venv/bin/python bench/import_examples.py [--out DIR] [--check]``
(``--out`` defaults to ``easerve/configs/specs/models``; ``--check`` writes nothing and
exits 1 when a shipped spec differs from its rebuild).

The script stays a little past 300 lines because it is one list of the sixteen shipped
examples, each builder a page of typed-in dimensions with its source beside it; split up,
a reader checking one spec against its hub id would look in several files.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SPECS = ROOT / "easerve" / "configs" / "specs" / "models"


@dataclass(frozen=True)
class Example:
    name: str  # spec name and file stem
    hf_id: str  # the checkpoint whose shape this is
    family: str  # model_type
    build: Callable[[], Any]  # -> a transformers config (or a dict for Ultravox)


def _llama2_13b() -> dict[str, Any]:
    # Llama-2-13B / Vicuna-13B-v1.5 (LLaVA-v1.6-Vicuna-13B's LM): published config.json values.
    return {"model_type": "llama", "hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 40,
            "num_attention_heads": 40, "num_key_value_heads": 40, "vocab_size": 32000,
            "tie_word_embeddings": False}


def _qwen2_7b(vocab: int = 152064) -> dict[str, Any]:
    # Qwen2-7B / Qwen2.5-7B (the LM of Qwen2-VL-7B, Qwen2.5-VL-7B, LLaVA-OneVision-7B, InternVL3-8B).
    return {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
            "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": vocab,
            "tie_word_embeddings": False}


def _llama31_8b(vocab: int = 128256) -> dict[str, Any]:
    # Llama-3-8B / Llama-3.1-8B (Idefics3-8B-Llama3's and Ultravox v0.5 8B's LM).
    return {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": vocab,
            "tie_word_embeddings": False}


def _siglip_so400m(image_size: int, model_type: str = "siglip_vision_model") -> dict[str, Any]:
    # SigLIP so400m/14 (Idefics3, SmolVLM2, Gemma-3): 27 layers of width 1152.
    return {"model_type": model_type, "hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
            "num_attention_heads": 16, "image_size": image_size, "patch_size": 14}


def llava15_7b() -> Any:
    """LLaVA-1.5-7B: ``LlavaConfig()`` at its defaults (CLIP ViT-L/14-336 + LlamaConfig's 7B;
    the checkpoint's vocabulary is 32,064, the default 32,000)."""
    from transformers import LlavaConfig

    return LlavaConfig(dtype="bfloat16")


def llava16_13b() -> Any:
    """LLaVA-v1.6-Vicuna-13B: ``LlavaNextConfig`` at its defaults (CLIP ViT-L/14-336, the five
    anyres grids of v1.6) with the 13B LM (llava-hf/llava-v1.6-vicuna-13b-hf)."""
    from transformers import LlavaNextConfig

    return LlavaNextConfig(text_config=_llama2_13b(), dtype="bfloat16")


def llava_onevision_7b() -> Any:
    """LLaVA-OneVision-Qwen2-7B: ``LlavaOnevisionConfig`` at its defaults (SigLIP so400m/14-384 at
    26 layers, the 6x6 anyres grids) with Qwen2-7B as the LM (llava-hf/llava-onevision-qwen2-7b-ov-hf)."""
    from transformers import LlavaOnevisionConfig

    return LlavaOnevisionConfig(text_config={"model_type": "qwen2", **_qwen2_7b()}, dtype="bfloat16")


def qwen2_vl_7b() -> Any:
    """Qwen2-VL-7B-Instruct: ``Qwen2VLConfig``'s default vision tower (675 M ViT, out width 3584)
    with the 7B LM (Qwen/Qwen2-VL-7B-Instruct); the class's default LM is the 72B."""
    from transformers import Qwen2VLConfig

    return Qwen2VLConfig(text_config=_qwen2_7b(), vision_config={"hidden_size": 3584}, dtype="bfloat16",
                         tie_word_embeddings=False)


def qwen25_vl_7b() -> Any:
    """Qwen2.5-VL-7B-Instruct (Qwen/Qwen2.5-VL-7B-Instruct): windowed ViT of 32 layers, full
    attention at blocks 7/15/23/31, window 112 px, merger out width 3584; the 7B LM."""
    from transformers import Qwen2_5_VLConfig

    vision = {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
              "out_hidden_size": 3584, "fullatt_block_indexes": [7, 15, 23, 31], "window_size": 112,
              "patch_size": 14}
    return Qwen2_5_VLConfig(text_config=_qwen2_7b(), vision_config=vision, dtype="bfloat16",
                            tie_word_embeddings=False)


def qwen2_audio_7b() -> Any:
    """Qwen2-Audio-7B-Instruct: ``Qwen2AudioConfig``'s default audio encoder (Whisper-large-v3's:
    32 layers, d_model 1280, 128 mel bins) and its LM as Qwen/Qwen2-Audio-7B-Instruct's config
    gives it (Qwen2Config defaults with intermediate_size 11008 and vocab_size 156032)."""
    from transformers import Qwen2AudioConfig

    return Qwen2AudioConfig(text_config={"model_type": "qwen2", "intermediate_size": 11008,
                                         "vocab_size": 156032}, dtype="bfloat16")


def internvl3_8b() -> Any:
    """InternVL3-8B: ``InternVLConfig``'s default tower (InternViT-300M-448px: 24 layers, width 1024)
    with Qwen2.5-7B as the LM (OpenGVLab/InternVL3-8B-hf; vocabulary 151,674)."""
    from transformers import InternVLConfig

    return InternVLConfig(text_config={"model_type": "qwen2", **_qwen2_7b(vocab=151674)}, dtype="bfloat16",
                          tie_word_embeddings=False)


def idefics3_8b() -> Any:
    """Idefics3-8B-Llama3 (HuggingFaceM4/Idefics3-8B-Llama3): SigLIP so400m at 364 px tiles,
    scale factor 2 (169 tokens a tile), Llama-3-8B with 3 added tokens (vocabulary 128,259)."""
    from transformers import Idefics3Config

    return Idefics3Config(text_config=_llama31_8b(vocab=128259),
                          vision_config=_siglip_so400m(364, "idefics3_vision"), scale_factor=2,
                          dtype="bfloat16", tie_word_embeddings=False)


def smolvlm2_2b() -> Any:
    """SmolVLM2-2.2B-Instruct (HuggingFaceTB/SmolVLM2-2.2B-Instruct): SigLIP so400m at 384 px tiles,
    scale factor 3 (81 tokens a tile), SmolLM2-1.7B (24 layers, width 2048, vocabulary 49,280)."""
    from transformers import SmolVLMConfig

    text = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 24,
            "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 49280,
            "tie_word_embeddings": False}
    return SmolVLMConfig(text_config=text, vision_config=_siglip_so400m(384, "smolvlm_vision"),
                         scale_factor=3, dtype="bfloat16", tie_word_embeddings=False)


def gemma3_27b() -> Any:
    """Gemma-3-27B-it (google/gemma-3-27b-it): SigLIP so400m at 896 px pooled to 256 tokens; 62
    layers of width 5376, 5 sliding (1,024 tokens) to 1 global; the numbers the hand-written
    Ultravox v0.6 spec cites for the same LM."""
    from transformers import Gemma3Config

    text = {"num_hidden_layers": 62, "hidden_size": 5376, "intermediate_size": 21504,
            "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128, "vocab_size": 262208,
            "sliding_window": 1024, "query_pre_attn_scalar": 168}
    return Gemma3Config(text_config=text, vision_config=_siglip_so400m(896), mm_tokens_per_image=256,
                        dtype="bfloat16")


def ultravox_8b() -> dict[str, Any]:
    """Ultravox v0.5 Llama-3.1-8B (fixie-ai/ultravox-v0_5-llama-3_1-8b): Whisper-large-v3-turbo's
    encoder (32 layers, d_model 1280), stack factor 8, Llama-3.1-8B. A dict: transformers has no
    Ultravox class."""
    from transformers import LlamaConfig, WhisperConfig

    whisper = WhisperConfig(d_model=1280, encoder_layers=32, encoder_attention_heads=20, encoder_ffn_dim=5120,
                            num_mel_bins=128, max_source_positions=1500).to_dict()
    return {"model_type": "ultravox", "stack_factor": 8, "hidden_size": 4096, "projector_act": "swiglu",
            "audio_config": whisper, "text_config": LlamaConfig(**_llama31_8b()).to_dict(),
            "torch_dtype": "bfloat16"}


EXAMPLES: tuple[Example, ...] = (
    Example("llava-1.5-7b", "llava-hf/llava-1.5-7b-hf", "llava", llava15_7b),
    Example("llava-v1.6-vicuna-13b", "llava-hf/llava-v1.6-vicuna-13b-hf", "llava_next", llava16_13b),
    Example("llava-onevision-qwen2-7b", "llava-hf/llava-onevision-qwen2-7b-ov-hf", "llava_onevision",
            llava_onevision_7b),
    Example("qwen2-vl-7b", "Qwen/Qwen2-VL-7B-Instruct", "qwen2_vl", qwen2_vl_7b),
    Example("qwen2.5-vl-7b", "Qwen/Qwen2.5-VL-7B-Instruct", "qwen2_5_vl", qwen25_vl_7b),
    Example("qwen2-audio-7b", "Qwen/Qwen2-Audio-7B-Instruct", "qwen2_audio", qwen2_audio_7b),
    Example("internvl3-8b", "OpenGVLab/InternVL3-8B-hf", "internvl", internvl3_8b),
    Example("idefics3-8b", "HuggingFaceM4/Idefics3-8B-Llama3", "idefics3", idefics3_8b),
    Example("smolvlm2-2.2b", "HuggingFaceTB/SmolVLM2-2.2B-Instruct", "smolvlm", smolvlm2_2b),
    Example("gemma-3-27b", "google/gemma-3-27b-it", "gemma3", gemma3_27b),
    Example("ultravox-v0.5-llama-3.1-8b", "fixie-ai/ultravox-v0_5-llama-3_1-8b", "ultravox", ultravox_8b),
)


@dataclass(frozen=True)
class AicExample:
    name: str  # spec name and file stem
    hf_id: str  # the checkpoint aiconfigurator-core's bundled config.json is of
    modality: str  # the items its requests carry
    # processor files the bundle lacks, as the checkpoint ships them (only the keys the import
    # reads, typed in as numbers), written beside its config.json for the import
    processor_files: Mapping[str, Mapping[str, object]] = field(default_factory=dict)


#: Qwen3-VL's processor bounds as its checkpoints ship them (preprocessor_config.json and
#: video_preprocessor_config.json `size`; e.g. huggingface.co/Qwen/Qwen3-VL-235B-A22B-Instruct,
#: the files QwenLM/Qwen3-VL issue #1868 points to; transformers issue #41955 observes the
#: 16,777,216 px image bound). aiconfigurator-core bundles config.json only, and without them the
#: import falls back to the processor classes' defaults: a 1920x1080 image 943 LM tokens, not 2,040
QWEN3_VL_PROCESSOR: Mapping[str, Mapping[str, object]] = {
    "preprocessor_config.json": {"size": {"shortest_edge": 65_536, "longest_edge": 16_777_216}},
    "video_preprocessor_config.json": {"size": {"shortest_edge": 4_096, "longest_edge": 25_165_824}},
}

#: aiconfigurator-core's bundled configs, read in place (the `measured` extra installs them)
AIC_EXAMPLES: tuple[AicExample, ...] = (
    AicExample("qwen3-vl-8b", "Qwen/Qwen3-VL-8B-Instruct", "image", QWEN3_VL_PROCESSOR),
    AicExample("qwen3-vl-32b", "Qwen/Qwen3-VL-32B-Instruct", "image", QWEN3_VL_PROCESSOR),
    AicExample("qwen3-vl-30b-a3b", "Qwen/Qwen3-VL-30B-A3B-Instruct", "image", QWEN3_VL_PROCESSOR),
    AicExample("llama-4-scout", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "image"),
    AicExample("gemma-4-26b-a4b", "google/gemma-4-26B-A4B", "image"),
)


def build_aic(example: AicExample, out: Path, work: Path) -> Path:
    """Import ``example``'s bundled aiconfigurator-core config into ``out/NAME.json``."""
    import aiconfigurator_core

    package = Path(aiconfigurator_core.__file__).parent
    source = package / "model_configs" / f"{example.hf_id.replace('/', '--')}_config.json"
    work.mkdir(parents=True, exist_ok=True)
    origin = f"<site-packages>/{source.relative_to(package.parent).as_posix()}"
    if example.processor_files:  # the bundled config in a folder of its own, beside the typed-in files
        folder = work / example.name
        folder.mkdir()
        (folder / source.name).write_text(source.read_text())  # its name, which the spec's sources cite
        for file, data in example.processor_files.items():
            (folder / file).write_text(json.dumps(data))
        source = folder / source.name
        origin += (f"; {' and '.join(example.processor_files)} as {example.hf_id} ships them, typed in "
                   "(bench/import_examples.py AIC_EXAMPLES)")
    return _import(source, example.name, example.hf_id, out, work, ["--modality", example.modality],
                   origin=origin)


def build(example: Example, out: Path, work: Path) -> Path:
    """Import ``example`` with ``easerve model import`` into ``out/NAME.json``."""
    config = example.build()
    data = config if isinstance(config, dict) else config.to_dict()
    assert data["model_type"] == example.family, (example.name, data["model_type"])
    for table in (data, *(v for v in data.values() if isinstance(v, dict))):
        # a class default, not the checkpoint's context: a spec built here says none (no cap)
        table.pop("max_position_embeddings", None)
    folder = work / example.name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(data, indent=1))
    return _import(folder, example.name, example.hf_id, out, work, [],
                   origin=f"built in code: bench/import_examples.py {example.build.__name__}()")


def _import(source: Path, name: str, hf_id: str, out: Path, work: Path, flags: list[str], *,
            origin: str) -> Path:
    """``easerve model import`` of ``source`` into ``out/NAME.json``, ``imported_from.file`` set to
    ``origin`` (so the spec does not name a temporary folder or this machine's site-packages)."""
    from easerve.cli import main
    from easerve.cli.model_cmd import write_json

    spec_file = work / f"{name}.json"
    argv = ["model", "import", str(source), "--name", name, "--hf-id", hf_id, *flags, "--out", str(spec_file)]
    if main(argv) != 0:
        raise SystemExit(f"easerve model import failed for {name}")
    spec = json.loads(spec_file.read_text())
    spec["imported_from"]["file"] = origin
    target = out / f"{name}.json"
    if target.exists():
        target.unlink()  # write_json refuses to overwrite a file
    write_json(target, spec)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=SPECS, help="folder for NAME.json (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="rebuild in a temporary folder and compare")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        out = work / "out" if args.check else args.out
        out.mkdir(parents=True, exist_ok=True)
        differ = []
        builds = [lambda e=e: build(e, out, work / "build") for e in EXAMPLES]
        builds += [lambda e=e: build_aic(e, out, work / "aic") for e in AIC_EXAMPLES]
        for make in builds:
            built = make()
            shipped = args.out / built.name
            if args.check and (not shipped.is_file() or built.read_text() != shipped.read_text()):
                differ.append(built.name)
    if differ:
        print(f"differ from the rebuild: {', '.join(differ)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
