"""The model families the live executor runs, in one table (STYLE.md habit 6).

``FAMILIES`` maps a family name to its adapter; ``ALIASES`` maps the model
names a config may use (the paper's models, Ultravox) to the family that runs
them here. :func:`get_family` fails loudly with the known names.
"""

from __future__ import annotations

from live.families.base import SIZES, Family, MMInput, PrefillInputs
from live.families.llava_next import LlavaNext
from live.families.qwen2audio import Qwen2Audio
from live.families.qwen25vl import Qwen25VL

FAMILIES: dict[str, Family] = {
    "llava-next": LlavaNext(),
    "qwen2.5-vl": Qwen25VL(),
    "qwen2-audio": Qwen2Audio(),
}

#: model names used elsewhere in easerve -> the family that runs them live
ALIASES: dict[str, str] = {
    "llava": "llava-next",
    "llava-v1.6-34b": "llava-next",
    "qwen2.5-vl-32b": "qwen2.5-vl",
    "qwen25vl": "qwen2.5-vl",
    "qwen2-audio-7b": "qwen2-audio",
    "ultravox": "qwen2-audio",  # transformers 5.24 has no Ultravox; Qwen2-Audio stands in
}


def get_family(name: str) -> Family:
    """The family for ``name`` (a family name or an alias), or ``ValueError`` listing them."""
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in FAMILIES:
        known = ", ".join(sorted([*FAMILIES, *ALIASES]))
        raise ValueError(f"unknown model name {name!r}; known: {known}")
    return FAMILIES[key]


__all__ = ["ALIASES", "FAMILIES", "SIZES", "Family", "MMInput", "PrefillInputs", "get_family"]
