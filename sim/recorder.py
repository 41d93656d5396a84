"""What a run observes besides the records: utilisation, stage log, queues, trace.

Workers report to one :class:`Recorder`; it keeps each series as rows of
numbers moved in bulk into a flat ``array.array`` (a few machine words per
row) while the run goes and builds the DataFrames once at the end. What is not recorded costs a test and
nothing else: no rows, and no trace tuple unless a trace list was given.

* Utilisation: a step function per GPU, ``time_s, gpu, busy_frac`` (the
  busy SM fraction from ``time_s`` until that GPU's next row). A row is only
  added when the value changes; two changes at one instant keep the last.
  A worker's GPUs are reported together (:meth:`Recorder.gpu_slot`), kept as
  one row per change and spread over the GPUs at the end.
* Stage log: one row per executed batch (``encode``, ``prefill``,
  ``local-prefill``, ``decode`` segment, ``aggregated-prefill``), with the
  time-weighted SM share it ran at.
* Queue lengths: a step function per (stage, worker), ``time_s, stage,
  worker, length``, returned in ``RunResult.meta["queue_lengths"]`` as a
  DataFrame (the CLI writes it as ``queues.parquet``) and summarised as the
  time-average and maximum per stage in ``meta["queues"]``.
* Trace: when a list is given, ``(time_s, what, worker, request_ids)``
  tuples in the order the simulator did things (the exact-trace tests).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd

from easerve_core import Request
from easerve_core.result import STAGE_LOG_COLUMNS, UTILIZATION_COLUMNS
from sim.rows import Rows

QUEUE_COLUMNS = {"time_s": "float64", "stage": "string", "worker": "int64", "length": "int64"}


class Traced(Protocol):
    """What the trace needs of a job: its request (for the id)."""

    @property
    def req(self) -> Request: ...


class Recorder:
    """Collects observations; see the module docstring."""

    def __init__(self, *, utilization: bool, queues: bool,
                 trace: list[tuple[Any, ...]] | None = None,
                 progress: Callable[[int], None] | None = None) -> None:
        self.trace = trace
        self.progress = progress
        self._util_on = utilization
        self._queues_on = queues
        # utilisation by GPU set (one per worker, gpu_slot): its GPUs change together
        self._gpu_sets: list[tuple[int, ...]] = []
        self._util_last: list[tuple[float, float, int]] = []  # per set: time, fraction, its last row
        self._util = Rows(3)  # (time_s, gpu set, busy_frac)
        self._stage_names: list[str] = []  # the stage of each stage-log row (shared str objects)
        self._stage = Rows(6)  # (worker, start_s, end_s, batch_size, tokens, sm_share)
        # queue lengths by slot (one per stage and worker, queue_slot), rows of slot changes
        self._slots: list[tuple[str, int]] = []
        self._slot_length: list[int] = []
        self._queue = Rows(3)  # (time_s, slot, length)

    # -- reporting -------------------------------------------------------------------
    def log(self, now: float, what: str, worker: int, jobs: Iterable[Traced]) -> None:
        if self.trace is not None:
            self.trace.append((now, what, worker, tuple(job.req.request_id for job in jobs)))

    def gpu_slot(self, gpus: Sequence[int]) -> int:
        """A handle for :meth:`busy`: GPUs that are always reported together (one worker's)."""
        self._gpu_sets.append(tuple(gpus))
        self._util_last.append((-1.0, -1.0, -1))
        return len(self._gpu_sets) - 1

    def busy(self, slot: int, now: float, frac: float) -> None:
        """The GPUs of ``slot`` (:meth:`gpu_slot`) are ``frac`` busy from ``now``."""
        if not self._util_on:
            return
        last_t, last_f, row = self._util_last[slot]
        if last_f == frac:
            return
        if last_t == now:
            self._util.set(row, 2, frac)  # same instant: replace the last row (it lasted zero time)
        else:
            row = self._util.add((now, slot, frac))
        self._util_last[slot] = (now, frac, row)

    def batch(self, stage: str, worker: int, start_s: float, end_s: float, batch_size: int,
              tokens: int, sm_share: float) -> None:
        self._stage_names.append(stage)
        self._stage.add((worker, start_s, end_s, batch_size, tokens, sm_share))

    def queue_slot(self, stage: str, worker: int) -> int:
        """A handle for :meth:`queue`: the queue of ``stage`` on ``worker``."""
        self._slots.append((stage, worker))
        self._slot_length.append(-1)
        return len(self._slots) - 1

    def queue(self, slot: int, now: float, length: int) -> None:
        """The queue of ``slot`` (:meth:`queue_slot`) holds ``length`` requests from ``now``."""
        if not self._queues_on or self._slot_length[slot] == length:
            return
        self._slot_length[slot] = length
        self._queue.add((now, slot, length))

    def finished(self) -> None:
        if self.progress is not None:
            self.progress(1)

    # -- results ---------------------------------------------------------------------
    def utilization_frame(self) -> pd.DataFrame:
        times, slots, fracs = self._util.columns()
        # one row per GPU of each set's row, then by time and GPU (each pair once)
        sizes = np.asarray([len(gpus) for gpus in self._gpu_sets] or [0], dtype=np.int64)
        firsts = np.cumsum(sizes) - sizes  # each set's place in the flat GPU list
        flat_gpus = np.asarray([g for gpus in self._gpu_sets for g in gpus], dtype=np.int64)
        set_of = slots.astype(np.int64)
        counts = sizes[set_of]
        starts = np.repeat(firsts[set_of], counts)
        within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        ids = flat_gpus[starts + within]
        times, fracs = np.repeat(times, counts), np.repeat(fracs, counts)
        order = np.lexsort((ids, times))
        frame = pd.DataFrame({"time_s": times[order], "gpu": ids[order], "busy_frac": fracs[order]})
        return frame.astype(dict(UTILIZATION_COLUMNS))

    def stage_frame(self) -> pd.DataFrame:
        workers, starts, ends, sizes, tokens, shares = self._stage.columns()
        frame = pd.DataFrame({"stage": pd.array(self._stage_names, dtype="string"),
                              "worker": workers.astype(np.int64), "start_s": starts, "end_s": ends,
                              "batch_size": sizes.astype(np.int64), "tokens": tokens.astype(np.int64),
                              "sm_share": shares}, copy=False)
        return frame.astype(dict(STAGE_LOG_COLUMNS))

    def queue_frame(self) -> pd.DataFrame:
        times, slots, lengths = self._queue_columns()
        names = np.asarray([stage for stage, _ in self._slots] or [""], dtype=object)
        workers = np.asarray([worker for _, worker in self._slots] or [0], dtype=np.int64)
        frame = pd.DataFrame({"time_s": times, "stage": pd.array(names[slots], dtype="string"),
                              "worker": workers[slots], "length": lengths}, copy=False)
        return frame.astype(QUEUE_COLUMNS)

    def _queue_columns(self) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        times, slots, lengths = self._queue.columns()
        return times.copy(), slots.astype(np.int64), lengths.astype(np.int64)

    def queue_summary(self, end_s: float) -> dict[str, dict[str, float]]:
        """Per stage: time-average (summed over its workers) and max queue length.

        The area under each stage's step functions is summed row by row in the
        order the rows were recorded (a cumulative sum: the same float as a loop),
        then each worker's last length up to ``end_s``, in the order the workers
        first reported.
        """
        times, slots, lengths = self._queue_columns()
        names = sorted({stage for stage, _ in self._slots})
        slot_stage = np.asarray([names.index(stage) for stage, _ in self._slots] or [0], dtype=np.int64)
        row_stage = slot_stage[slots]
        # each row's previous row of the same slot: rows grouped by slot, in recorded order
        by_slot = np.argsort(slots, kind="stable")
        has_prev = np.zeros(len(slots), dtype=bool)
        has_prev[by_slot[1:]] = slots[by_slot[1:]] == slots[by_slot[:-1]]
        prev = np.empty(len(slots), dtype=np.int64)
        prev[by_slot[1:]] = by_slot[:-1]
        span_s = end_s if end_s > 0 and math.isfinite(end_s) else 1.0
        out: dict[str, dict[str, float]] = {}
        for k, stage in enumerate(names):
            mine = row_stage == k
            if not mine.any():
                continue
            rows = np.flatnonzero(mine & has_prev)
            area = float(np.cumsum(lengths[prev[rows]] * (times[rows] - times[prev[rows]]))[-1]) \
                if rows.size else None
            for slot in dict.fromkeys(slots[mine].tolist()):  # the stage's slots, first reports first
                last = np.flatnonzero(slots == slot)[-1]
                tail = int(lengths[last]) * max(0.0, end_s - float(times[last]))
                area = tail if area is None else area + tail
            out[stage] = {"mean": (0.0 if area is None else area) / span_s,
                          "max": float(int(lengths[mine].max()))}
        return out
