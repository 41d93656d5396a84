"""Our trace format: the text of a recorded trace as requests, and requests as that text.

A trace is CSV or JSONL (by file suffix), one request per row, with the
columns ``arrival_s, modality, prompt_tokens, output_tokens,
mm_tokens_per_item`` and optionally ``request_id`` and
``encode_tokens_per_item`` (each item's tokens before the model cuts or pools
features after its projector: the encoder's work, ``Request.encode_tokens_per_item``; written only where a
request has them). In CSV, ``mm_tokens_per_item`` is a ``;``-separated list
("2928;1948"), empty for text; in JSONL it is a list. Rows are renumbered when they carry no ids. A
malformed row is refused with its line number and field, and so is a row a
generated workload could not hold: a token count or item count over
:mod:`easerve_core.limits`, an arrival time over a year, a CSV row with more
fields than the header, an unknown column or JSONL key, a column named twice,
an empty item, a repeated ``request_id`` (with both lines). Rows out of arrival
order are sorted by arrival time, with a :class:`~easerve_core.checks.Notice`
(one line on the command's stderr) naming the first row out of order.

Pure: :func:`parse_trace` takes text already read and :func:`format_trace`
returns text; ``runtime.traces`` reads and writes the files (``read_trace``,
``write_trace``). The path only picks the format (its suffix) and names the
file in errors.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from easerve_core import checks
from easerve_core.request import Request
from easerve_core.text import TextSink, csv_rows, jsonl_objects

TRACE_FIELDS = ("request_id", "arrival_s", "modality", "prompt_tokens", "output_tokens",
                "mm_tokens_per_item")
#: what a trace may hold: :data:`TRACE_FIELDS` and the items' tokens before unpadding and pooling
KNOWN_FIELDS = (*TRACE_FIELDS, "encode_tokens_per_item")


def trace_suffix(path: str | os.PathLike[str]) -> str:
    """``.csv`` or ``.jsonl``, the format a trace file's name gives (any other is refused)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl"):
        raise ValueError(f"trace file must end in .csv or .jsonl, got {path.name!r}")
    return suffix


def _parse_items(value: Any, where: str, name: str = "mm_tokens_per_item") -> tuple[int, ...]:
    if value is None or (isinstance(value, str) and not value.strip()):  # a text request
        return ()
    if isinstance(value, str):
        try:  # an empty item ("576;;576", "576;") is malformed, not skipped
            return tuple(int(p) for p in value.replace(",", ";").split(";"))
        except ValueError:
            raise ValueError(f"{where}: field {name!r} is malformed: {value!r}") from None
    if isinstance(value, list):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise ValueError(f"{where}: field {name!r} must hold integers: {value!r}")
        return tuple(value)
    raise ValueError(f"{where}: field {name!r} is malformed: {value!r}")


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
            encode_tokens_per_item=_parse_items(row.get("encode_tokens_per_item"), where,
                                                "encode_tokens_per_item"),
        )
    except ValueError as exc:
        msg = str(exc)
        raise ValueError(msg if msg.startswith(where) else f"{where}: {msg}") from None


def _csv_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    """(line, fields) of each CSV row: no unknown column, no column twice, no row longer than the
    header."""
    def check(names: list[str]) -> None:
        unknown = [name for name in names if name not in KNOWN_FIELDS]
        if unknown:
            raise ValueError(f"{path}:1: unknown trace column(s): {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(KNOWN_FIELDS)}")

    return [(line_no, dict(row)) for line_no, row in csv_rows(path, text, check, KNOWN_FIELDS)]


def _jsonl_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    """(line, fields) of each JSONL object: no unknown key."""
    rows = list(jsonl_objects(path, text))
    for line_no, row in rows:
        unknown = sorted(set(row) - set(KNOWN_FIELDS))
        if unknown:
            raise ValueError(f"{path}:{line_no}: unknown field(s) {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(KNOWN_FIELDS)}")
    return rows


def parse_trace(text: str, path: str | os.PathLike[str]) -> list[Request]:
    """The trace ``text`` read from ``path`` as requests sorted by arrival time (a notice when
    the file was not)."""
    path = Path(path)
    suffix = trace_suffix(path)
    rows = _csv_rows(path, text) if suffix == ".csv" else _jsonl_rows(path, text)
    if not rows:
        raise ValueError(f"trace file {path} holds no requests")
    requests = [_row_to_request(row, i, f"{path}:{ln}") for i, (ln, row) in enumerate(rows)]
    first: dict[int, int] = {}
    for (line_no, _), request in zip(rows, requests, strict=True):
        seen = first.setdefault(request.request_id, line_no)
        if seen != line_no:
            raise ValueError(f"{path}:{line_no}: request_id values must be unique; "
                             f"{request.request_id} is on line {seen} too")
    late = next((k for k in range(1, len(requests))
                 if requests[k].arrival_s < requests[k - 1].arrival_s), None)
    if late is not None:
        checks.notice(f"{path}:{rows[late][0]}: rows are not in arrival order (arrival_s "
                      f"{requests[late].arrival_s!r} after {requests[late - 1].arrival_s!r}); "
                      "sorted by arrival_s")
    return sorted(requests, key=lambda r: (r.arrival_s, r.request_id))


def format_trace(requests: Iterable[Request], path: str | os.PathLike[str]) -> str:
    """The text of a CSV or JSONL trace (by ``path``'s suffix) holding ``requests``."""
    suffix = trace_suffix(path)
    buf = TextSink()
    if suffix == ".csv":
        requests = list(requests)
        pooled = any(r.encode_tokens_per_item for r in requests)  # the column only where it says something
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(KNOWN_FIELDS if pooled else TRACE_FIELDS)
        for r in requests:
            cells = [r.request_id, repr(r.arrival_s), r.modality.value, r.prompt_tokens,
                     r.output_tokens, ";".join(str(t) for t in r.mm_tokens_per_item)]
            writer.writerow([*cells, ";".join(str(t) for t in r.encode_tokens_per_item)] if pooled else cells)
    else:
        for r in requests:
            row: dict[str, Any] = {"request_id": r.request_id, "arrival_s": r.arrival_s,
                   "modality": r.modality.value, "prompt_tokens": r.prompt_tokens,
                   "output_tokens": r.output_tokens, "mm_tokens_per_item": list(r.mm_tokens_per_item)}
            if r.encode_tokens_per_item:
                row["encode_tokens_per_item"] = list(r.encode_tokens_per_item)
            buf.write(json.dumps(row) + "\n")
    return buf.text()
