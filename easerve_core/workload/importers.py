"""Importers for public LLM traces: Azure, BurstGPT and Mooncake files as token traces.

Each parses one file's text (read by ``runtime.traces``: ``read_azure``,
``read_burstgpt``, ``read_mooncake``) into a
:class:`~easerve_core.workload.replay.TokenTrace`
(arrival, LM input tokens, output tokens per request); the multimodal items
come later from a mix (the rule is in ``replay``). Columns and sources are in
docs/workloads.md:

* Azure LLM inference traces (``AzureLLMInferenceTrace_{conv,code}.csv``):
  ``TIMESTAMP`` (ISO date-time, e.g. ``2023-11-16 18:15:46.6805900``),
  ``ContextTokens``, ``GeneratedTokens``.
* BurstGPT (``BurstGPT_*.csv``): ``Timestamp`` (s from the trace start),
  ``Request tokens``, ``Response tokens``; ``Model``, ``Total tokens`` and
  ``Log Type`` are not used.
* Mooncake (``*.jsonl``): ``timestamp`` (ms), ``input_length``,
  ``output_length``; ``hash_ids`` (prefix-cache blocks) is not used.

Rows may come in any order: they are sorted by arrival (ties keep file
order; a :class:`~easerve_core.checks.Notice` says so when the file was not)
and arrivals count from the earliest row. Token counts are held to
:data:`~easerve_core.limits.MAX_TOKENS` and the trace's span to
:data:`~easerve_core.limits.MAX_ARRIVAL_S`, as a generated workload's are. Date-times with a UTC
offset are taken in UTC, those without as they are. A malformed row is one
``ValueError`` naming the file, the line and the field; so is an empty file,
a missing column, a needed column named twice, a row longer than the header
(a CSV reader would keep the last column's values, or file the extra ones
unread) or a quote left open (``easerve_core.text.csv_rows``). Pure: no clock,
no randomness.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from easerve_core import checks, limits
from easerve_core.text import csv_rows, jsonl_objects
from easerve_core.workload.replay import TokenTrace

Row = tuple[str, Mapping[str, Any]]  # (file:line, fields)
T = TypeVar("T")

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")


def _csv_rows(path: Path, text: str, fmt: str, columns: Sequence[str]) -> Iterator[Row]:
    def check(names: list[str]) -> None:
        if not names:
            raise ValueError(f"{path}: empty file; a {fmt} trace needs the columns {', '.join(columns)}")
        missing = [c for c in columns if c not in names]
        if missing:
            shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
            raise ValueError(f"{path}: missing column {missing[0]!r} for a {fmt} trace "
                             f"(needs {', '.join(columns)}; found {shown})")

    for line_no, row in csv_rows(path, text, check, columns):
        yield f"{path}:{line_no}", row


def _jsonl_rows(path: Path, text: str) -> Iterator[Row]:
    for line_no, obj in jsonl_objects(path, text):
        yield f"{path}:{line_no}", obj


def _field(row: Mapping[str, Any], name: str, where: str) -> Any:
    value = row.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ValueError(f"{where}: missing field {name!r}")
    return value


def _number(row: Mapping[str, Any], name: str, where: str) -> float:
    """A finite number >= 0 (a string in CSV, a number in JSON)."""
    value = _field(row, name, where)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{where}: field {name!r} is not a number: {value!r}")
    try:
        out = float(value)
    except ValueError:
        raise ValueError(f"{where}: field {name!r} is not a number: {value!r}") from None
    if not math.isfinite(out):
        raise ValueError(f"{where}: field {name!r} is not a finite number: {value!r}")
    if out < 0:
        raise ValueError(f"{where}: field {name!r} must be >= 0, got {value!r}")
    return out


def _count(row: Mapping[str, Any], name: str, where: str) -> int:
    out = _number(row, name, where)
    if not out.is_integer():
        raise ValueError(f"{where}: field {name!r} is not a whole number: {row[name]!r}")
    if out > limits.MAX_TOKENS:  # named as written: 1e30 as an int is 31 digits of float noise
        raise ValueError(f"{where}: field {name!r} must be <= {limits.MAX_TOKENS:,} ({limits.TOKENS_WHY}), "
                         f"got {row[name]!r}")
    return int(out)


def _instant(row: Mapping[str, Any], name: str, where: str) -> datetime:
    value = _field(row, name, where)
    try:
        out = datetime.fromisoformat(str(value).strip())
    except ValueError:
        raise ValueError(f"{where}: field {name!r} is not a date-time "
                         f"(YYYY-MM-DD HH:MM:SS[.fraction]): {value!r}") from None
    return out.astimezone(UTC).replace(tzinfo=None) if out.tzinfo else out


def _token_trace(times: list[float], inputs: list[int], outputs: list[int], *, path: Path) -> TokenTrace:
    """Rows sorted by time (stable), arrivals from the earliest row."""
    t = np.asarray(times, dtype=float)
    order = np.argsort(t, kind="stable")
    start = t[order[0]]
    span = float(t[order[-1]] - start)
    if span > limits.MAX_ARRIVAL_S:
        shown = f"{span:,.0f}" if span < 1e12 else f"{span:.3g}"  # not 300 digits for a 1e300 stamp
        raise ValueError(f"{path}: the trace spans {shown} s; at most {limits.MAX_ARRIVAL_S:,} s "
                         f"({limits.ARRIVAL_WHY})")
    if len(t) > 1 and bool(np.any(np.diff(t) < 0)):
        checks.notice(f"{path}: rows are not in time order; sorted by time")
    return TokenTrace(
        arrival_s=tuple(float(x) for x in t[order] - start),
        input_tokens=tuple(inputs[i] for i in order),
        output_tokens=tuple(outputs[i] for i in order),
    )


def _collect(path: Path, rows: Iterator[Row], time_of: Callable[[Mapping[str, Any], str], T],
             input_name: str, output_name: str) -> tuple[list[T], list[int], list[int]]:
    """Each row's time, input and output tokens, in file order."""
    times: list[T] = []
    inputs: list[int] = []
    outputs: list[int] = []
    for where, row in rows:
        times.append(time_of(row, where))
        inputs.append(_count(row, input_name, where))
        outputs.append(_count(row, output_name, where))
    if not times:
        raise ValueError(f"trace file {path} holds no requests")
    return times, inputs, outputs


def parse_azure(text: str, path: str | os.PathLike[str]) -> TokenTrace:
    """An Azure LLM inference trace CSV (``TIMESTAMP, ContextTokens, GeneratedTokens``)."""
    path = Path(path)
    instants, inputs, outputs = _collect(
        path, _csv_rows(path, text, "azure", AZURE_COLUMNS),
        lambda row, where: _instant(row, "TIMESTAMP", where), "ContextTokens", "GeneratedTokens")
    start = min(instants)
    return _token_trace([(t - start).total_seconds() for t in instants], inputs, outputs, path=path)


def parse_burstgpt(text: str, path: str | os.PathLike[str]) -> TokenTrace:
    """A BurstGPT CSV (``Timestamp`` in s, ``Request tokens``, ``Response tokens``)."""
    path = Path(path)
    return _token_trace(*_collect(
        path, _csv_rows(path, text, "burstgpt", BURSTGPT_COLUMNS),
        lambda row, where: _number(row, "Timestamp", where), "Request tokens", "Response tokens"), path=path)


def parse_mooncake(text: str, path: str | os.PathLike[str]) -> TokenTrace:
    """A Mooncake JSONL trace (``timestamp`` in ms, ``input_length``, ``output_length``)."""
    path = Path(path)
    return _token_trace(*_collect(
        path, _jsonl_rows(path, text),
        lambda row, where: _number(row, "timestamp", where) / 1000.0, "input_length", "output_length"),
        path=path)
