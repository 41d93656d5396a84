"""Encode micro-batchers: when to close a batch and hand it to the encoder.

Both batchers are clock-agnostic (DESIGN.md §3): every method that depends on
time takes ``now`` in seconds, and a batcher that wants to be asked again
later says when through :meth:`next_deadline`. A driver offers each arriving
item, polls at the deadline, and runs whatever batch comes back.

:class:`AdaptiveBatcher` is EAServe's dispatcher (docs/policies.md):

* ``size``: the batch reached ``max_batch``;
* ``age``: the oldest item has waited ``max_wait_s``;
* ``gap``: no item has arrived for ``gap_factor / rate`` seconds, so the
  current burst is over and waiting longer only adds latency.

``rate`` is ``rate_hz`` when given, else estimated from the mean of the last
``rate_window`` inter-arrival gaps. Until the first gap is seen there is no
estimate and only ``size`` and ``age`` apply. When ``age`` and ``gap`` fall
due at the same instant, ``age`` is reported.

:class:`FixedBatcher` is the fixed-timeout baseline: ``size`` or
``timeout``; ``max_batch=1`` is request-at-a-time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, Protocol, TypeVar

from easerve_core import checks

T = TypeVar("T")


class DispatchReason(StrEnum):
    SIZE = "size"
    AGE = "age"
    GAP = "gap"
    TIMEOUT = "timeout"
    RETUNE = "retune"  # the open batch closed because the controller changed the knobs (flush)


@dataclass(frozen=True, slots=True)
class Batch(Generic[T]):
    """A closed micro-batch: its items in arrival order, why, and when."""

    items: tuple[T, ...]
    reason: DispatchReason
    dispatched_s: float

    def __len__(self) -> int:
        return len(self.items)


class Batcher(Protocol[T]):
    """What a driver needs from any encode batcher."""

    @property
    def max_batch(self) -> int: ...

    def offer(self, item: T, now: float) -> Batch[T] | None: ...

    def poll(self, now: float) -> Batch[T] | None: ...

    def next_deadline(self) -> float | None: ...

    def flush(self, now: float) -> Batch[T] | None: ...

    def __len__(self) -> int: ...


class _Pending(Generic[T]):
    """The open batch: items with their arrival times (mechanism, no policy)."""

    __slots__ = ("items", "newest_s", "oldest_s")

    def __init__(self) -> None:
        self.items: list[T] = []
        self.oldest_s = 0.0
        self.newest_s = 0.0

    def add(self, item: T, now: float) -> None:
        if not self.items:
            self.oldest_s = now
        elif now < self.newest_s:
            raise ValueError(f"now must not go backwards: {now!r} < {self.newest_s!r}")
        self.items.append(item)
        self.newest_s = now

    def close(self, reason: DispatchReason, now: float) -> Batch[T]:
        batch = Batch(tuple(self.items), reason, now)
        self.items = []
        return batch


class AdaptiveBatcher(Generic[T]):
    """EAServe's rate-adaptive encode micro-batcher (see the module docstring).

    Args:
        max_batch: the largest batch (B), at least 1.
        gap_factor: the gap threshold is ``gap_factor / rate`` seconds.
        max_wait_s: the oldest item never waits longer than this.
        rate_hz: this worker's arrival rate; ``None`` estimates it online.
        rate_window: how many recent inter-arrival gaps the estimate averages.
    """

    def __init__(
        self,
        max_batch: int,
        *,
        gap_factor: float = 1.0,
        max_wait_s: float = 1.0,
        rate_hz: float | None = None,
        rate_window: int = 16,
    ) -> None:
        self._max_batch = checks.integer("max_batch", max_batch, minimum=1)
        self.gap_factor = checks.positive("gap_factor", gap_factor)
        self.max_wait_s = checks.non_negative("max_wait_s", max_wait_s)
        self.rate_hz = None if rate_hz is None else checks.positive("rate_hz", rate_hz)
        self.rate_window = checks.integer("rate_window", rate_window, minimum=1)
        self._pending: _Pending[T] = _Pending()
        self._gaps: deque[float] = deque(maxlen=self.rate_window)
        self._gap_sum = 0.0
        self._last_arrival_s: float | None = None

    @property
    def max_batch(self) -> int:
        return self._max_batch

    def __len__(self) -> int:
        return len(self._pending.items)

    def estimated_rate_hz(self) -> float | None:
        """The rate the gap threshold uses: given, estimated, or None yet."""
        if self.rate_hz is not None:
            return self.rate_hz
        if not self._gaps or self._gap_sum <= 0.0:
            return None
        return len(self._gaps) / self._gap_sum

    def gap_threshold_s(self) -> float | None:
        rate = self.estimated_rate_hz()
        return None if rate is None else self.gap_factor / rate

    def offer(self, item: T, now: float) -> Batch[T] | None:
        """Add an item arriving at ``now``; return the batch if it is now full."""
        now = checks.non_negative("now", now)
        self._observe_arrival(now)
        self._pending.add(item, now)
        if len(self._pending.items) >= self._max_batch:
            return self._pending.close(DispatchReason.SIZE, now)
        return None

    def poll(self, now: float) -> Batch[T] | None:
        """Return the open batch if its age or gap deadline has come."""
        if not self._pending.items:
            return None
        age_due = self._pending.oldest_s + self.max_wait_s
        if now >= age_due:
            return self._pending.close(DispatchReason.AGE, now)
        threshold = self.gap_threshold_s()
        if threshold is not None and now >= self._pending.newest_s + threshold:
            return self._pending.close(DispatchReason.GAP, now)
        return None

    def next_deadline(self) -> float | None:
        """The earliest time at which :meth:`poll` would dispatch, or None if empty."""
        if not self._pending.items:
            return None
        deadline = self._pending.oldest_s + self.max_wait_s
        threshold = self.gap_threshold_s()
        if threshold is not None:
            deadline = min(deadline, self._pending.newest_s + threshold)
        return deadline

    def flush(self, now: float) -> Batch[T] | None:
        """Close the open batch at once (reason ``retune``), or None if it is empty."""
        return self._pending.close(DispatchReason.RETUNE, now) if self._pending.items else None

    def _observe_arrival(self, now: float) -> None:
        last = self._last_arrival_s
        if last is not None:
            if now < last:
                raise ValueError(f"now must not go backwards: {now!r} < {last!r}")
            if len(self._gaps) == self._gaps.maxlen:
                self._gap_sum -= self._gaps[0]
            self._gaps.append(now - last)
            self._gap_sum += now - last
        self._last_arrival_s = now


class FixedBatcher(Generic[T]):
    """Fixed-size, fixed-timeout baseline; ``max_batch=1`` is request-at-a-time.

    Args:
        max_batch: the batch size, at least 1.
        timeout_s: the oldest item waits at most this long for the batch to fill.
    """

    def __init__(self, max_batch: int, *, timeout_s: float) -> None:
        self._max_batch = checks.integer("max_batch", max_batch, minimum=1)
        self.timeout_s = checks.non_negative("timeout_s", timeout_s)
        self._pending: _Pending[T] = _Pending()

    @property
    def max_batch(self) -> int:
        return self._max_batch

    def __len__(self) -> int:
        return len(self._pending.items)

    def offer(self, item: T, now: float) -> Batch[T] | None:
        now = checks.non_negative("now", now)
        self._pending.add(item, now)
        if len(self._pending.items) >= self._max_batch:
            return self._pending.close(DispatchReason.SIZE, now)
        return None

    def poll(self, now: float) -> Batch[T] | None:
        if self._pending.items and now >= self._pending.oldest_s + self.timeout_s:
            return self._pending.close(DispatchReason.TIMEOUT, now)
        return None

    def next_deadline(self) -> float | None:
        if not self._pending.items:
            return None
        return self._pending.oldest_s + self.timeout_s

    def flush(self, now: float) -> Batch[T] | None:
        """Close the open batch at once (reason ``retune``), or None if it is empty."""
        return self._pending.close(DispatchReason.RETUNE, now) if self._pending.items else None
