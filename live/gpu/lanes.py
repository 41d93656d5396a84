"""Stream lanes and SM levels: the pure half of the GPU partitioner.

A *lane* is one stream to launch on plus the SMs it may use; a
:class:`StreamPair` is the (Encode, local Prefill) pair of lanes of one SM
level. A :class:`LanePool` holds every pair built at start-up (one per green
level) and the two full-device lanes (plain primary-context streams, used for
share 1.0 and for time-slice sharing). Choosing a lane for a share is a pure,
host-side lookup (:meth:`LanePool.lane_for`); nothing here calls the driver.

Levels are planned in the device's SM granularity (:func:`plan_levels`):
Encode gets ``k`` groups of ``granularity`` SMs, local Prefill the other
groups plus the remainder (notes/sm-partitioning.md §4). :func:`null_pool`
builds a pool with the same SM bookkeeping and no streams, for the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

#: the five encode shares a pool is planned from when none are given
DEFAULT_ENCODE_FRACS = (0.2, 0.35, 0.5, 0.65, 0.8)

ROLES = ("encode", "prefill")


@dataclass(frozen=True, slots=True, kw_only=True)
class Lane:
    """One stream and the SMs work on it may use (``stream`` None: no device stream)."""

    name: str
    sms: int
    stream: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.sms, int) or self.sms < 1:
            raise ValueError(f"sms of lane {self.name!r} must be an integer >= 1, got {self.sms!r}")

    def activate(self) -> AbstractContextManager[Any]:
        """A context in which new work goes to this lane's stream (a no-op without one)."""
        if self.stream is None:
            return nullcontext()
        return torch.cuda.stream(self.stream)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamPair:
    """The (Encode, local Prefill) lanes of one SM level, out of ``total_sms``."""

    level: str
    encode: Lane
    prefill: Lane
    total_sms: int

    def __post_init__(self) -> None:
        if not isinstance(self.total_sms, int) or self.total_sms < 1:
            raise ValueError(f"total_sms must be an integer >= 1, got {self.total_sms!r}")

    @property
    def encode_share(self) -> float:
        return self.encode.sms / self.total_sms

    @property
    def prefill_share(self) -> float:
        return self.prefill.sms / self.total_sms


@dataclass(frozen=True, slots=True, kw_only=True)
class LanePool:
    """Every pre-built pair (ascending encode share) and the full-device pair."""

    pairs: tuple[StreamPair, ...]
    full: StreamPair
    granularity: int
    backend: str

    def __post_init__(self) -> None:
        if not self.pairs:
            raise ValueError("pairs must hold at least one level")
        shares = [p.encode_share for p in self.pairs]
        if shares != sorted(shares):
            raise ValueError(f"pairs must be in ascending encode share, got {shares}")

    @property
    def total_sms(self) -> int:
        return self.full.total_sms

    @property
    def encode_shares(self) -> tuple[float, ...]:
        """The encode share of each level, then 1.0 (the full device)."""
        return (*(p.encode_share for p in self.pairs), 1.0)

    def pair_for(self, encode_share: float) -> StreamPair:
        """The pair whose encode share is nearest ``encode_share``; the full pair at >= 1.0."""
        if not 0.0 < encode_share <= 1.0:
            raise ValueError(f"encode_share must be in (0, 1], got {encode_share!r}")
        if encode_share >= 1.0 - 1e-9:
            return self.full
        # nearest, ties to the larger share: Encode is the critical path
        return min(reversed(self.pairs), key=lambda p: abs(p.encode_share - encode_share))

    def lane_for(self, role: str, share: float) -> Lane:
        """The lane a thread running ``role`` with ``share`` of the SMs launches on."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; known: {', '.join(ROLES)}")
        if not 0.0 < share <= 1.0:
            raise ValueError(f"share must be in (0, 1], got {share!r}")
        if share >= 1.0 - 1e-9:
            return self.full.encode if role == "encode" else self.full.prefill
        if role == "encode":
            return self.pair_for(share).encode
        best = min(reversed(self.pairs), key=lambda p: abs(p.prefill_share - share))
        return best.prefill

    @classmethod
    def from_rows(cls, rows: Sequence[dict[str, Any]], *, granularity: int = 0) -> LanePool:
        """A stream-less pool with the SM counts of :meth:`rows` (read back from a run's files).

        The serving check records the levels its device built and maps each
        share a live stage log holds to the lane :meth:`lane_for` picks, on
        the CPU after the run.
        """
        pairs, full = [], None
        for r in rows:
            level, total = str(r["level"]), int(r["total_sms"])
            pair = StreamPair(level=level, total_sms=total,
                              encode=Lane(name=f"{level}/encode", sms=int(r["encode_sms"])),
                              prefill=Lane(name=f"{level}/prefill", sms=int(r["prefill_sms"])))
            if level == "full":
                full = pair
            else:
                pairs.append(pair)
        if full is None:
            raise ValueError("rows must hold the 'full' level")
        pairs.sort(key=lambda p: p.encode_share)
        backend = str(rows[0].get("backend", "null")) if rows else "null"
        return cls(pairs=tuple(pairs), full=full, granularity=granularity, backend=backend)

    def every_lane(self) -> tuple[Lane, ...]:
        """Each lane once, the levels' in ascending encode share, then the full pair's.

        What a worker warms before it serves: the first launch in a green
        context loads the kernels again for that context, a one-off cost that
        would otherwise land on the first micro-batch of each lane.
        """
        return tuple(lane for p in (*self.pairs, self.full) for lane in (p.encode, p.prefill))

    def rows(self) -> list[dict[str, Any]]:
        """One row per level (then ``full``): the SM counts each lane really has."""
        return [
            {"level": p.level, "encode_sms": p.encode.sms, "prefill_sms": p.prefill.sms,
             "total_sms": p.total_sms, "encode_share": round(p.encode_share, 6),
             "backend": self.backend}
            for p in (*self.pairs, self.full)
        ]


def plan_levels(
    total_sms: int, granularity: int, encode_fracs: Sequence[float] = DEFAULT_ENCODE_FRACS
) -> tuple[int, ...]:
    """Encode group counts, one per wanted share, rounded to ``granularity``-SM groups.

    Each level leaves at least one group to Prefill; duplicates after rounding
    are dropped, so a small device may get fewer than ``len(encode_fracs)`` levels.
    """
    if not isinstance(total_sms, int) or total_sms < 1:
        raise ValueError(f"total_sms must be an integer >= 1, got {total_sms!r}")
    if not isinstance(granularity, int) or granularity < 1:
        raise ValueError(f"granularity must be an integer >= 1, got {granularity!r}")
    num_groups = total_sms // granularity
    if num_groups < 2:
        raise ValueError(f"granularity {granularity} leaves fewer than two groups of {total_sms} SMs")
    if not encode_fracs:
        raise ValueError("encode_fracs must hold at least one share")
    counts = set()
    for frac in encode_fracs:
        if not 0.0 < frac < 1.0:
            raise ValueError(f"encode_fracs must lie in (0, 1), got {frac!r}")
        counts.add(min(num_groups - 1, max(1, round(frac * total_sms / granularity))))
    return tuple(sorted(counts))


def level_name(encode_sms: int) -> str:
    return f"g{encode_sms}"


def null_pool(
    total_sms: int = 132, granularity: int = 8, encode_fracs: Sequence[float] = DEFAULT_ENCODE_FRACS
) -> LanePool:
    """A pool with nominal SM counts and no streams: the CPU stand-in for the dry run."""
    pairs = []
    for k in plan_levels(total_sms, granularity, encode_fracs):
        enc = k * granularity
        pairs.append(StreamPair(
            level=level_name(enc), total_sms=total_sms,
            encode=Lane(name=f"{level_name(enc)}/encode", sms=enc),
            prefill=Lane(name=f"{level_name(enc)}/prefill", sms=total_sms - enc),
        ))
    full = StreamPair(level="full", total_sms=total_sms,
                      encode=Lane(name="full/encode", sms=total_sms),
                      prefill=Lane(name="full/prefill", sms=total_sms))
    return LanePool(pairs=tuple(pairs), full=full, granularity=granularity, backend="null")
