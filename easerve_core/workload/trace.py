"""Trace files: replay recorded arrivals, or save generated ones.

A trace is CSV or JSONL (by file suffix), one request per row, with the
columns ``arrival_s, modality, prompt_tokens, output_tokens,
mm_tokens_per_item`` and optionally ``request_id``. In CSV,
``mm_tokens_per_item`` is a ``;``-separated list ("2928;1948"), empty for
text; in JSONL it is a list. Rows are sorted by arrival time on load and
renumbered when they carry no ids. A malformed row is refused with its line
number and field.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from easerve_core.files import jsonl_objects, read_text, write_text_atomic
from easerve_core.request import Request

TRACE_FIELDS = ("request_id", "arrival_s", "modality", "prompt_tokens", "output_tokens",
                "mm_tokens_per_item")


def _suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl"):
        raise ValueError(f"trace file must end in .csv or .jsonl, got {path.name!r}")
    return suffix


def _parse_items(value: Any, where: str) -> tuple[int, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        parts = [p for p in value.replace(",", ";").split(";") if p.strip()]
        try:
            return tuple(int(p) for p in parts)
        except ValueError:
            raise ValueError(f"{where}: field 'mm_tokens_per_item' is malformed: {value!r}") from None
    if isinstance(value, list):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise ValueError(f"{where}: field 'mm_tokens_per_item' must hold integers: {value!r}")
        return tuple(value)
    raise ValueError(f"{where}: field 'mm_tokens_per_item' is malformed: {value!r}")


def _number(row: Mapping[str, Any], name: str, where: str, kind: type) -> Any:
    if name not in row or row[name] in (None, ""):
        raise ValueError(f"{where}: missing field {name!r}")
    value = row[name]
    try:
        out = kind(value) if isinstance(value, str) else value
        if kind is int and isinstance(out, float) and out.is_integer():
            out = int(out)
        if not isinstance(out, int | float) or isinstance(out, bool):
            raise TypeError
    except (TypeError, ValueError):
        raise ValueError(f"{where}: field {name!r} is not a number: {value!r}") from None
    return out


def _row_to_request(row: Mapping[str, Any], index: int, where: str) -> Request:
    rid = row.get("request_id")
    try:
        return Request(
            request_id=index if rid in (None, "") else _number(row, "request_id", where, int),
            arrival_s=_number(row, "arrival_s", where, float),
            modality=row.get("modality", ""),
            prompt_tokens=_number(row, "prompt_tokens", where, int),
            output_tokens=_number(row, "output_tokens", where, int),
            mm_tokens_per_item=_parse_items(row.get("mm_tokens_per_item"), where),
        )
    except ValueError as exc:
        msg = str(exc)
        raise ValueError(msg if msg.startswith(where) else f"{where}: {msg}") from None


def read_trace(path: str | os.PathLike[str]) -> list[Request]:
    """Load a trace file as requests sorted by arrival time."""
    path = Path(path)
    suffix = _suffix(path)
    text = read_text(path, what="trace")
    rows: list[tuple[int, dict[str, Any]]] = []
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        for line_no, row in enumerate(reader, start=2):
            rows.append((line_no, dict(row)))
    else:
        rows.extend(jsonl_objects(path, text))
    if not rows:
        raise ValueError(f"trace file {path} holds no requests")
    requests = [_row_to_request(row, i, f"{path}:{ln}") for i, (ln, row) in enumerate(rows)]
    ids = [r.request_id for r in requests]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: request_id values must be unique")
    return sorted(requests, key=lambda r: (r.arrival_s, r.request_id))


def write_trace(requests: Iterable[Request], path: str | os.PathLike[str]) -> Path:
    """Write requests as a CSV or JSONL trace, atomically."""
    path = Path(path)
    suffix = _suffix(path)
    buf = io.StringIO()
    if suffix == ".csv":
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(TRACE_FIELDS)
        for r in requests:
            writer.writerow([r.request_id, repr(r.arrival_s), r.modality.value, r.prompt_tokens,
                             r.output_tokens, ";".join(str(t) for t in r.mm_tokens_per_item)])
    else:
        for r in requests:
            buf.write(json.dumps({
                "request_id": r.request_id, "arrival_s": r.arrival_s,
                "modality": r.modality.value, "prompt_tokens": r.prompt_tokens,
                "output_tokens": r.output_tokens, "mm_tokens_per_item": list(r.mm_tokens_per_item),
            }) + "\n")
    return write_text_atomic(path, buf.getvalue())
