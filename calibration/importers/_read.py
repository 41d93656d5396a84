"""Reading a model's ``config.json`` into marked spec values.

:class:`Keys` reads one (sub)config: a value found in the file is marked V and
names its key (``config.json text_config.hidden_size``); a key absent from the
file takes the ``transformers`` config class's default, still V, naming the
class. :func:`derived` and :func:`guess` make D and G leaves. Every error is a
``ValueError`` that names the file and the key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: integer keys checked in the raw file before ``transformers`` sees it (its own error names no table)
INT_KEYS = (
    "num_attention_heads",
    "num_key_value_heads",
    "num_heads",
    "encoder_attention_heads",
    "num_hidden_layers",
    "depth",
    "encoder_layers",
    "hidden_size",
    "intermediate_size",
    "head_dim",
    "d_model",
    "encoder_ffn_dim",
    "vocab_size",
)
#: integer keys of a processor's files (preprocessor_config.json, video_preprocessor_config.json)
PROCESSOR_INT_KEYS = (
    "min_pixels",
    "max_pixels",
    "shortest_edge",
    "longest_edge",
    "height",
    "width",
    "min_patches",
    "max_patches",
    "patch_size",
    "merge_size",
    "temporal_patch_size",
    "min_frames",
    "max_frames",
)


def leaf(value: Any, mark: str, source: str) -> dict[str, Any]:
    return {"value": value, "mark": mark, "source": source}


def derived(value: Any, arithmetic: str) -> dict[str, Any]:
    return leaf(value, "D", arithmetic)


def guess(value: Any, why: str) -> dict[str, Any]:
    return leaf(value, "G", why)


#: huggingface_hub's strict-dataclass refusal, which quotes the whole value (a 48-entry list)
_FIELD_TYPE = re.compile(r"Validation error for field '([^']+)'.*? "
                         r"(?:doesn't match any type in \((.*?)\)\. Errors"
                         r"|expected ([\w\[\], .]+?), got (\w+))")
#: a list or tuple written out long enough to drown the line it is quoted in
_LONG_LIST = re.compile(r"\[[^\[\]]{40,}\]|\([^()]{80,}\)")
#: the most of a library's message a refusal quotes
REASON_CHARS = 160


def library_reason(exc: BaseException) -> str:
    """A library's refusal (``transformers``' config validation) as one short line: a field of the
    wrong type as ``field 'F' must be T1 | T2``, else the message with whitespace collapsed, long
    lists elided and cut at :data:`REASON_CHARS`."""
    text = " ".join(str(exc).split())
    typed = _FIELD_TYPE.search(text)
    if typed is not None and typed.group(2) is not None:
        types = re.sub(r"<class '([\w.]+)'>", r"\1", typed.group(2)).split(", ")
        text = f"field {typed.group(1)!r} must be {' | '.join(types)}"
    elif typed is not None:
        text = f"field {typed.group(1)!r} must be {typed.group(3)}, got {typed.group(4)}"
    while (shorter := _LONG_LIST.sub(lambda m: m.group(0)[0] + "..." + m.group(0)[-1], text)) != text:
        text = shorter
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3] + "..."


def value(node: Mapping[str, Any]) -> Any:
    return node["value"]


def read_config_file(path: Path) -> tuple[Path, dict[str, Any]]:
    """(the config.json file, its raw dict) for a model folder or a ``config.json`` path."""
    path = Path(path)
    if path.is_dir():
        file = path / "config.json"
        if not file.is_file():
            raise ValueError(f"{path}: no config.json in this folder")
    elif path.is_file():
        file = path
    else:
        raise ValueError(f"{path}: no such model folder or config file")
    raw = read_json_object(file)
    check_ints(raw, "", file)
    return file, raw


def read_json_object(file: Path) -> dict[str, Any]:
    """The JSON object in ``file``; anything else is a ``ValueError`` naming the file."""
    try:
        raw = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{file}: not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{file}: not a JSON object")
    return raw


def check_ints(raw: Mapping[str, Any], where: str, file: Path, keys: tuple[str, ...] = INT_KEYS) -> None:
    """Refuse a non-integer count (a head count of ``"8"`` or ``8.5``) in ``raw`` and its sub-tables."""
    for key, item in raw.items():
        name = f"{where}{key}"
        if key in keys and item is not None and (isinstance(item, bool) or not isinstance(item, int)):
            raise ValueError(f"{file}: {name} must be an integer, got {item!r}")
        if isinstance(item, Mapping):
            check_ints(item, f"{name}.", file, keys)


class Keys:
    """Marked reads of one (sub)config: ``raw`` (the file's table) over ``obj`` (transformers' config)."""

    def __init__(self, raw: Mapping[str, Any] | None, obj: Any, where: str, file: Path) -> None:
        self.raw = dict(raw or {})
        self.obj = obj
        self.where = where
        self.file = file

    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def has(self, name: str) -> bool:
        return self.raw.get(name) is not None or getattr(self.obj, name, None) is not None

    def raw_value(self, name: str, default: Any = None) -> Any:
        if self.raw.get(name) is not None:
            return self.raw[name]
        found = getattr(self.obj, name, None)
        return default if found is None else found

    def get(self, name: str, *, kind: type = int, default: Any = None,
            least: int | None = None) -> dict[str, Any]:
        """The marked value of key ``name`` (required unless ``default`` is given; an integer at
        least ``least`` when that is given)."""
        if self.raw.get(name) is not None:
            found, source = self.raw[name], f"{self.file.name} {self.key(name)}"
        elif getattr(self.obj, name, None) is not None:
            found = getattr(self.obj, name)
            source = f"{type(self.obj).__name__} default {name} (absent from {self.file.name})"
        elif default is not None:
            return guess(default, f"{self.key(name)} absent; {default!r} assumed")
        else:
            raise ValueError(f"{self.file}: missing required key {self.key(name)}")
        if kind is int and (isinstance(found, bool) or not isinstance(found, int)):
            raise ValueError(f"{self.file}: {self.key(name)} must be an integer, got {found!r}")
        if least is not None and found < least:
            raise ValueError(f"{self.file}: {self.key(name)} must be at least {least}, got {found!r}")
        return leaf(found, "V", source)

    def sub(self, name: str) -> Keys:
        """The sub-config ``name`` (``text_config``, ``vision_config``...)."""
        raw = self.raw.get(name)
        obj = getattr(self.obj, name, None)
        if raw is None and obj is None:
            raise ValueError(f"{self.file}: missing required key {self.key(name)}")
        if raw is not None and not isinstance(raw, Mapping):
            raise ValueError(f"{self.file}: {self.key(name)} must be a table")
        return Keys(raw, obj, self.key(name), self.file)
