"""Markdown for the reports: a frame as a plain table, written without extra packages."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd


def md_table(frame: pd.DataFrame, columns: Sequence[str] | None = None, digits: int = 3) -> str:
    """``frame`` (or its ``columns``) as a Markdown table; floats to ``digits`` significant digits."""
    cols = list(columns or frame.columns)

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "—" if math.isnan(v) else f"{v:.{digits}g}" if abs(v) < 1e3 else f"{v:.0f}"
        return str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r[c]) for c in cols) + " |" for _, r in frame.iterrows()]
    return "\n".join(lines)
