"""Text already read, parsed in memory: JSON Lines objects and CSV rows; text built in memory.

Pure: the runtime reads and writes the files (``runtime.files``); the core
gets and gives strings. ``path`` arguments only name the file in errors.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any


class _RepeatedKey(Exception):
    """A JSON object names one key twice (its name is the argument)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


def jsonl_objects(path: str | os.PathLike[str], text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of the JSON Lines ``text`` read from ``path``.
    A key named twice in one object is a ``ValueError`` naming the line and the key (``json`` would
    keep the last value; a CSV column named twice is refused the same way, :func:`csv_rows`)."""
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError:
            raise ValueError(f"{path}:{line_no}: not valid JSON") from None
        except _RepeatedKey as exc:
            raise ValueError(f"{path}:{line_no}: key {exc.args[0]!r} is named twice") from None
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


def csv_rows(path: str | os.PathLike[str], text: str, check_header: Callable[[list[str]], None],
             read: Collection[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, fields) for every row of the CSV ``text`` read from ``path``, once
    ``check_header`` has passed its column names (stripped). A column of ``read`` named twice, a
    row longer than the header, or a quote left open (:func:`_within_line`) is a ``ValueError``
    naming the file and the line: a ``csv.DictReader`` would keep the last column's values, file
    the extra fields unread, or run the quoted field on through the file."""
    reader = csv.DictReader(lines(text))
    names = reader.fieldnames = [name.strip() for name in reader.fieldnames or ()]
    _within_line(path, 1, reader.line_num, names)
    check_header(names)
    twice = next((name for name in names if name in read and names.count(name) > 1), None)
    if twice is not None:
        raise ValueError(f"{path}:1: column {twice!r} appears {names.count(twice)} times")
    start = reader.line_num + 1
    for row in reader:
        if None in row:  # DictReader's key for the fields past the header's
            raise ValueError(f"{path}:{reader.line_num}: {len(row[None])} more field(s) than the "
                             f"header's {len(names)} ({', '.join(names)})")
        _within_line(path, start, reader.line_num, (row.get(name) for name in read))
        yield reader.line_num, row
        start = reader.line_num + 1


def _within_line(path: str | os.PathLike[str], first: int, last: int, fields: Iterable[Any]) -> None:
    """A column name or a field the trace reads never holds a line break: one that does is a
    quote left open, which the ``csv`` reader carries on through the lines after it (the error
    names the lines the row took)."""
    if any(isinstance(field, str) and ("\n" in field or "\r" in field) for field in fields):
        raise ValueError(f"{path}:{first}-{last}: a quoted field runs past the end of its line "
                         "(a quote not closed?)")


class TextSink:
    """Collects what a ``csv`` writer (or anything that calls ``write``) writes; :meth:`text`."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def write(self, part: str) -> int:
        self._parts.append(part)
        return len(part)

    def text(self) -> str:
        return "".join(self._parts)
