"""A request in flight and its record: what the workers stamp, one slotted object per request.

A :class:`Job` carries its :class:`~easerve_core.Request`, the sizes the
workers ask for again and again (computed once), and the record's stage
fields (DESIGN.md §4.1) as its own attributes: NaN for a time not reached,
None for a worker or batch size not known, ``route`` "" until routed. The
columns the request already holds (id, modality, arrival, token counts) are
read off it at the end. :func:`records_frame` turns the jobs of a run into
the shared records frame column by column, with no row object per request,
so a long run pays a few machine words per request and field.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import pandas as pd

from easerve_core import RECORD_COLUMNS, Request, Status, records_from_columns

#: record columns read off the request, by the attribute path that holds them
_FROM_REQUEST = {"request_id": "req.request_id", "modality": "req.modality.value",
                 "arrival_s": "req.arrival_s", "prompt_tokens": "req.prompt_tokens",
                 "output_tokens": "req.output_tokens"}


class Job:
    """One request moving through the model (see the module docstring)."""

    __slots__ = ("decode_worker", "encode_batch_size", "encode_end_s", "encode_start_s",
                 "encode_worker", "error", "finish_s", "first_token_s", "input_tokens", "items",
                 "kv_tokens", "mm_tokens", "prefill_start_s", "prefill_worker", "req", "route",
                 "status")

    def __init__(self, req: Request) -> None:
        self.req = req
        self.items = req.mm_tokens_per_item
        self.mm_tokens = sum(self.items)
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
        self.status = Status.OK.value
        self.error = ""


def records_frame(jobs: Sequence[Job]) -> pd.DataFrame:
    """The records of ``jobs`` (:func:`easerve_core.records_from_columns`)."""
    columns: dict[str, list[Any]] = {
        name: list(map(attrgetter(_FROM_REQUEST.get(name, name)), jobs)) for name in RECORD_COLUMNS}
    return records_from_columns(columns)
