"""The result of one run, the same type whichever engine produced it.

A :class:`RunResult` holds the per-request records (DESIGN.md §4.1), a
utilisation time series (busy SM fraction per GPU over time), a stage log
(one row per executed batch: the raw timings that calibration refits from)
and the resolved config. ``runtime.results`` stores them as Parquet + JSON
(``write_result``: every frame of :meth:`RunResult.frames`, and
:meth:`RunResult.summary_dict`) and loads them back (``read_result``).

Utilisation columns: ``time_s, gpu, busy_frac`` (a step function: the GPU's
busy fraction from ``time_s`` until its next row). Stage-log columns:
``stage, worker, start_s, end_s, batch_size, tokens, sm_share``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from easerve_core.request import RECORD_COLUMNS
from easerve_core.slo import SLO, Summary, summarize

UTILIZATION_COLUMNS: Mapping[str, str] = {"time_s": "float64", "gpu": "int64",
                                          "busy_frac": "float64"}
STAGE_LOG_COLUMNS: Mapping[str, str] = {
    "stage": "string", "worker": "int64", "start_s": "float64", "end_s": "float64",
    "batch_size": "int64", "tokens": "int64", "sm_share": "float64",
}


def empty_frame(columns: Mapping[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=d) for c, d in columns.items()})


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    records: pd.DataFrame
    utilization: pd.DataFrame = field(default_factory=lambda: empty_frame(UTILIZATION_COLUMNS))
    stage_log: pd.DataFrame = field(default_factory=lambda: empty_frame(STAGE_LOG_COLUMNS))
    config: Mapping[str, Any] = field(default_factory=dict)
    engine: str = "sim"
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [c for c in RECORD_COLUMNS if c not in self.records.columns]
        if missing:
            raise ValueError(f"records lack column(s): {', '.join(missing)}")

    def summary(self, slo: SLO | None = None) -> Summary:
        return summarize(self.records, slo)

    def frames(self) -> dict[str, pd.DataFrame]:
        """The tables a run writes, by file stem (an engine's result may add its own)."""
        return {"records": self.records, "utilization": self.utilization, "stage_log": self.stage_log}

    def summary_dict(self, slo: SLO | None = None) -> dict[str, Any]:
        """What ``summary.json`` holds: the engine, the summary against ``slo``, and ``meta``."""
        return {"engine": self.engine, **self.summary(slo).to_dict(), **dict(self.meta)}
