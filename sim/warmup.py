"""Warm-up of a fresh worker process: its first few batches of each kind cost more (opt-in).

The live CPU executor's stage logs show a worker process's first batches of
each kind running slower than the rest, after the host contention is taken
out, although every worker runs one small warm-up request before it reports
ready: a Decode worker's first step by ~4 ms (2x), its next two by ~0.7 ms; an
encode worker's first local Prefill, which runs on a thread the warm-up never
used, by ~9 ms (docs/calibration.md, "Warm-up"). The first calls of a new
shape or a new thread build what a later call reuses (allocator pools, oneDNN
primitives, per-thread state).

The model (``[sim.host] warmup_<lane>_s``, lanes :data:`WARMUP_LANES`): a tuple of
seconds per lane, ``w[i]`` the extra work of the worker's batch ``i`` of that
lane (from 0; a Decode worker's step ``i``); batches past the tuple's end pay
nothing. The lanes: an encode worker's encode batches (``encode``) and its
local Prefill batches (``local_prefill``), a remote Prefill worker's batches
(``prefill``), a Decode worker's steps (``decode``). Deterministic: no draw,
the same options give the same extra work. Under the host model the work
drains at the host's factor like any other. Off (every tuple empty, the
default) no :class:`Warmup` exists and no worker pays anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.host_effects import WARMUP_LANES, HostEffects

__all__ = ["WARMUP_LANES", "Warmup", "make_warmup"]


class Warmup:
    """One worker lane's warm-up: extra seconds of its first ``len(extra_s)`` batches."""

    __slots__ = ("count", "extra_s")

    def __init__(self, extra_s: Sequence[float]) -> None:
        if not extra_s or any(not x >= 0 for x in extra_s):
            raise ValueError(f"extra_s must be a non-empty sequence of seconds >= 0, got {extra_s!r}")
        self.extra_s = tuple(float(x) for x in extra_s)
        self.count = 0

    @property
    def num_batches(self) -> int:
        """Batches (steps) that pay a warm-up."""
        return len(self.extra_s)

    def pending(self) -> bool:
        """Whether the next batch still pays a warm-up."""
        return self.count < len(self.extra_s)

    def next_batch_s(self) -> float:
        """Extra seconds of the batch about to start (counts it)."""
        n = self.count
        self.count = n + 1
        return self.extra_s[n] if n < len(self.extra_s) else 0.0


def make_warmup(options: HostEffects, lane: str) -> Warmup | None:
    """``lane``'s warm-up for one worker, or None when its tuple is empty (off)."""
    if lane not in WARMUP_LANES:
        raise ValueError(f"unknown warm-up lane {lane!r}; known: {', '.join(WARMUP_LANES)}")
    extra = getattr(options, f"warmup_{lane}_s")
    return Warmup(extra) if extra else None
