"""The simulator's result: a :class:`~easerve_core.result.RunResult` plus queue lengths.

:class:`SimResult` adds ``queues`` (``time_s, stage, worker, length``, a step
function per stage and worker: requests waiting, not running) to the shared
result type; ``runtime.results.write_result`` writes it as ``queues.parquet``
beside the shared files (one of :meth:`SimResult.frames`). :func:`collect`
turns the run's record table and recorder into one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from easerve_core.result import RunResult, empty_frame
from sim.job import RecordTable
from sim.recorder import QUEUE_COLUMNS, Recorder


@dataclass(frozen=True, slots=True, kw_only=True)
class SimResult(RunResult):
    """A run result with the per-stage queue lengths over time."""

    queues: pd.DataFrame = field(default_factory=lambda: empty_frame(QUEUE_COLUMNS))

    def frames(self) -> dict[str, pd.DataFrame]:
        """The shared tables and ``queues``."""
        return {**RunResult.frames(self), "queues": self.queues}


def collect(records: RecordTable, recorder: Recorder, *, config: Mapping[str, Any],
            meta: Mapping[str, Any]) -> SimResult:
    return SimResult(
        records=records.frame(),
        utilization=recorder.utilization_frame(),
        stage_log=recorder.stage_frame(),
        queues=recorder.queue_frame(),
        config=dict(config),
        engine="sim",
        meta=dict(meta),
    )
