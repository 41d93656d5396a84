"""The SM-share table: how much of the GPU each encode batch size needs.

EAServe profiles encode latency per batch size at a few SM shares and keeps,
per batch size, the smallest share whose latency stays within
``(1 + tolerance)`` of the exclusive-GPU latency. The rest of the SMs go to
local Prefill for the duration of that micro-batch.

:func:`derive_table` is the one derivation every part uses (the simulator
for a profile that carries no table, ``calibration`` when it writes a
profile, the evaluation): encode latency of batches of B copies of a typical
request's items, at the paper's five shares, asked of any object with
``encode_s(items, sm_share)``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from easerve_core import checks

#: the SM shares EAServe profiles at start-up (the paper's five levels)
SHARE_LEVELS: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 1.0)
#: an encode batch keeps the smallest share within this of its exclusive latency
SHARE_TOLERANCE_FRAC = 0.05
#: the encode batch sizes a profile document's table is measured at
TABLE_BATCH_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16)


@dataclass(frozen=True, slots=True)
class SMShareTable:
    """Per encode batch size, the SM share (0, 1] Encode keeps.

    Build it with :meth:`from_measurements`; ``shares`` maps profiled batch
    sizes to shares.
    """

    shares: Mapping[int, float]

    def __post_init__(self) -> None:
        if not self.shares:
            raise ValueError("shares must hold at least one batch size")
        clean: dict[int, float] = {}
        for size, share in sorted(self.shares.items()):
            size = checks.integer("batch_size", size, minimum=1)
            share = checks.finite(f"share[{size}]", share)
            if not 0.0 < share <= 1.0:
                raise ValueError(f"share[{size}] must be in (0, 1], got {share!r}")
            clean[size] = share
        object.__setattr__(self, "shares", clean)

    @classmethod
    def from_measurements(
        cls, latency_s: Mapping[tuple[int, float], float], *, tolerance: float = 0.05
    ) -> SMShareTable:
        """Build the table from encode latencies keyed by ``(batch_size, share)``.

        Every batch size must have a measurement at share 1.0 (exclusive).
        """
        tolerance = checks.non_negative("tolerance", tolerance)
        if not latency_s:
            raise ValueError("latency_s must not be empty")
        by_size: dict[int, dict[float, float]] = {}
        for key, latency in latency_s.items():
            try:
                size, share = key
            except (TypeError, ValueError):
                raise ValueError(f"latency_s keys must be (batch_size, share), got {key!r}") from None
            size = checks.integer("batch_size", size, minimum=1)
            share = checks.finite("share", share)
            if not 0.0 < share <= 1.0:
                raise ValueError(f"share must be in (0, 1], got {share!r}")
            by_size.setdefault(size, {})[share] = checks.positive(
                f"latency_s[{size}, {share}]", latency
            )
        shares: dict[int, float] = {}
        for size, points in by_size.items():
            exclusive = next((v for s, v in points.items() if math.isclose(s, 1.0)), None)
            if exclusive is None:
                raise ValueError(f"latency_s has no exclusive (share 1.0) latency for batch size {size}")
            limit = exclusive * (1.0 + tolerance)
            shares[size] = min(s for s, v in points.items() if v <= limit or math.isclose(s, 1.0))
        return cls(shares)

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(self.shares)

    def share_for(self, batch_size: int) -> float:
        """The share for ``batch_size``: the next larger profiled size's, capped at the largest."""
        batch_size = checks.integer("batch_size", batch_size, minimum=1)
        sizes = self.batch_sizes
        i = bisect.bisect_left(sizes, batch_size)
        return self.shares[sizes[min(i, len(sizes) - 1)]]

    def to_dict(self) -> dict[str, Any]:
        return {"shares": {str(k): v for k, v in self.shares.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SMShareTable:
        raw = data.get("shares") if isinstance(data, Mapping) else None
        if not isinstance(raw, Mapping):
            raise ValueError("sm_share_table.shares must be an object of batch_size -> share")
        try:
            return cls({int(k): float(v) for k, v in raw.items()})
        except (TypeError, ValueError) as exc:
            raise ValueError(f"sm_share_table.shares is malformed: {exc}") from None


class EncodeLatency(Protocol):
    """What :func:`derive_table` asks of a profile (a StageProfile at the encoder's TP)."""

    def encode_s(self, mm_tokens_per_item: Sequence[int], sm_share: float = 1.0) -> float: ...


def derive_table(encode: EncodeLatency, items: Sequence[int], batch_sizes: Sequence[int], *,
                 levels: Sequence[float] = SHARE_LEVELS,
                 tolerance: float = SHARE_TOLERANCE_FRAC) -> SMShareTable:
    """The table for batches of ``batch_sizes`` requests, each of ``items`` (LM tokens per item).

    A batch of B requests encodes B copies of ``items``; every size is asked
    at each of ``levels`` and at 1.0 (exclusive).
    """
    if not items:
        raise ValueError("items must hold the LM tokens of at least one item")
    if not batch_sizes:
        raise ValueError("batch_sizes must not be empty")
    grid = sorted({float(v) for v in levels} | {1.0})
    latency = {(int(b), s): encode.encode_s(list(items) * int(b), s) for b in batch_sizes for s in grid}
    return SMShareTable.from_measurements(latency, tolerance=tolerance)
