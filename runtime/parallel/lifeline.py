"""Worker processes that die with the process that started them (local pools, the host probes).

A local pool (:class:`~runtime.parallel.backend.LocalPool`: a sweep's
simulations, a HAS search's ``num_workers`` > 1) runs its tasks on spawned
processes. When the driver is killed (``kill -9``, the OOM killer) nothing
tells them: they finish their share of the work, then wait for more on a
queue no one feeds, reparented to PID 1, for ever. Two ties prevent it, both installed by
:func:`die_with_parent`, the pool's ``initializer``:

* a pipe (:func:`lifeline`): the parent holds its only write end, and a
  daemon thread in each worker blocks reading the read end. When the parent
  exits, however it exits, the kernel closes the write end, the read returns
  end-of-file and the thread ends the worker with ``os._exit``. Portable.
* on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the worker
  as its parent dies, even when the worker's interpreter is stuck in C code.
  Linux sends it when the *thread* that started the worker ends, so the
  thread that opens the pool must outlive it (the pool's owner does: it
  waits for the pool to finish).

A HAS worker killed this way leaves its trial RUNNING; the next plain run of
the same study marks it FAIL (:func:`runtime.has.storage.prepare_study`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext

#: exit status of a worker whose parent is gone (EX_SOFTWARE in sysexits.h)
ORPHAN_EXIT_STATUS = 70
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


@contextmanager
def lifeline(ctx: BaseContext) -> Iterator[Connection]:
    """A pipe for the pool's lifetime: yields the read end to pass to :func:`die_with_parent`.

    The write end stays in this process and is closed when the block ends (or
    by the kernel, when this process dies), which ends every worker still alive.
    """
    with lifeline_ends(ctx) as (reader, _):
        yield reader


@contextmanager
def lifeline_ends(ctx: BaseContext) -> Iterator[tuple[Connection, Connection]]:
    """:func:`lifeline`'s pipe, both ends: a forked worker must close its inherited write end."""
    reader, writer = ctx.Pipe(duplex=False)
    try:
        yield reader, writer
    finally:
        writer.close()
        reader.close()


def die_with_parent(reader: Connection) -> None:
    """Pool initializer: end this worker when its parent dies (see the module docstring)."""
    if sys.platform.startswith("linux"):
        _set_parent_death_signal()
    threading.Thread(target=_watch, args=(reader,), name="easerve-lifeline", daemon=True).start()


def _set_parent_death_signal() -> None:
    """Best effort: where prctl is unavailable, the pipe still ends the worker."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _watch(reader: Connection) -> None:
    """Block until the pipe closes (the parent never writes), then exit at once."""
    with suppress(EOFError, OSError):
        reader.recv_bytes()
    os._exit(ORPHAN_EXIT_STATUS)
