"""The result of one run, the same type whichever engine produced it.

A :class:`RunResult` holds the per-request records (DESIGN.md §4.1), a
utilisation time series (busy SM fraction per GPU over time), a stage log
(one row per executed batch: the raw timings that calibration refits from)
and the resolved config. :meth:`RunResult.write` stores them as Parquet +
JSON; :func:`read_result` loads them back.

Utilisation columns: ``time_s, gpu, busy_frac`` (a step function: the GPU's
busy fraction from ``time_s`` until its next row). Stage-log columns:
``stage, worker, start_s, end_s, batch_size, tokens, sm_share``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
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

    def write(self, out_dir: str | os.PathLike[str], *, slo: SLO | None = None) -> Path:
        """Write records, utilisation, stage log, summary and config into ``out_dir``.

        Files are written into a temporary folder beside ``out_dir`` and moved
        into place at the end, so an interrupted write leaves no partial set.
        """
        out = Path(out_dir)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
        try:
            self.records.to_parquet(tmp / "records.parquet", index=False)
            self.utilization.to_parquet(tmp / "utilization.parquet", index=False)
            self.stage_log.to_parquet(tmp / "stage_log.parquet", index=False)
            summary = {"engine": self.engine, **self.summary(slo).to_dict(), **dict(self.meta)}
            _write_json(tmp / "summary.json", summary)
            _write_json(tmp / "config.json", dict(self.config))
            out.mkdir(exist_ok=True)
            for item in tmp.iterdir():
                os.replace(item, out / item.name)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return out


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_result(out_dir: str | os.PathLike[str]) -> RunResult:
    """Load a result written by :meth:`RunResult.write`."""
    out = Path(out_dir)
    if not (out / "records.parquet").exists():
        raise ValueError(f"no records.parquet in {out}")
    config = json.loads((out / "config.json").read_text()) if (out / "config.json").exists() else {}
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}

    def opt(name: str, columns: Mapping[str, str]) -> pd.DataFrame:
        path = out / name
        return pd.read_parquet(path) if path.exists() else empty_frame(columns)

    return RunResult(
        records=pd.read_parquet(out / "records.parquet"),
        utilization=opt("utilization.parquet", UTILIZATION_COLUMNS),
        stage_log=opt("stage_log.parquet", STAGE_LOG_COLUMNS),
        config=config,
        engine=str(summary.get("engine", "sim")),
    )
