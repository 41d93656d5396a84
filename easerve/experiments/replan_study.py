"""What-if: the rate shift's controller re-planning with the simulator in the loop.

The table controller reads bands HAS planned before the run. Here the
controller plans them during the run (:class:`~easerve_core.replan.ReplanningController`):
bands every ``step_hz`` req/s up to the shift's peak, each planned the first
time the controller needs it by :class:`HASPlanner`, HAS on the simulator at
the band's rate with the run's budget on streams one segment long (as
:func:`~easerve.experiments.plan_tables.phase_plan_table` plans a band; no
cross-check: a planner in the loop sees one rate at a time). The run is the
rate-shift study's own stream (:func:`~easerve.experiments.shift_control.controller_shift`'s
requests), so its row, ``controller/replan``, stands beside the four
systems'. Planning takes no simulated time; ``planned`` gives each band's
search in wall seconds on this machine, to set against the controller's
``settle_s``, inside which a real deployment would have to plan.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pandas as pd

from easerve.experiments.choose import choose
from easerve.experiments.plan_tables import segment_goodput, segment_requests
from easerve.experiments.setup import Setup
from easerve.experiments.shift_control import shift_stream, simulate_system, system_rows
from easerve_core import Deployment
from easerve_core.controller import Band, ControllerSettings, PlanTable
from easerve_core.replan import ReplanningController

SYSTEM = "controller/replan"


class HASPlanner:
    """HAS on the simulator at a band's rate (:func:`~easerve.experiments.choose.choose`,
    ``trials`` TPE trials on ``num_samples`` streams ``rate x segment_s`` long), logging each
    search: rate, HAS's find, the deployment answered, its rate hint, wall seconds.

    With ``cross_check``, the cross-check run online: HAS's find and every deployment answered
    before, each told (its batcher's rate hint) every rate asked so far, as the table's
    cross-check tells its candidates every band's rate, are scored at the band's rate
    (:func:`~easerve.experiments.plan_tables.segment_goodput`, fresh streams one segment long);
    among those within ``tie_frac`` of the best, the one that scores best at the highest rate
    asked so far wins (headroom for a controller that reacts late; then HAS's find). Without
    it the answer is HAS's find.
    """

    def __init__(self, setup: Setup, *, segment_s: float, trials: int, num_samples: int = 1,
                 seed: int = 0, cross_check: bool = False, tie_frac: float = 0.02) -> None:
        self.setup, self.segment_s, self.trials = setup, segment_s, trials
        self.num_samples, self.seed = num_samples, seed
        self.cross_check, self.tie_frac = cross_check, tie_frac
        self.log: list[dict[str, Any]] = []
        self._answered: list[Deployment] = []
        self._scores: dict[tuple[Deployment, float], float] = {}  # a score is seeded: kept

    def __call__(self, rate_hz: float) -> Deployment:
        start = time.perf_counter()
        found = choose(self.setup, rate_hz=rate_hz, trials=self.trials, seed=self.seed,
                       num_samples=self.num_samples,
                       num_requests=segment_requests(rate_hz, self.segment_s)).deployment
        answer = self._check(found, rate_hz) if self.cross_check else found
        if answer not in self._answered:
            self._answered.append(answer)
        self.log.append({"rate_hz": rate_hz, "found": found.label(), "deployment": answer.label(),
                         "told_hz": answer.rate_hint_hz, "wall_s": time.perf_counter() - start})
        return answer

    def _check(self, found: Deployment, rate_hz: float) -> Deployment:
        rates = list(dict.fromkeys([*(row["rate_hz"] for row in self.log), rate_hz]))
        candidates = list(dict.fromkeys(
            told for d in [*self._answered, found]
            for told in ([d] if d.rate_hint_hz is None else [d.with_(rate_hint_hz=r) for r in rates])))
        if len(candidates) == 1:
            return found
        score = self._score
        scores = [score(d, rate_hz) for d in candidates]
        top = max(scores)
        tied = [d for d, v in zip(candidates, scores, strict=True) if v >= top - self.tie_frac * abs(top)]
        if len(tied) == 1:
            return tied[0]
        peak = max([rate_hz, *(row["rate_hz"] for row in self.log)])
        return max(tied, key=lambda d: (score(d, peak), d == found))

    def _score(self, deployment: Deployment, rate_hz: float) -> float:
        """:func:`~easerve.experiments.plan_tables.segment_goodput`, each (deployment, rate) once."""
        key = (deployment, rate_hz)
        if key not in self._scores:
            self._scores[key] = segment_goodput(self.setup, deployment, rate_hz, segment_s=self.segment_s)
        return self._scores[key]


def replan_shift(setup: Setup, *, mean_rate_hz: float, timeline_s: float, trials: int,
                 num_samples: int = 1, shape: Sequence[float] = (0.5, 1.5, 0.5, 1.5),
                 step_hz: float = 0.5, cross_check: bool = False, seed: int = 0,
                 settings: ControllerSettings | None = None) -> dict[str, pd.DataFrame]:
    """The rate shift (``mean_rate_hz x timeline_s`` requests, one segment per ``shape``
    multiple) run by the controller that plans in the loop: :func:`four_systems`' frames for
    its one row (``systems``, ``phases``, ``bins``, ``decisions``; system ``controller/replan``,
    ``controller/replan+check`` with ``cross_check``) and ``planned``, its planner's searches in
    the order they ran."""
    segment_s = timeline_s / len(shape)
    requests, traffic = shift_stream(setup, mean_rate_hz=mean_rate_hz,
                                     num_requests=int(mean_rate_hz * timeline_s), segment_s=segment_s,
                                     shape=shape, seed=seed)
    planner = HASPlanner(setup, segment_s=segment_s, trials=trials, num_samples=num_samples,
                         cross_check=cross_check)
    controller = ReplanningController(planner, step_hz=step_hz, max_rate_hz=traffic.peak_rate_hz,
                                      start_rate_hz=mean_rate_hz, settings=settings)
    start = controller.table.bands[0].deployment
    result = simulate_system(setup, start, requests, controller, seed=seed)
    # the phases the other systems' rows are read over: runs of one band, here of the grid's bands
    grid = PlanTable(tuple(Band(rate_hz=r, deployment=start) for r in controller.grid))
    phases = traffic.phases(grid, max(r.arrival_s for r in requests))
    name = f"{SYSTEM}+check" if cross_check else SYSTEM
    rows = system_rows(name, result, setup, start, traffic, phases, bin_s=segment_s / 6)
    frames = {key: pd.DataFrame(value) for key, value in rows.items()}
    frames["planned"] = pd.DataFrame(planner.log).assign(system=name)
    return frames
