"""The SM-share table following the workload: a schedule of tables, applied to every encode worker.

A run's SM-share table (:mod:`easerve_core.sm_share`) is derived for one
typical item size; on a shift whose mix changes (images, then 16-frame
videos) one table for the whole run is the first mix's. With a schedule
``((at_s, table), ...)`` (:func:`sim.simulate`'s ``sm_tables``) every encode
worker, serving or draining, runs on ``table`` from its next batch after
``at_s``, and every worker built later (a controller's re-role) starts on it:
the table is a fast knob an operator re-derives from the mix it observes, as
the controller retunes B and s (docs/controller.md, issue 33's last section).
An empty schedule changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from easerve_core.sm_share import SMShareTable
from sim.build import WorkerKit
from sim.clock import SimEnvironment
from sim.encode import EncodeWorker
from sim.roster import Roster


def follow(env: SimEnvironment, schedule: Sequence[tuple[float, SMShareTable]], kit: WorkerKit | None,
           front: Sequence[Any], roster: Roster | None) -> None:
    """At each ``at_s`` of ``schedule`` (>= now), ``table`` on every encode worker (``front``'s
    in a static run, ``roster``'s serving and draining ones with a controller) and on the workers
    ``kit`` builds from then on."""
    if kit is None:
        raise ValueError("sm_tables: an aggregated run has no encode workers to retable")
    for at_s, table in schedule:
        if at_s < env.now:
            raise ValueError(f"sm_tables: a table at {at_s!r} s is before the run's start")

        def apply(_call: Any, table: SMShareTable = table, kit: WorkerKit = kit) -> None:
            kit.table = table
            for worker in _encoders(front, roster):
                worker.gpu.retable(table)

        env.call_later(at_s - env.now, apply)


def _encoders(front: Sequence[Any], roster: Roster | None) -> list[EncodeWorker]:
    if roster is None:
        return [w for w in front if isinstance(w, EncodeWorker)]
    return [*roster.encoders, *(w for w in roster.draining if isinstance(w, EncodeWorker))]
