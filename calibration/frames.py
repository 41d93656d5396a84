"""The pandas steps the two measured-table adapters share (:mod:`calibration.aiconfigurator`,
:mod:`calibration.vidur`): both read latencies in milliseconds, and both keep only the rows of
the most common kernel (or backend) where one shape was timed several ways.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from calibration.optables import Curve

#: seconds per millisecond (both databases keep milliseconds)
_MS = 1e-3


def most_common(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """The rows of ``frame`` holding ``column``'s most common value (all of them without the column)."""
    if column not in frame.columns or frame.empty:
        return frame
    return frame[frame[column] == frame[column].value_counts().idxmax()]


def ms_curve(sizes: Iterable[Any], ms: Iterable[Any], exponent_above: float = 1.0) -> Curve:
    """A :class:`~calibration.optables.Curve` over ``sizes`` of the latencies ``ms`` (milliseconds)."""
    return Curve(tuple(float(v) for v in sizes), tuple(float(v) * _MS for v in ms), exponent_above)
