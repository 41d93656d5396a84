"""Trace files: read a recorded or public trace, write a generated one (the one table of formats).

The core parses text and builds text (``easerve_core.workload.trace`` for our
own format, ``easerve_core.workload.importers`` for the public ones); this
module reads and writes the files. :data:`TRACE_FORMATS` is the one table from
a ``trace_format`` name to the reader of its files: ``easerve`` is our own
trace (CSV or JSONL by suffix), replayed as recorded; ``azure``, ``burstgpt``
and ``mooncake`` are public LLM traces whose requests take their multimodal
items from the workload's mix (``easerve_core.workload.replay``). An unknown
name fails listing the known ones. :func:`load_trace` is the reader a
``[workload]`` table's ``trace`` file is loaded with
(:class:`~easerve_core.workload.replay.TraceReader`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from easerve_core import checks
from easerve_core.request import Request
from easerve_core.workload.importers import parse_azure, parse_burstgpt, parse_mooncake
from easerve_core.workload.replay import DEFAULT_TRACE_FORMAT, RecordedTrace, TokenTrace, Trace
from easerve_core.workload.trace import format_trace, parse_trace, trace_suffix
from runtime.files import read_text, write_text_atomic


def read_trace(path: str | os.PathLike[str]) -> list[Request]:
    """Load our trace file as requests sorted by arrival time (a notice when the file was not)."""
    path = Path(path)
    trace_suffix(path)  # a wrong suffix is refused before the file is read
    return parse_trace(read_text(path, what="trace"), path)


def write_trace(requests: Iterable[Request], path: str | os.PathLike[str]) -> Path:
    """Write requests as a CSV or JSONL trace (by suffix), atomically."""
    return write_text_atomic(path, format_trace(requests, path))


def read_recorded(path: str | os.PathLike[str]) -> RecordedTrace:
    """Our own trace file (docs/workloads.md, "Trace files")."""
    return RecordedTrace(tuple(read_trace(path)))


def read_azure(path: str | os.PathLike[str]) -> TokenTrace:
    """An Azure LLM inference trace CSV (``TIMESTAMP, ContextTokens, GeneratedTokens``)."""
    return parse_azure(read_text(path, what="trace"), path)


def read_burstgpt(path: str | os.PathLike[str]) -> TokenTrace:
    """A BurstGPT CSV (``Timestamp`` in s, ``Request tokens``, ``Response tokens``)."""
    return parse_burstgpt(read_text(path, what="trace"), path)


def read_mooncake(path: str | os.PathLike[str]) -> TokenTrace:
    """A Mooncake JSONL trace (``timestamp`` in ms, ``input_length``, ``output_length``)."""
    return parse_mooncake(read_text(path, what="trace"), path)


#: trace_format name -> reader of one file
TRACE_FORMATS: Mapping[str, Callable[[Path], Trace]] = {
    "easerve": read_recorded,
    "azure": read_azure,
    "burstgpt": read_burstgpt,
    "mooncake": read_mooncake,
}


def load_trace(path: str | os.PathLike[str], trace_format: str = DEFAULT_TRACE_FORMAT,
               *, field: str = "trace_format") -> Trace:
    """Read ``path`` as ``trace_format``; ``field`` names the knob in the error."""
    checks.one_of(field, trace_format, TRACE_FORMATS)
    return TRACE_FORMATS[trace_format](Path(path))
