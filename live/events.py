"""What workers tell the front end: typed events, and the record fields a request collects.

Each event is a frozen dataclass of its own (:data:`Event` is their union),
so the ledger dispatches on the type and a misspelt field fails where the
event is built, not when the front end reads it. The fields events share
(the sending ``worker``, the ``request_id`` an event is about) sit in private
base classes; the ledger dispatches on the exact type, so a base is never an
event of its own. :class:`Stamps` holds the
record fields a request collects on its way through the stages (``None``:
not stamped yet); it travels with the request's data and comes back whole in
:class:`Done`, because events from different processes may arrive in any
order. Times are absolute ``time.monotonic()`` readings; the ledger
subtracts the trial start (:meth:`Stamps.merge_into`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from easerve_core.request import Record

WorkerId = tuple[str, int]  # (group, index): ("encode", 0), ("prefill", 1), ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Stamps:
    """The record fields stamped so far (see the module docstring)."""

    encode_start_s: float | None = None
    encode_end_s: float | None = None
    encode_batch_size: int | None = None
    encode_worker: int | None = None
    mm_tokens: int | None = None
    route: str | None = None
    prefill_worker: int | None = None
    prefill_start_s: float | None = None
    first_token_s: float | None = None
    decode_worker: int | None = None

    def with_(self, **changes: Any) -> Stamps:
        """These stamps with ``changes`` (field names of this class) set."""
        return replace(self, **changes)

    def merge_into(self, rec: Record, t0: float) -> None:
        """Write the fields stamped here into ``rec``; times become seconds after ``t0``."""
        if self.encode_start_s is not None:
            rec.encode_start_s = float(self.encode_start_s) - t0
        if self.encode_end_s is not None:
            rec.encode_end_s = float(self.encode_end_s) - t0
        if self.encode_batch_size is not None:
            rec.encode_batch_size = int(self.encode_batch_size)
        if self.encode_worker is not None:
            rec.encode_worker = int(self.encode_worker)
        if self.mm_tokens is not None:
            rec.mm_tokens = int(self.mm_tokens)
        if self.route is not None:
            rec.route = self.route
        if self.prefill_worker is not None:
            rec.prefill_worker = int(self.prefill_worker)
        if self.prefill_start_s is not None:
            rec.prefill_start_s = float(self.prefill_start_s) - t0
        if self.first_token_s is not None:
            rec.first_token_s = float(self.first_token_s) - t0
        if self.decode_worker is not None:
            rec.decode_worker = int(self.decode_worker)


@dataclass(frozen=True, slots=True, kw_only=True)
class _FromWorker:
    """What every event carries: the worker that sent it."""

    worker: WorkerId


@dataclass(frozen=True, slots=True, kw_only=True)
class _AboutRequest(_FromWorker):
    """An event about one request."""

    request_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _RequestError(_AboutRequest):
    """A request that ends in ``error``."""

    error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Ready(_FromWorker):
    """The worker loaded its model and warmed up."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Crash(_FromWorker):
    """A worker-level error; the worker is going down."""

    error: str
    trace: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class At(_AboutRequest):
    """The worker received the request."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sent(_AboutRequest):
    """The worker handed the request to ``to``."""

    to: WorkerId


@dataclass(frozen=True, slots=True, kw_only=True)
class Stamped(_AboutRequest):
    """Record fields to merge."""

    stamps: Stamps


@dataclass(frozen=True, slots=True, kw_only=True)
class Done(_AboutRequest):
    """The request finished ok, with every field stamped on its way."""

    finish_s: float
    tokens: tuple[int, ...]
    stamps: Stamps


@dataclass(frozen=True, slots=True, kw_only=True)
class Failed(_RequestError):
    """The request failed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejected(_RequestError):
    """The request was rejected as malformed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Noted(_AboutRequest):
    """Something the run should report about one request (a fall-back route)."""

    why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Retuned(_FromWorker):
    """An encode worker applied the controller's fast knobs (easerve_core.policies.retune)."""

    generation: int
    max_encode_batch: int
    remote_fraction: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StageRow(_FromWorker):
    """One stage-log row: a batch of ``stage`` on worker ``index`` of ``group``."""

    stage: str
    index: int
    group: str
    start_s: float
    end_s: float
    batch_size: int
    tokens: int
    sm_share: float

    def row(self, t0: float) -> dict[str, Any]:
        """The row as the stage log holds it, times in seconds after ``t0``."""
        return {"stage": self.stage, "worker": self.index, "group": self.group,
                "start_s": float(self.start_s) - t0, "end_s": float(self.end_s) - t0,
                "batch_size": self.batch_size, "tokens": self.tokens, "sm_share": self.sm_share}


Event = Ready | Crash | At | Sent | Stamped | Done | Failed | Rejected | Noted | Retuned | StageRow
#: every event type, in the order the ledger documents them
EVENT_TYPES: tuple[type, ...] = (Ready, Crash, At, Sent, Stamped, Done, Failed, Rejected, Noted, Retuned,
                                 StageRow)
