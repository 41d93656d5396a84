"""File helpers: atomic writes, and text/JSON/TOML reads whose errors name the file.

A crash or a time-out never leaves half a written file behind (one file:
:func:`write_text_atomic`; a set of them: :func:`staged_into`); a missing or
malformed input file is one ``ValueError`` naming it, never a traceback. The
runtime reads bytes here; the core parses the text or data it is handed
(``easerve_core.jsonl`` parses JSON Lines text).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


@contextmanager
def staged_into(folder: str | os.PathLike[str], *, beside: bool = False) -> Iterator[Path]:
    """A staging folder to write into; when the block ends cleanly, each item in it moves into
    ``folder`` by ``os.replace`` (a folder item replaces ``folder``'s folder of that name).

    A reader never sees half a file, a failing block moves nothing in, and the staging folder is
    removed whatever happens. It is made inside ``folder``; with ``beside``, next to it, so that
    ``folder`` itself is made only once everything is written.
    """
    folder = Path(folder)
    home = folder.parent if beside else folder
    home.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=home, prefix=f".{folder.name}.staging-"))
    try:
        yield staging
        folder.mkdir(exist_ok=True)
        for item in sorted(staging.iterdir()):
            target = folder / item.name
            if item.is_dir() and target.is_dir():
                shutil.rmtree(target)
            os.replace(item, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def read_json(path: str | os.PathLike[str], *, what: str) -> Any:
    """Parse the JSON file ``path``; ``what`` names it in the error ("profile", ...)."""
    text = read_text(path, what=what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None


def read_toml(path: str | os.PathLike[str], *, what: str) -> dict[str, Any]:
    """Parse the TOML file ``path``; ``what`` names it in the error ("config", ...)."""
    text = read_text(path, what=what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from None


def read_text(path: str | os.PathLike[str], *, what: str) -> str:
    """The text of ``path`` (a byte-order mark dropped); a missing or non-text file is one error."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ValueError(f"{what} file not found: {path}") from None
    except (IsADirectoryError, UnicodeDecodeError):
        raise ValueError(f"{path}: not a text {what} file") from None

