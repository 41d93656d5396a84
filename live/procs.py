"""Process plumbing for the front end: read events, stop workers, leave nothing behind.

:func:`stop_workers` asks every worker to stop (a ``None`` in its inbox),
waits ``grace_s`` for them together, then terminates and finally kills any
that remain, and joins them all, so no child outlives a trial. Queues are
closed without waiting on their feeder threads (a dead reader must not hang
the front end's exit).
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Mapping
from typing import Any

from live.events import Event, WorkerId
from live.transport import FRONTEND, Channels, clock


def drain_events(events: Any, timeout_s: float) -> list[Event]:
    """Every event waiting now; blocks up to ``timeout_s`` for the first one."""
    out: list[Event] = []
    try:
        out.append(events.get(timeout=timeout_s) if timeout_s > 0 else events.get_nowait())
        while True:
            out.append(events.get_nowait())
    except queue.Empty:
        pass
    return out


def stop_workers(procs: Mapping[WorkerId, Any], channels: Channels, grace_s: float) -> None:
    for worker, proc in procs.items():
        if proc.exitcode is None:
            with contextlib.suppress(Exception):
                channels.inboxes[worker].put(FRONTEND, None)
    deadline = clock() + grace_s
    for proc in procs.values():
        proc.join(timeout=max(0.0, deadline - clock()))
    for proc in procs.values():
        if proc.exitcode is None:
            proc.terminate()
            proc.join(timeout=1.0)
        if proc.exitcode is None:
            proc.kill()
            proc.join()
    with contextlib.suppress(Exception):
        drain_events(channels.events, 0.0)
    channels.close()
