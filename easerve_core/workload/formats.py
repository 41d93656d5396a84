"""Trace formats: the one table from a ``trace_format`` name to the reader of its files.

``easerve`` is our own trace (CSV or JSONL by suffix; ``trace``), replayed as
recorded; ``azure``, ``burstgpt`` and ``mooncake`` are public LLM traces
(``importers``) whose requests take their multimodal items from the
workload's mix (``replay``). An unknown name fails listing the known ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from easerve_core import checks
from easerve_core.workload.importers import read_azure, read_burstgpt, read_mooncake
from easerve_core.workload.replay import RecordedTrace, Trace
from easerve_core.workload.trace import read_trace

DEFAULT_TRACE_FORMAT = "easerve"


def read_recorded(path: str | os.PathLike[str]) -> RecordedTrace:
    """Our own trace file (docs/workloads.md, "Trace files")."""
    return RecordedTrace(tuple(read_trace(path)))


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
