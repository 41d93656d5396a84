"""Which Prefill or Decode worker a request goes to: the two choices, named, in one place.

The engines choose differently, and each keeps its choice (docs/architecture.md,
"The Prefill/Decode worker"):

* ``least-loaded-at-handoff`` (the simulator, :mod:`sim.pipeline`): when a
  request leaves Encode (or Prefill), the worker of the next stage with the
  fewest tokens assigned and not yet done; a tie goes to the lowest index.
  :func:`least_loaded`.
* ``round-robin-at-issue`` (the live executor, :mod:`live.trial`): when the
  front end issues a request, the next worker of each stage in turn, skipping
  the ones it knows dead; the request carries both choices with it.
  :class:`RoundRobin`.

The simulator sees every worker's load at the instant of a hand-off, for
free; the live front end would need each worker to report its load back
before every issue, and fixes the destinations at issue so a worker never has
to ask. :data:`ENGINE_WORKER_CHOICE` records which engine uses which.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Protocol, TypeVar


class WorkerChoice(StrEnum):
    LEAST_LOADED_AT_HANDOFF = "least-loaded-at-handoff"
    ROUND_ROBIN_AT_ISSUE = "round-robin-at-issue"


#: the choice each engine makes (module docstring); neither is configurable today
ENGINE_WORKER_CHOICE: Mapping[str, WorkerChoice] = {
    "sim": WorkerChoice.LEAST_LOADED_AT_HANDOFF,
    "live": WorkerChoice.ROUND_ROBIN_AT_ISSUE,
}


class Loaded(Protocol):
    load_tokens: int  # tokens assigned to the worker and not yet done


W = TypeVar("W", bound=Loaded)


def least_loaded(workers: Sequence[W]) -> W:
    """The worker with the fewest ``load_tokens``; the first of them on a tie (one per hand-off)."""
    best = workers[0]
    for w in workers:
        if w.load_tokens < best.load_tokens:
            best = w
    return best


class RoundRobin:
    """Worker indices 0..n-1 in turn, skipping the unusable ones (a turn is spent on each)."""

    def __init__(self, num_workers: int) -> None:
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers!r}")
        self.num_workers = num_workers
        self._next = 0

    def pick(self, usable: Callable[[int], bool]) -> int | None:
        """The next usable index, or None when none of the ``num_workers`` is."""
        for _ in range(self.num_workers):
            index = self._next
            self._next = (index + 1) % self.num_workers
            if usable(index):
                return index
        return None
