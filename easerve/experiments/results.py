"""Read what ``easerve reproduce`` wrote: the notebooks' way in.

:func:`load_results` returns every CSV table of a results folder by name,
and :func:`results_dir` finds the committed full run (docs/results) or, when
asked, makes a quick one in a temporary folder.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from easerve.experiments.reproduce import reproduce
from easerve.resources import REPO_ROOT

COMMITTED = REPO_ROOT / "docs" / "results"


def results_dir(*, quick_if_missing: bool = True) -> Path:
    """The committed full run, or a fresh quick run when it is missing."""
    if (COMMITTED / "goodput_sweep.csv").exists():
        return COMMITTED
    if not quick_if_missing:
        raise ValueError(f"no results in {COMMITTED}; run `easerve reproduce --out {COMMITTED}`")
    out = Path(tempfile.mkdtemp(prefix="easerve-results-"))
    reproduce(out, quick=True, quiet=True)
    return out


def load_results(path: str | Path) -> dict[str, pd.DataFrame]:
    """Every ``*.csv`` in ``path`` as a DataFrame, keyed by file stem."""
    folder = Path(path)
    tables = {p.stem: pd.read_csv(p) for p in sorted(folder.glob("*.csv"))}
    if not tables:
        raise ValueError(f"no result tables (*.csv) in {folder}")
    return tables


def load_meta(path: str | Path) -> dict[str, Any]:
    meta = Path(path) / "meta.json"
    return json.loads(meta.read_text()) if meta.exists() else {}
