"""One reader's queues, one per writer: a dead writer cannot block the others.

A ``multiprocessing`` queue serialises its writers with a lock shared across
processes. A writer killed while it holds that lock (SIGKILL during a put: an
OOM kill, a test's fault injection) leaves it held forever, and every other
process writing to that queue blocks: the trial hangs until its timeout. So
every channel of a trial has one queue per writer, and its reader polls them
all (:class:`FanIn`). A dead writer then only abandons its own queue. Small
messages (events, acks, most hand-offs) are written in one pipe write of at
most ``PIPE_BUF`` bytes, which is atomic, so a dead writer does not leave
half a message behind either.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterable
from multiprocessing.connection import wait
from typing import Any

WriterId = tuple[str, int]


class FanIn:
    """Queues from many writers to one reader, with ``put``, ``get`` and ``get_nowait``.

    Args:
        ctx: the multiprocessing context that makes the queues.
        writers: every process that may write to this reader.
    """

    def __init__(self, ctx: Any, writers: Iterable[WriterId]) -> None:
        self.queues: dict[WriterId, Any] = {w: ctx.Queue() for w in writers}
        self._order = list(self.queues)
        self._next = 0

    def only(self, writers: Iterable[WriterId]) -> FanIn:
        """The same queues, only ``writers``' (what a process writing as them needs to be handed)."""
        view = FanIn.__new__(FanIn)
        view.queues = {w: self.queues[w] for w in writers if w in self.queues}
        view._order = list(view.queues)
        view._next = 0
        return view

    def put(self, writer: WriterId, item: Any) -> None:
        self.queues[writer].put(item)

    def get_nowait(self) -> Any:
        """An item from the next writer that has one (round robin), else ``queue.Empty``."""
        n = len(self._order)
        for i in range(n):
            writer = self._order[(self._next + i) % n]
            try:
                item = self.queues[writer].get_nowait()
            except queue.Empty:
                continue
            self._next = (self._next + i + 1) % n
            return item
        raise queue.Empty

    def get(self, timeout: float | None = None) -> Any:
        """The next item, waiting up to ``timeout`` seconds (forever if None)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        # The queues' pipe ends: waiting on them is the only way to sleep until any
        # of several multiprocessing queues has data.
        readers = [q._reader for q in self.queues.values()]
        while True:
            try:
                return self.get_nowait()
            except queue.Empty:
                pass
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise queue.Empty
            wait(readers, timeout=remaining)

    def close(self) -> None:
        for q in self.queues.values():
            q.close()
            q.cancel_join_thread()
