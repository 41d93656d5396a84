"""The evaluation's oracle: a controller that follows a script (docs/controller.md, "Evaluation").

Same interface as :class:`easerve_core.controller.Controller`, so an engine
runs either; it knows each phase of a traffic shape in advance.
"""

from __future__ import annotations

import math

from easerve_core import checks
from easerve_core.controller import Decision, PlanTable


class ScriptedController:
    """An oracle: moves to each scripted band at its scripted time, whatever it observes.

    ``schedule`` holds ``(at_s, band)`` pairs in increasing time; at each it
    decides (reason ``script``) unless the band holds the current band's
    deployment (the current band itself included). The
    evaluation's oracle knows each phase of a traffic shape in advance and
    moves at the phase's first instant (it still pays the re-role in the
    phase). Same interface as :class:`Controller`, so an engine runs either.

    ``lead_s`` moves each scripted time that much earlier (not before 0): an
    oracle that knows the re-role time starts each move so that its new
    workers are warm when the phase begins (make-before-break keeps the old
    ones serving meanwhile: docs/controller.md).
    """

    def __init__(self, table: PlanTable, schedule: tuple[tuple[float, int], ...], *,
                 start_band: int = 0, lead_s: float = 0.0) -> None:
        checks.non_negative("lead_s", lead_s)
        times = [checks.non_negative("schedule at_s", float(at)) for at, _ in schedule]
        if times != sorted(times):
            raise ValueError(f"schedule: times must not decrease, got {times}")
        for _, band in schedule:
            if not 0 <= band < len(table.bands):
                raise ValueError(f"schedule: band must be in [0, {len(table.bands)}), got {band!r}")
        if not 0 <= start_band < len(table.bands):
            raise ValueError(f"start_band must be in [0, {len(table.bands)}), got {start_band!r}")
        self.table = table
        self.band = start_band
        self.decisions: list[Decision] = []
        self._schedule = [(max(0.0, float(at) - lead_s), int(band)) for at, band in schedule]
        self._next = 0

    def arrive(self, now: float, weight: float = 1.0) -> None:
        """Not needed: the script is known."""

    def finish(self, now: float, *, met_slo: bool) -> None:
        """Not needed: the script is known."""

    def queue(self, now: float, waiting: int) -> None:
        """Not needed: the script is known."""

    def next_deadline(self) -> float:
        return self._schedule[self._next][0] if self._next < len(self._schedule) else math.inf

    def poll(self, now: float) -> Decision | None:
        """The decision due at ``now``: the last scripted band due, if its deployment is not the
        current band's."""
        band = self.band
        while self._next < len(self._schedule) and self._schedule[self._next][0] <= now:
            band = self._schedule[self._next][1]
            self._next += 1
        chosen = self.table.bands[band]
        if chosen.deployment == self.table.bands[self.band].deployment:
            self.band = band  # nothing to change on the servers (a band of the same deployment too)
            return None
        decision = Decision(at_s=now, from_band=self.band, band=band, rate_hz=chosen.rate_hz,
                            reason="script", deployment=chosen.deployment)
        self.band = band
        self.decisions.append(decision)
        return decision
