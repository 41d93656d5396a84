"""Run folders: a :class:`~easerve_core.result.RunResult` written as Parquet + JSON, and read back.

:func:`write_result` writes every table of ``result.frames()`` as
``<name>.parquet``, ``summary.json`` and ``config.json`` into a staging
folder beside the output and moves them into place at the end
(:func:`runtime.files.staged_into`), so an interrupted write leaves no partial
set. :func:`read_result` loads the shared tables back (an engine's own, such as
the simulator's queues, are left on disk).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from easerve_core.result import STAGE_LOG_COLUMNS, UTILIZATION_COLUMNS, RunResult, empty_frame
from easerve_core.slo import SLO
from runtime.files import staged_into


def write_result(result: RunResult, out_dir: str | os.PathLike[str], *, slo: SLO | None = None) -> Path:
    """Write the result's tables, summary and config into ``out_dir`` (all at once, see above)."""
    out = Path(out_dir)
    with staged_into(out, beside=True) as tmp:
        for name, frame in result.frames().items():
            frame.to_parquet(tmp / f"{name}.parquet", index=False)
        _write_json(tmp / "summary.json", result.summary_dict(slo))
        _write_json(tmp / "config.json", dict(result.config))
    return out


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_result(out_dir: str | os.PathLike[str]) -> RunResult:
    """Load a result written by :func:`write_result`."""
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
