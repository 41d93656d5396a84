"""Text already read, parsed in memory: JSON Lines objects and CSV lines; text built in memory.

Pure: the runtime reads and writes the files (``runtime.files``); the core
gets and gives strings. ``path`` arguments only name the file in errors.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any


def jsonl_objects(path: str | os.PathLike[str], text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of the JSON Lines ``text`` read from ``path``."""
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise ValueError(f"{path}:{line_no}: not valid JSON") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{path}:{line_no}: each line must be a JSON object")
        yield line_no, obj


def lines(text: str) -> list[str]:
    """``text`` cut after each ``"\\n"``, the lines a ``csv`` reader takes (as a text file
    iterates them, nothing translated: a lone ``"\\r"`` stays inside its line)."""
    parts = text.split("\n")
    out = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


class TextSink:
    """Collects what a ``csv`` writer (or anything that calls ``write``) writes; :meth:`text`."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def write(self, part: str) -> int:
        self._parts.append(part)
        return len(part)

    def text(self) -> str:
        return "".join(self._parts)
