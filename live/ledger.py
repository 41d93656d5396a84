"""The front end's book of requests: records, who holds what, and the stage log.

Workers report typed events (:mod:`live.events`); the ledger folds them
into one :class:`~easerve_core.request.Record` per request. It also tracks,
per open request, the workers whose death would lose it: the one that holds
it and, while a hand-off is in flight, the one it was sent to. A request
leaves a worker's hands only when the next worker reports ``at`` (events
from different processes may arrive in any order, so a location only moves
forward in stage rank). When a worker dies, every open request it holds
ends ``failed`` with the reason; a request later sent to a dead worker fails
at once. Terminal records never change again.

Pure book-keeping: no processes, no clock reads; times come in events as
absolute monotonic seconds and are stored relative to the trial start.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pandas as pd

from easerve_core.request import Record, Request, Status, records_to_frame
from easerve_core.result import STAGE_LOG_COLUMNS, UTILIZATION_COLUMNS
from live.events import (
    EVENT_TYPES,
    At,
    Crash,
    Done,
    Event,
    Failed,
    Noted,
    Ready,
    Rejected,
    Retuned,
    Sent,
    StageRow,
    Stamped,
    Stamps,
    WorkerId,
)
from live.transport import RANK


def worker_name(worker: WorkerId) -> str:
    return f"{worker[0]} worker {worker[1]}"


class Ledger:
    """Records and hand-off tracking for one trial (see the module docstring)."""

    def __init__(self, requests: Iterable[Request]) -> None:
        self.records: dict[int, Record] = {r.request_id: Record.for_request(r) for r in requests}
        self.tokens: dict[int, list[int]] = {}
        self.stage_rows: list[dict[str, Any]] = []
        self.t0 = math.nan
        self.dead: dict[WorkerId, str] = {}
        self.crashes: dict[WorkerId, str] = {}
        #: what workers reported about single requests (fall-back routes), in arrival order of the reports
        self.notes: list[dict[str, Any]] = []
        #: the encode workers' reports of applied controller decisions
        self.retunes: list[dict[str, Any]] = []
        #: requests that finished (any status) since the front end last took them
        self.settled: list[int] = []
        self._holders: dict[int, dict[WorkerId, int]] = {}
        self._open = set(self.records)
        #: what each event type (live.events.EVENT_TYPES) does to the book
        self._handlers: dict[type, Callable[[Any], None]] = {
            Ready: self._on_ready, At: self._on_at, Sent: self._on_sent,
            Stamped: self._on_stamp, Done: self._on_done, Failed: self._on_fail,
            Rejected: self._on_reject, StageRow: self._on_log, Crash: self._on_crash,
            Noted: self._on_note, Retuned: self._on_retuned,
        }
        assert set(self._handlers) == set(EVENT_TYPES)

    def set_t0(self, t0: float) -> None:
        self.t0 = t0

    @property
    def open_ids(self) -> list[int]:
        return sorted(self._open)

    def issue(self, rid: int, worker: WorkerId) -> None:
        """The front end handed ``rid`` to ``worker``."""
        self._holders[rid] = {worker: RANK[worker[0]]}
        if worker in self.dead:
            self.finish(rid, Status.FAILED, f"sent to {worker_name(worker)}, which died: {self.dead[worker]}")

    def finish(self, rid: int, status: Status, error: str = "") -> None:
        if rid not in self._open:
            return
        rec = self.records[rid]
        if status is Status.OK:
            rec.status, rec.error = Status.OK.value, ""
        else:
            rec.fail(error, status=status)
        self._open.discard(rid)
        self._holders.pop(rid, None)
        self.settled.append(rid)

    @property
    def kinds(self) -> frozenset[type]:
        """The event types :meth:`apply` takes."""
        return frozenset(self._handlers)

    def apply(self, event: Event) -> None:
        handler = self._handlers.get(type(event))
        if handler is None:
            raise ValueError(f"unknown event {type(event).__name__}; known: "
                             f"{', '.join(t.__name__ for t in self._handlers)}")
        handler(event)

    def _on_ready(self, event: Ready) -> None:
        pass

    def _on_crash(self, event: Crash) -> None:
        self.crashes[event.worker] = event.error

    def _on_at(self, event: At) -> None:
        holders = self._holders.get(event.request_id)
        if holders is None:
            return
        rank = RANK[event.worker[0]]
        if rank >= max(holders.values(), default=0):
            self._holders[event.request_id] = {w: r for w, r in holders.items() if r >= rank}
            self._holders[event.request_id][event.worker] = rank

    def _on_sent(self, event: Sent) -> None:
        rid, dest = event.request_id, (str(event.to[0]), int(event.to[1]))
        holders = self._holders.get(rid)
        if holders is None:
            return
        holders[dest] = RANK[dest[0]]
        if dest in self.dead:
            self.finish(rid, Status.FAILED, f"sent to {worker_name(dest)}, which died: {self.dead[dest]}")

    def _on_stamp(self, event: Stamped) -> None:
        self._stamp(event.request_id, event.stamps)

    def _stamp(self, rid: int, stamps: Stamps) -> None:
        """Merge record fields; a finished record still takes late stamps, a failed one not."""
        rec = self.records.get(rid)
        if rec is None or (rid not in self._open and rec.status != Status.OK.value):
            return
        stamps.merge_into(rec, self.t0)

    def _on_done(self, event: Done) -> None:
        rid = event.request_id
        if rid not in self._open:
            return
        self._stamp(rid, event.stamps)
        self.records[rid].finish_s = float(event.finish_s) - self.t0
        self.tokens[rid] = list(event.tokens)
        self.finish(rid, Status.OK)

    def _on_fail(self, event: Failed) -> None:
        self.finish(event.request_id, Status.FAILED, event.error)

    def _on_reject(self, event: Rejected) -> None:
        self.finish(event.request_id, Status.REJECTED, event.error)

    def _on_retuned(self, event: Retuned) -> None:
        self.retunes.append({"worker": list(event.worker), "generation": event.generation,
                             "max_encode_batch": event.max_encode_batch,
                             "remote_fraction": event.remote_fraction})

    def _on_note(self, event: Noted) -> None:
        self.notes.append({"request_id": event.request_id, "why": event.why})

    def _on_log(self, event: StageRow) -> None:
        self.stage_rows.append(event.row(self.t0))

    def worker_died(self, worker: WorkerId, exitcode: int | None) -> list[int]:
        """Mark ``worker`` dead; fail and return the open requests it held."""
        reason = f"exit code {exitcode}"
        if worker in self.crashes:
            reason += f"; {self.crashes[worker]}"
        self.dead[worker] = reason
        lost = [rid for rid in self.open_ids if worker in self._holders.get(rid, {})]
        for rid in lost:
            self.finish(rid, Status.FAILED, f"{worker_name(worker)} died ({reason})")
        return lost

    def fail_open(self, error: str) -> None:
        for rid in self.open_ids:
            self.finish(rid, Status.FAILED, error)

    def records_frame(self) -> pd.DataFrame:
        return records_to_frame(self.records.values())

    def stage_log(self) -> pd.DataFrame:
        cols = [*STAGE_LOG_COLUMNS, "group"]
        frame = pd.DataFrame(self.stage_rows, columns=cols)
        for col, dtype in STAGE_LOG_COLUMNS.items():
            frame[col] = frame[col].astype(dtype)
        frame["group"] = frame["group"].astype("string")
        return frame.sort_values(["start_s", "stage"], kind="stable").reset_index(drop=True)


def utilization(stage_log: pd.DataFrame, workers: Sequence[WorkerId]) -> pd.DataFrame:
    """Busy fraction per worker over time (a step function), from the stage log.

    Column ``gpu`` is the worker's slot in ``workers`` (encode workers first);
    while batches overlap on one worker (Encode beside local Prefill) their
    shares add up, capped at 1.
    """
    rows: list[tuple[float, int, float]] = []
    for slot, (group, index) in enumerate(workers):
        mine = stage_log[(stage_log["group"] == group) & (stage_log["worker"] == index)]
        edges = sorted([(s, sh) for s, sh in zip(mine["start_s"], mine["sm_share"], strict=True)]
                       + [(e, -sh) for e, sh in zip(mine["end_s"], mine["sm_share"], strict=True)])
        rows.append((0.0, slot, 0.0))
        level = 0.0
        for time_s, delta in edges:
            level += delta
            rows.append((float(time_s), slot, min(1.0, max(0.0, level))))
    frame = pd.DataFrame(rows, columns=list(UTILIZATION_COLUMNS))
    return frame.astype(dict(UTILIZATION_COLUMNS))
