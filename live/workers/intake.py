"""The encode worker's receive loop, apart from its process: one message, one offer, one poll.

:class:`IntakeLoop` is the control flow of a live encode worker
(:mod:`live.workers.encode`), written against injected callables so it runs
the same under a real timer and a scripted one (the sim/live parity test,
tests/parity). One iteration: wait for the next message until the batcher's
deadline (at most ``poll_s``), offer a request as it is taken (``admit``),
poll the batcher at the current time, and run a closed batch at once
(``run_batch``, which blocks: the worker takes no request while it encodes,
so requests that arrive meanwhile queue and are offered, one by one, when
the batch ends; the simulator's ``encode_intake_blocking`` mirrors this).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from easerve_core.batcher import Batch, Batcher

#: ``get(timeout_s)``: the next message, ``...`` when none came in time, ``None`` to stop
Get = Callable[[float], Any]


class IntakeLoop:
    """The encode worker's receive-offer-poll-run loop (see the module docstring)."""

    def __init__(self, batcher: Batcher[Any], *, clock: Callable[[], float], poll_s: float,
                 is_request: Callable[[Any], bool]) -> None:
        self.batcher = batcher
        self.clock = clock
        self.poll_s = poll_s
        self.is_request = is_request

    def wait_s(self) -> float:
        """How long the next receive may block: until the batcher's deadline, at most ``poll_s``."""
        deadline = self.batcher.next_deadline()
        return self.poll_s if deadline is None else min(self.poll_s, max(0.0, deadline - self.clock()))

    def run(self, get: Get, admit: Callable[[Any, float], Batch[Any] | None],
            run_batch: Callable[[Batch[Any]], None], reap: Callable[[], None] = lambda: None,
            control: Callable[[Any], None] = lambda msg: None) -> None:
        """Loop until ``get`` says stop; ``admit(msg, now)`` offers a request and may close a batch;
        any other message (not ``...``) goes to ``control``."""
        while True:
            reap()
            msg = get(self.wait_s())
            if msg is None:
                return
            if self.is_request(msg):
                batch = admit(msg, self.clock())
            else:
                batch = None
                if msg is not ...:
                    control(msg)
            batch = batch or self.batcher.poll(self.clock())
            if batch is not None:
                run_batch(batch)
