"""Rows of numbers kept compactly while a run goes: the recorder's series, the record table.

A :class:`Rows` collects each new row as a tuple in a Python list (the cheapest
append there is) and moves them in bulk, every ``PENDING_ROWS`` rows, into
one flat ``array.array`` of doubles: machine words per value, no object per
row. Integers are held exactly (below 2**53). :meth:`Rows.columns` views the
whole table as NumPy columns without a copy.
"""

from __future__ import annotations

from array import array
from itertools import chain
from typing import Any

import numpy as np

#: rows a series collects in a list before it moves them into its array
PENDING_ROWS = 4096


class Rows:
    """A series of rows of ``width`` numbers: new rows collect as tuples in a Python list (the
    cheapest append) and move in bulk into a flat array of doubles (machine words; ints are
    exact below 2**53), so the series costs memory per value, not per object."""

    __slots__ = ("done", "flushed", "pending", "width")

    def __init__(self, width: int) -> None:
        self.width = width
        self.done = array("d")
        self.flushed = 0  # rows in ``done``
        self.pending: list[tuple[float, ...]] = []

    def add(self, row: tuple[float, ...]) -> int:
        """Append ``row``; return its index."""
        pending = self.pending
        index = self.flushed + len(pending)
        pending.append(row)
        if len(pending) >= PENDING_ROWS:
            self.flush()
        return index

    def set(self, row: int, k: int, value: float) -> None:
        if row < self.flushed:
            self.done[row * self.width + k] = value
        else:
            values = list(self.pending[row - self.flushed])
            values[k] = value
            self.pending[row - self.flushed] = tuple(values)

    def flush(self) -> None:
        pending = self.pending
        if pending:
            flat = np.fromiter(chain.from_iterable(pending), dtype=np.float64,
                               count=len(pending) * self.width)
            self.done.frombytes(flat.tobytes())
            self.flushed += len(pending)
            pending.clear()

    def columns(self) -> list[np.ndarray[Any, Any]]:
        """The columns (views of the array, no copy; nothing may be added after this)."""
        self.flush()
        table = np.frombuffer(self.done, dtype=np.float64).reshape(-1, self.width)
        return [table[:, k] for k in range(self.width)]
