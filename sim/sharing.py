"""SM sharing between Encode and local Prefill on one encode worker.

An encode worker's GPUs run two lanes: Encode batches and local Prefill
batches. Each lane's task has a remaining work fraction that drains at
``speed / latency(share)`` per second, where ``latency`` is the profile's
stage latency at that SM share. Whenever a lane starts or finishes work the
GPU is re-partitioned and the other lane's remaining time is re-rated. The
shares come from the one per-micro-batch rule both engines apply,
:func:`easerve_core.sm_split.sm_split` (DESIGN.md §2, docs/simulator.md):
``dynamic`` re-partitions per micro-batch from the SM-share table,
``static`` keeps one fixed partition, ``time-slice`` and ``none`` do not
partition. Without a host model a share is a hard partition: a ``dynamic``
batch that takes every SM leaves local Prefill waiting
(``prefill_waits_on_full_encode``). What the simulator adds is speed: in
``time-slice`` a lane alone runs at full speed, and when both have work they
alternate, each at ``(1 - overhead) / 2`` of its exclusive speed
(``SimOptions.time_slice_overhead_frac``).

With host contention on (``[sim.host] num_host_cores``, :mod:`sim.host`) the lanes
are two threads of one worker process: each runs at the host's factor, times
``host_colocated_speed_frac`` while both run; the SM shares still pick the
latency (a profile that cannot split one thread quantises them away), a
full-share encode batch leaves local Prefill contending for everything (as the
live partitioner does) and time-slice uses share 1.0 for both lanes (the host
does the slicing).

Busy SM fraction (utilisation): an encode batch of size b occupies at most
``table.share_for(b)`` of the SMs (what it can fill, from the SM-share
table), local Prefill the share it is given; the GPU's busy fraction is
their sum, capped at 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from easerve_core import SMShareTable, SMSharing
from easerve_core.sm_split import SMSplit, sm_split


class Lane:
    """One lane's current task, with progress bookkeeping."""

    __slots__ = ("_cache", "_latency", "busy", "end_s", "occupancy", "remaining", "share",
                 "share_area", "since_s", "speed", "start_s", "total_s")

    def __init__(self) -> None:
        self._latency: Callable[[float], float] | None = None
        self.busy = False  # a task is running (read at every re-partition: a plain attribute)
        self._cache: dict[float, float] = {}
        self.remaining = 0.0
        self.start_s = self.since_s = 0.0
        self.total_s = math.inf
        self.end_s = math.inf
        self.share = self.speed = 0.0
        self.share_area = 0.0
        self.occupancy = 0.0

    def begin(self, now: float, latency: Callable[[float], float]) -> None:
        self._latency = latency
        self.busy = True
        self._cache = {}
        self.remaining = 1.0
        self.start_s = self.since_s = now
        self.share_area = 0.0
        self.share = self.speed = 0.0
        self.total_s = math.inf

    def rate(self, now: float, share: float, speed: float) -> None:
        """Account progress up to ``now``, then run on at ``share`` x ``speed``."""
        if self._latency is None or (share == self.share and speed == self.speed
                                     and self.total_s != math.inf):
            return
        if self.total_s != math.inf:
            self.remaining -= (now - self.since_s) / self.total_s
        self.share_area += self.share * (now - self.since_s)
        self.since_s = now
        self.share = share
        self.speed = speed
        if share <= 0.0 or speed <= 0.0:
            self.total_s = self.end_s = math.inf
            return
        exclusive = self._cache.get(share)
        if exclusive is None:
            exclusive = self._cache[share] = self._latency(share)
        self.total_s = exclusive / speed
        self.end_s = now + max(0.0, self.remaining) * self.total_s

    def finish(self, now: float) -> float:
        """Close the task at ``now``; return its time-weighted mean share."""
        self.share_area += self.share * (now - self.since_s)
        span = now - self.start_s
        mean = self.share_area / span if span > 0 else self.share
        self._latency = None
        self.busy = False
        self.end_s = self.total_s = math.inf
        self.share = self.speed = self.occupancy = 0.0
        return mean


class SharedGPU:
    """The two lanes of an encode worker and the sharing mode between them."""

    def __init__(self, mode: SMSharing, *, table: SMShareTable, static_encode_share: float,
                 time_slice_overhead_frac: float, host_colocated_speed_frac: float | None = None) -> None:
        self.mode = mode
        self.table = table
        self.static_share = static_encode_share
        self.slice_speed = (1.0 - time_slice_overhead_frac) / 2.0
        self.time_slice = mode is SMSharing.TIME_SLICE
        self.encode = Lane()
        self.prefill = Lane()
        self._encode_fill = 0.0
        #: batch size -> (table.share_for(batch size), the split while it runs); the table is immutable
        self._per_size: dict[int, tuple[float, SMSplit]] = {}
        #: host mode (sim.host): lane speed = host factor x (colocated speed while both run)
        self.host_mode = host_colocated_speed_frac is not None
        self.colocated_speed = 1.0 if host_colocated_speed_frac is None else host_colocated_speed_frac
        self.host_factor = 1.0
        self._idle_split = self._split(None)
        self._busy_split = self._idle_split

    def retable(self, table: SMShareTable) -> None:
        """Run on ``table`` from the next encode batch on (the batch running keeps its split)."""
        self.table = table
        self._per_size = {}
        self._idle_split = self._split(None)

    def _split(self, batch_size: int | None) -> SMSplit:
        # the host model is a real device: a full-share batch is no fence (easerve_core.sm_split)
        return sm_split(self.mode, batch_size, table=self.table, static_share=self.static_share,
                        prefill_waits_on_full_encode=not self.host_mode)

    def start_encode(self, now: float, batch_size: int, latency: Callable[[float], float]) -> None:
        known = self._per_size.get(batch_size)
        if known is None:  # one look-up per batch size
            known = self._per_size[batch_size] = (self.table.share_for(batch_size), self._split(batch_size))
        self._encode_fill, self._busy_split = known
        self.encode.begin(now, latency)
        self._partition(now)

    def start_prefill(self, now: float, latency: Callable[[float], float]) -> None:
        self.prefill.begin(now, latency)
        self._partition(now)

    def finish_encode(self, now: float) -> float:
        share = self.encode.finish(now)
        self._partition(now)
        return share

    def finish_prefill(self, now: float) -> float:
        share = self.prefill.finish(now)
        self._partition(now)
        return share

    def busy_threads(self) -> int:
        return int(self.encode.busy) + int(self.prefill.busy)

    def set_host_factor(self, now: float, factor: float) -> None:
        self.host_factor = factor
        self._partition(now)

    def busy_frac(self) -> float:
        return min(1.0, self.encode.occupancy + self.prefill.occupancy)

    def _partition(self, now: float) -> None:
        enc, pf = self.encode, self.prefill
        split = self._busy_split if enc.busy else self._idle_split
        if self.host_mode:
            speed = self.host_factor * (self.colocated_speed if enc.busy and pf.busy else 1.0)
        elif self.time_slice and enc.busy and pf.busy:
            speed = self.slice_speed
        else:
            speed = 1.0
        enc.rate(now, split.encode, speed)
        pf.rate(now, split.prefill, speed)
        enc.occupancy = min(enc.share, self._encode_fill) if enc.busy else 0.0
        pf.occupancy = pf.share if pf.busy else 0.0
