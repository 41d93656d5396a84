"""Timing helpers that work the same on a GPU and on the CPU.

* :class:`Clock`: ``mark()`` records a CUDA event on the current stream (or
  reads ``perf_counter`` on the CPU); ``between_s`` reads the gap after a sync.
* :class:`Deadline`: a wall-clock budget that sections split and check, so a
  profiling script always finishes and writes what it has.
* :func:`repeat_s`: warm up, then time a callable until a rep count or a time
  target is reached (host wall time around a device sync).
* :class:`LayerTimer`: marks at each decoder layer's entry and the last
  layer's exit (forward hooks), to split a forward into per-layer times.

torch is imported where a clock is made, not with the module, so a script's plan
(``bench.gpu.plan``: :class:`Reps`, :class:`Deadline`) and its flags are read
before torch's seconds of loading.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


class Clock:
    """Device-side marks on CUDA, host ``perf_counter`` on the CPU."""

    def __init__(self, device: torch.device | str) -> None:
        import torch

        self.cuda = torch.device(device).type == "cuda"
        self._cuda = torch.cuda

    def mark(self) -> Any:
        if self.cuda:
            event = self._cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def sync(self) -> None:
        if self.cuda:
            self._cuda.synchronize()

    def between_s(self, a: Any, b: Any) -> float:
        """Seconds from mark ``a`` to mark ``b`` (call :meth:`sync` first on CUDA)."""
        if self.cuda:
            return float(a.elapsed_time(b)) / 1e3
        return float(b - a)


@dataclass(frozen=True, slots=True)
class Deadline:
    """An absolute ``time.monotonic`` limit."""

    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        if not seconds > 0:
            raise ValueError(f"seconds must be > 0, got {seconds!r}")
        return cls(time.monotonic() + seconds)

    def left_s(self) -> float:
        return self.at - time.monotonic()

    def expired(self) -> bool:
        return self.left_s() <= 0

    def within(self, seconds: float) -> Deadline:
        """A child deadline ``seconds`` from now, never past this one."""
        return Deadline(min(self.at, time.monotonic() + max(0.0, seconds)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Reps:
    """How to repeat one measurement: ``warmup`` untimed runs, then ``min``..``max`` timed ones."""

    warmup: int = 1
    min: int = 2
    max: int = 5
    target_s: float = 0.3  # stop adding reps once this much time was spent timing

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.min < 1 or self.max < self.min:
            raise ValueError(f"reps need warmup >= 0 and 1 <= min <= max, got {self}")


def repeat_s(fn: Callable[[], Any], clock: Clock, reps: Reps, deadline: Deadline) -> list[float]:
    """Wall seconds of each timed run of ``fn`` (synced before and after each).

    Stops early, after at least one timed run, once ``deadline`` has passed.
    """
    for _ in range(reps.warmup):
        fn()
    clock.sync()
    times: list[float] = []
    while len(times) < reps.max:
        t0 = time.perf_counter()
        fn()
        clock.sync()
        times.append(time.perf_counter() - t0)
        enough = len(times) >= reps.min and sum(times) >= reps.target_s
        if enough or deadline.expired():
            break
    return times


class LayerTimer:
    """Marks around decoder layers during one forward; ``layer_s()`` after a sync.

    Use as a context manager around exactly one forward pass.
    """

    def __init__(self, layers: Sequence[torch.nn.Module], clock: Clock) -> None:
        self.layers = list(layers)
        self.clock = clock
        self.marks: list[Any] = []
        self._handles: list[Any] = []

    def __enter__(self) -> LayerTimer:
        self.marks = []
        for layer in self.layers:
            self._handles.append(layer.register_forward_pre_hook(self._mark))
        self._handles.append(self.layers[-1].register_forward_hook(self._mark))
        return self

    def _mark(self, *_: Any) -> None:
        self.marks.append(self.clock.mark())

    def __exit__(self, *exc: object) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def layer_s(self) -> list[float]:
        if len(self.marks) != len(self.layers) + 1:
            raise ValueError(f"expected {len(self.layers) + 1} marks, got {len(self.marks)}")
        return [self.clock.between_s(a, b) for a, b in zip(self.marks, self.marks[1:], strict=False)]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
