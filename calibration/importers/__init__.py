"""``easerve model import``: a model spec from a ``transformers`` config.json.

:func:`import_model` reads a model folder (or its ``config.json``) with
``transformers.AutoConfig`` (``local_files_only``) and the processor's
``preprocessor_config.json`` and ``video_preprocessor_config.json`` when
present, looks the ``model_type`` up in the one table
:data:`~calibration.importers.families.FAMILIES`, and returns the spec as
marked JSON (V read from the file, naming the key; D derived, with the
arithmetic; G guessed). What the cost model has no rule for is listed under the
spec's ``unmodelled``. The result is checked by building the
:class:`~calibration.specs.ModelSpec` before anything is written.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from calibration.importers._read import (
    PROCESSOR_INT_KEYS,
    Keys,
    check_ints,
    guess,
    library_reason,
    read_config_file,
    read_json_object,
    value,
)
from calibration.importers.families import FAMILIES, REFUSED, Family
from calibration.importers.lm import lm_block
from calibration.importers.towers import VIDEO_PREPROCESSOR
from calibration.specs import ModelSpec, strip_marks

MARKS = "V = read in the cited source; D = derived from V facts (arithmetic in 'source'); G = guess, re-check"
__all__ = ["FAMILIES", "REFUSED", "import_model"]


def _processor_file(file: Path) -> dict[str, Any]:
    """A processor's settings file ({} when absent), its counts checked (a bad one named)."""
    if not file.is_file():
        return {}
    raw = read_json_object(file)
    check_ints(raw, "", file, PROCESSOR_INT_KEYS)
    return raw


def known_types() -> list[str]:
    return sorted(FAMILIES)


def _family(raw: Mapping[str, Any], file: Path) -> tuple[str, Family]:
    model_type = raw.get("model_type")
    if model_type is None:
        raise ValueError(f"{file}: missing required key model_type")
    if not isinstance(model_type, str):
        raise ValueError(f"{file}: model_type must be a string, got {model_type!r}")
    if model_type in REFUSED:
        raise ValueError(f"{file}: model_type {model_type!r} is refused: {REFUSED[model_type]}")
    if model_type not in FAMILIES:
        raise ValueError(f"{file}: unknown model_type {model_type!r}; known: {', '.join(known_types())}")
    return str(model_type), FAMILIES[model_type]


def _transformers_config(file: Path, raw: Mapping[str, Any], model_type: str) -> Any:
    """transformers' config object (its defaults fill absent keys); None for types it lacks."""
    from transformers import CONFIG_MAPPING, AutoConfig  # heavy: only when importing

    if model_type not in CONFIG_MAPPING:
        return None
    try:
        with warnings.catch_warnings(), quiet_transformers():
            warnings.simplefilter("ignore")
            return AutoConfig.from_pretrained(str(file), local_files_only=True)
    except Exception as exc:  # transformers' own validation: report it as bad input
        raise ValueError(f"{file}: transformers cannot read it: {library_reason(exc)}") from None


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' own notices off while it reads a config (a token id outside the vocabulary, a
    rope type it has no check for): the import reads the shapes only, and its logger writes to the
    terminal past easerve's one-line errors."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _sub_without_class(keys: Keys, name: str) -> Keys:
    """A sub-config of a type transformers lacks (Ultravox): build it from its own model_type."""
    from transformers import CONFIG_MAPPING

    sub = keys.sub(name)
    sub_type = sub.raw.get("model_type")
    known = isinstance(sub_type, str) and sub_type in CONFIG_MAPPING
    try:
        with quiet_transformers():
            obj = CONFIG_MAPPING[sub_type](**sub.raw) if known else None
    except Exception as exc:  # transformers' own validation, as in _transformers_config
        reason = library_reason(exc)
        raise ValueError(f"{keys.file}: transformers cannot read {sub.where}: {reason}") from None
    if obj is not None and sub.raw.get("text_config") is not None and name == "text_config":
        return Keys(sub.raw["text_config"], obj.get_text_config(), f"{name}.text_config", keys.file)
    return Keys(sub.raw, obj, sub.where, keys.file)


def import_model(
    path: str | Path, *, name: str | None = None, hf_id: str | None = None, modality: str | None = None
) -> dict[str, Any]:
    """The marked spec of the model at ``path`` (a folder or a config.json)."""
    file, raw = read_config_file(Path(path))
    model_type, family = _family(raw, file)
    obj = _transformers_config(file, raw, model_type)
    top = Keys(raw, obj, "", file)
    if obj is None:
        text, tower = _sub_without_class(top, family.text_key), _sub_without_class(top, family.tower_key)
    else:
        text, tower = top.sub(family.text_key), top.sub(family.tower_key)
        if text.raw.get("text_config") is not None:  # a full multimodal config nested as the LM
            text = text.sub("text_config")
    modality = modality or family.modalities[0]
    if modality not in family.modalities:
        raise ValueError(f"--modality {modality!r}: {model_type} serves {', '.join(family.modalities)}")
    pre_file, video_file = file.parent / "preprocessor_config.json", file.parent / VIDEO_PREPROCESSOR
    pre = _processor_file(pre_file)
    if video_file.is_file():  # the video processor's own file rides in the mapping under its name
        pre = {**pre, VIDEO_PREPROCESSOR: _processor_file(video_file)}
    lm, notes = lm_block(text, top)
    built = family.build(tower, top, value(lm["hidden_size"]), pre, modality)
    spec = {
        "name": name or file.parent.name,
        "hf_id": hf_id or str(raw.get("_name_or_path") or name or file.parent.name),
        "modality": modality,
        "modalities": list(family.modalities),
        # the checkpoint's own context, never a class default (the spec then says none: no cap)
        **({"max_context_tokens": text.get("max_position_embeddings")}
           if text.raw.get("max_position_embeddings") is not None else {}),
        "marks": MARKS,
        "imported_from": {"file": str(file), "model_type": model_type, "family": family.what},
        "lm": lm,
        "encoder": built.encoder,
        "mapping": built.mapping,
        "typical_request": {
            "prompt_tokens": guess(64, "short instruction around an audio clip")
            if modality == "audio"
            else guess(128, "text length unknown; random-mm examples use 128-512"),
            "output_tokens": guess(128, "random-mm examples use 128-256 output tokens"),
            "mm_tokens_per_item": {
                **built.typical_tokens,
                "value": [value(built.typical_tokens)],
                "mark": "D",
            },
            **({"encode_tokens_per_item": {**built.typical_encode_tokens,
                                           "value": [value(built.typical_encode_tokens)], "mark": "D"}}
               if built.typical_encode_tokens is not None else {}),
        },
        "unmodelled": notes + built.notes,
    }
    if built.processor is not None:  # the rule raw item sizes go through (calibration.processor_spec)
        spec["processor"] = built.processor
    ModelSpec.from_dict(strip_marks(spec, "", {}))  # refuse a spec the cost model cannot load
    return spec
