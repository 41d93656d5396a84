"""Run folders: a :class:`~easerve_core.result.RunResult` written as Parquet + JSON, and read back.

:func:`write_result` writes every table of ``result.frames()`` as
``<name>.parquet``, ``summary.json`` and ``config.json`` into a staging
folder beside the output and moves them into place at the end
(:func:`runtime.files.staged_into`), so an interrupted write leaves no partial
set. :func:`read_result` loads the shared tables back (an engine's own, such as
the simulator's queues, are left on disk), each checked as it is read (a folder
handed back by a user, ``validate --live-from``): a table that is not Parquet,
lacks a column or holds one of another type, a request id twice or not whole,
a time or token count that is negative or not finite, an unknown status, or a
summary or config that is not a JSON object is one ``ValueError`` naming the
file and the column.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from easerve_core.request import RECORD_COLUMNS, Status
from easerve_core.result import STAGE_LOG_COLUMNS, UTILIZATION_COLUMNS, RunResult, empty_frame
from easerve_core.slo import SLO
from runtime.files import read_json, staged_into


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
    """Load a result written by :func:`write_result`, checked (see the module docstring)."""
    out = Path(out_dir)
    if not (out / "records.parquet").exists():
        raise ValueError(f"no records.parquet in {out}")
    config, summary = (_json_object(out / name) for name in ("config.json", "summary.json"))

    def opt(name: str, columns: Mapping[str, str]) -> pd.DataFrame:
        path = out / name
        return read_table(path, columns) if path.exists() else empty_frame(columns)

    return RunResult(
        records=read_records(out / "records.parquet"),
        utilization=opt("utilization.parquet", UTILIZATION_COLUMNS),
        stage_log=opt("stage_log.parquet", STAGE_LOG_COLUMNS),
        config=config,
        engine=str(summary.get("engine", "sim")),
    )


def _json_object(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    data = read_json(path, what="run file")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


def read_table(path: Path, columns: Mapping[str, str]) -> pd.DataFrame:
    """The Parquet table ``path`` with ``columns`` (name -> dtype) present and of their types."""
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow's own errors: a file that is not Parquet, or torn
        raise ValueError(f"{path}: not a Parquet table ({str(exc).splitlines()[0][:120]})") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: lacks column(s) {', '.join(missing)}")
    for column, dtype in columns.items():
        given = frame[column]
        numbers = given.dropna().to_numpy()
        whole = not dtype.lower().startswith("int") or given.dtype.kind not in "fc" or bool(
            np.isfinite(numbers).all() and (numbers % 1 == 0).all() and (np.abs(numbers) < 2 ** 53).all())
        if not whole:
            raise ValueError(f"{path}: column {column!r} must hold whole numbers")
        try:
            frame[column] = given.astype(dtype)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{path}: column {column!r} must hold {dtype} values") from None
    for column, dtype in columns.items():
        if dtype.startswith("float") or dtype.lower().startswith("int"):
            values = frame[column].dropna().astype("float64")
            if (values < 0).any() or not np.isfinite(values).all():
                raise ValueError(f"{path}: column {column!r} must hold finite values >= 0")
    return frame


def read_records(path: Path) -> pd.DataFrame:
    """A run's ``records.parquet``, checked: :data:`RECORD_COLUMNS`, each request once, a known status."""
    frame = read_table(path, RECORD_COLUMNS)
    if frame["request_id"].duplicated().any():
        twice = int(frame["request_id"][frame["request_id"].duplicated()].iloc[0])
        raise ValueError(f"{path}: request_id {twice} is recorded twice")
    unknown = sorted(set(frame["status"].dropna()) - {s.value for s in Status})
    if unknown or frame["status"].isna().any():
        raise ValueError(f"{path}: column 'status' must hold one of {', '.join(s.value for s in Status)}, "
                         f"got {(unknown or [None])[0]!r:.40}")
    return frame
