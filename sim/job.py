"""Requests in flight and the run's records: slotted jobs while they move, columns once done.

A :class:`Job` is one admitted request between its arrival and its end: its
:class:`~easerve_core.Request`, the sizes the workers ask for again and
again (computed once), and the record's stage fields (DESIGN.md §4.1) that
the workers stamp: NaN for a time not reached, None for a worker or batch
size not known, ``route`` "" until routed. The front dispatcher makes it
when the request arrives; when the request is done, :meth:`RecordTable.write`
keeps its fields as one row of numbers in the run's :class:`RecordTable` and
nothing holds the job any more. So a long run keeps a machine word per
request and field, not an object per request (bench/sim_memory.py), and
:meth:`RecordTable.frame` builds the shared records frame from the rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd

from easerve_core import Request, Status, records_from_columns
from sim.rows import Rows

#: record columns that are times, and those that are a worker or batch size (-1: none)
_TIMES = ("encode_start_s", "encode_end_s", "prefill_start_s", "first_token_s", "finish_s")
_INTS = ("encode_batch_size", "encode_worker", "prefill_worker", "decode_worker")
#: a route's code in the table, and back
_ROUTES = ("", "local", "remote")
_ROUTE_CODE = {route: code for code, route in enumerate(_ROUTES)}
_NAN = math.nan
_UNSCHEDULED: list[int] = []


class Job:
    """One request moving through the model (see the module docstring)."""

    __slots__ = ("admitted", "decode_worker", "decoded", "encode_batch_size", "encode_end_s",
                 "encode_start_s", "encode_worker", "finish_s", "first_token_s", "index", "input_tokens",
                 "items", "kv_tokens", "mm_tokens", "prefill_start_s", "prefill_worker", "req",
                 "resume_s", "route", "sched")

    def __init__(self, req: Request, index: int) -> None:
        self.req = req
        self.index = index  # the request's row in the RecordTable
        self.items = req.encode_items  # what the encoder works on per item (before any pooling)
        self.mm_tokens = sum(req.mm_tokens_per_item)
        self.input_tokens = req.prompt_tokens + self.mm_tokens
        #: KV a decode worker reserves for the whole sequence (no preemption)
        self.kv_tokens = self.input_tokens + req.output_tokens
        self.encode_start_s = self.encode_end_s = math.nan
        self.prefill_start_s = self.first_token_s = self.finish_s = math.nan
        self.encode_batch_size: int | None = None
        self.encode_worker: int | None = None
        self.prefill_worker: int | None = None
        self.decode_worker: int | None = None
        self.route = ""
        #: a step-scheduled engine's progress (sim.chunked): [prefill tokens computed, to
        #: compute, items encoded, output tokens made], and its admission number there
        self.sched: list[int] = _UNSCHEDULED  # an engine gives it its own list first
        self.admitted = -1
        #: a request moved off a draining decoder (sim.roster, ``drain_deadline_s``): the tokens
        #: decode made before, and the recompute its next decoder runs before it decodes on
        self.decoded = 0
        self.resume_s = 0.0


class RecordTable:
    """The records of one run's ``requests`` (see the module docstring).

    Each done job is one row of numbers (:class:`~sim.rows.Rows`): its index, the
    stage times, the workers and batch size (NaN for none) and its route's code;
    :meth:`frame` scatters the rows into one column per record field.
    """

    def __init__(self, requests: Sequence[Request]) -> None:
        self.requests = requests
        self._rows = Rows(2 + len(_TIMES) + len(_INTS))
        self._rejected: dict[int, str] = {}  # row -> why

    def reject(self, index: int, why: str) -> None:
        """Request ``index`` is never served (``status`` rejected, ``error`` why)."""
        self._rejected[index] = why

    def write(self, job: Job) -> None:
        """``job`` is done: keep its fields."""
        size, enc, pre, dec = job.encode_batch_size, job.encode_worker, job.prefill_worker, job.decode_worker
        self._rows.add((job.index, job.encode_start_s, job.encode_end_s, job.prefill_start_s,
                        job.first_token_s, job.finish_s,
                        _NAN if size is None else size, _NAN if enc is None else enc,
                        _NAN if pre is None else pre, _NAN if dec is None else dec,
                        _ROUTE_CODE[job.route]))

    def last_finish_s(self) -> float:
        """The latest finish time (0 when nothing finished)."""
        finish = self._rows.columns()[1 + len(_TIMES) - 1]
        done = finish[~np.isnan(finish)]
        return float(done.max()) if done.size else 0.0

    def frame(self) -> pd.DataFrame:
        """The records frame (:func:`easerve_core.records_from_columns`)."""
        reqs, n = self.requests, len(self.requests)
        columns: dict[str, Any] = {
            name: np.fromiter(map(attrgetter(name), reqs), dtype=dtype, count=n)
            for name, dtype in (("request_id", np.int64), ("arrival_s", np.float64),
                                ("prompt_tokens", np.int64), ("mm_tokens", np.int64),
                                ("output_tokens", np.int64))}
        columns["modality"] = [r.modality.value for r in reqs]
        index, *fields = self._rows.columns()
        rows = index.astype(np.int64)
        for name, values in zip((*_TIMES, *_INTS), fields[:-1], strict=True):
            column = np.full(n, np.nan)
            column[rows] = values
            if name in _INTS:
                missing = np.isnan(column)
                column = pd.arrays.IntegerArray(np.where(missing, -1, column).astype(np.int64), missing)
            columns[name] = column
        routes = np.zeros(n, dtype=np.int64)
        routes[rows] = fields[-1].astype(np.int64)
        columns["route"] = np.asarray(_ROUTES, dtype=object)[routes]
        status, error = [Status.OK.value] * n, [""] * n
        for i, why in self._rejected.items():
            status[i], error[i] = Status.REJECTED.value, why
        columns["status"], columns["error"] = status, error
        return records_from_columns(columns)
