"""Partitioners: how Encode and local Prefill share one encode worker's compute.

A partitioner grants each side its share, per micro-batch, by the rule both
engines apply (:func:`easerve_core.sm_split.sm_split`); a backend is
mechanism (how a share is enforced on this hardware). Modes, one table
(:data:`PARTITIONERS`):

* ``time-slice``: no control; both sides ask for everything and the OS (or
  the GPU's scheduler) time-slices them. Shares reported as 1.0.
* ``static``: Encode always gets ``static_share``, local Prefill the rest.
* ``dynamic``: for each encode micro-batch, the share the
  :class:`~easerve_core.sm_share.SMShareTable` gives its batch size; a prefill
  that starts while that batch runs gets the rest (everything when the batch
  holds every SM: a full share is no fence on a device), one that starts
  while Encode is idle gets everything. A prefill keeps the share it started
  with.
* ``none``: no local prefill; Encode gets everything.

Backends (:data:`BACKENDS`): ``cpu-threads`` turns a share into a torch
intra-op thread count for the calling thread (``torch.set_num_threads`` is per
thread, notes/sm-partitioning.md §7), fixed for the duration of a call.
``green-context`` (CUDA SM partitions, picking a pre-built stream pair per
share level, live/gpu/green.py) needs a CUDA device; it ran on an H200 under
the policies of this module in the sharing ablation (bench/gpu/RESULTS.md §5).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

import torch

from easerve_core.deployment import SMSharing
from easerve_core.sm_share import SMShareTable
from easerve_core.sm_split import sm_split
from live.gpu.green import green_context_backend


class Backend(Protocol):
    """Mechanism: make the calling thread run with ``share`` of the worker's compute."""

    name: str

    def apply(self, role: str, share: float) -> None: ...


class CpuThreadBackend:
    """Shares become intra-op thread counts out of ``total_threads`` (at least one)."""

    name = "cpu-threads"

    def __init__(self, total_threads: int) -> None:
        if not isinstance(total_threads, int) or total_threads < 1:
            raise ValueError(f"total_threads must be an integer >= 1, got {total_threads!r}")
        self.total_threads = total_threads

    def threads_for(self, share: float) -> int:
        return max(1, min(self.total_threads, round(share * self.total_threads)))

    def apply(self, role: str, share: float) -> None:
        torch.set_num_threads(self.threads_for(share))


def _green_context(total_threads: int = 0) -> Backend:
    """CUDA green contexts (live/gpu): pre-built stream pairs per SM level, picked per batch.

    Needs a CUDA device and ``cuda.bindings``; built only when asked for, so
    importing this module stays CPU-only. Built on an H200 (bench/gpu/RESULTS.md).
    """
    if not torch.cuda.is_available():
        raise ValueError("partition backend 'green-context' needs a CUDA device; use 'cpu-threads'")
    return green_context_backend(total_threads)


BACKENDS: Mapping[str, Callable[[int], Backend]] = {
    "cpu-threads": CpuThreadBackend,
    "green-context": _green_context,
}


class Partitioner(Protocol):
    """Policy: the share each side runs with. Slots yield the share granted."""

    name: str

    def encode_slot(self, batch_size: int) -> AbstractContextManager[float]: ...

    def prefill_slot(self) -> AbstractContextManager[float]: ...


class _Base:
    name = "base"
    mode = SMSharing.NONE

    def __init__(self, backend: Backend, *, static_share: float = 0.5,
                 table: SMShareTable | None = None) -> None:
        self.backend = backend
        self._static_share = static_share
        self._table = table
        self._lock = threading.Lock()
        self._encoding: int | None = None  # the size of the batch now encoding

    def _encode_share_for(self, batch_size: int) -> float:
        return sm_split(self.mode, batch_size, table=self._table, static_share=self._static_share).encode

    def _prefill_share(self) -> float:
        return sm_split(self.mode, self._encoding, table=self._table, static_share=self._static_share).prefill

    @contextmanager
    def encode_slot(self, batch_size: int) -> Iterator[float]:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        share = self._encode_share_for(batch_size)
        with self._lock:
            self._encoding = batch_size
        self.backend.apply("encode", share)
        try:
            yield share
        finally:
            with self._lock:
                self._encoding = None

    @contextmanager
    def prefill_slot(self) -> Iterator[float]:
        with self._lock:
            share = self._prefill_share()
        self.backend.apply("prefill", share)
        yield share


class TimeSlicePartitioner(_Base):
    name = "time-slice"
    mode = SMSharing.TIME_SLICE


class StaticPartitioner(_Base):
    name = "static"
    mode = SMSharing.STATIC

    def __init__(self, backend: Backend, *, encode_share: float) -> None:
        if not 0.0 < encode_share < 1.0:
            raise ValueError(f"encode_share must be in (0, 1), got {encode_share!r}")
        super().__init__(backend, static_share=encode_share)
        self.encode_share = encode_share


class DynamicPartitioner(_Base):
    name = "dynamic"
    mode = SMSharing.DYNAMIC

    def __init__(self, backend: Backend, *, table: SMShareTable) -> None:
        super().__init__(backend, table=table)
        self.table = table


class ExclusivePartitioner(TimeSlicePartitioner):
    """``none``: Encode alone on the worker (no local prefill is ever routed here)."""

    name = "none"
    mode = SMSharing.NONE


PARTITIONERS: Mapping[str, type] = {
    "time-slice": TimeSlicePartitioner,
    "static": StaticPartitioner,
    "dynamic": DynamicPartitioner,
    "none": ExclusivePartitioner,
}

def make_partitioner(
    mode: str,
    *,
    backend: str = "cpu-threads",
    total_threads: int = 2,
    static_share: float = 0.5,
    table: SMShareTable | None = None,
) -> Partitioner:
    """Build the partitioner named ``mode`` over the backend named ``backend``."""
    if mode not in PARTITIONERS:
        raise ValueError(f"unknown sm_sharing {mode!r}; known: {', '.join(sorted(PARTITIONERS))}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown partition backend {backend!r}; known: {', '.join(sorted(BACKENDS))}")
    impl = BACKENDS[backend](total_threads)
    if mode == "static":
        return StaticPartitioner(impl, encode_share=static_share)
    if mode == "dynamic":
        if table is None:
            raise ValueError("sm_sharing 'dynamic' needs an SM-share table (the plan's)")
        return DynamicPartitioner(impl, table=table)
    return PARTITIONERS[mode](impl)
