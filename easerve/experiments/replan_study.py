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

from calibration.reconfig import ReconfigurationCost
from easerve.experiments.choose import choose
from easerve.experiments.plan_tables import segment_requests
from easerve.experiments.setup import Arrivals, Setup, requests_for
from easerve.experiments.shift_control import Segments, Traffic, system_rows
from easerve_core import Deployment
from easerve_core.controller import Band, ControllerSettings, PlanTable
from easerve_core.plan import replan
from easerve_core.replan import ReplanningController
from sim import simulate

SYSTEM = "controller/replan"


class HASPlanner:
    """HAS on the simulator at a band's rate (:func:`~easerve.experiments.choose.choose`,
    ``trials`` TPE trials on ``num_samples`` streams ``rate x segment_s`` long), logging each
    search: rate, deployment, rate hint, wall seconds."""

    def __init__(self, setup: Setup, *, segment_s: float, trials: int, num_samples: int = 1,
                 seed: int = 0) -> None:
        self.setup, self.segment_s, self.trials = setup, segment_s, trials
        self.num_samples, self.seed = num_samples, seed
        self.log: list[dict[str, Any]] = []

    def __call__(self, rate_hz: float) -> Deployment:
        start = time.perf_counter()
        choice = choose(self.setup, rate_hz=rate_hz, trials=self.trials, seed=self.seed,
                        num_samples=self.num_samples,
                        num_requests=segment_requests(rate_hz, self.segment_s))
        self.log.append({"rate_hz": rate_hz, "deployment": choice.deployment.label(),
                         "told_hz": choice.deployment.rate_hint_hz,
                         "wall_s": time.perf_counter() - start})
        return choice.deployment


def replan_shift(setup: Setup, *, mean_rate_hz: float, timeline_s: float, trials: int,
                 num_samples: int = 1, shape: Sequence[float] = (0.5, 1.5, 0.5, 1.5),
                 step_hz: float = 0.5, seed: int = 0,
                 settings: ControllerSettings | None = None) -> dict[str, pd.DataFrame]:
    """The rate shift (``mean_rate_hz x timeline_s`` requests, one segment per ``shape``
    multiple) run by the controller that plans in the loop: :func:`four_systems`' frames for
    its one row (``systems``, ``phases``, ``bins``, ``decisions``) and ``planned``, its
    planner's searches in the order they ran."""
    segment_s = timeline_s / len(shape)
    schedule = tuple((segment_s, mean_rate_hz * f) for f in shape)
    requests = tuple(requests_for(setup, mean_rate_hz, int(mean_rate_hz * timeline_s), seed,
                                  Arrivals(schedule=schedule)))
    traffic = Traffic(Segments(segment_s, tuple(r for _, r in schedule)).rate_at, mean_rate_hz,
                      mean_rate_hz * max(shape))
    planner = HASPlanner(setup, segment_s=segment_s, trials=trials, num_samples=num_samples)
    controller = ReplanningController(planner, step_hz=step_hz, max_rate_hz=traffic.peak_rate_hz,
                                      start_rate_hz=mean_rate_hz, settings=settings)
    start = controller.table.bands[0].deployment
    plan = replan(setup.plan, setup.profile, deployment=start, preset="easerve", requests=requests,
                  seed=seed)
    result = simulate(plan, setup.profile, controller=controller,
                      reconfiguration_s=ReconfigurationCost(setup.plan.model, setup.plan.cluster.gpu))
    # the phases the other systems' rows are read over: runs of one band, here of the grid's bands
    grid = PlanTable(tuple(Band(rate_hz=r, deployment=start) for r in controller.grid))
    phases = traffic.phases(grid, max(r.arrival_s for r in requests))
    rows = system_rows(SYSTEM, result, setup, start, traffic, phases, bin_s=segment_s / 6)
    frames = {key: pd.DataFrame(value) for key, value in rows.items()}
    frames["planned"] = pd.DataFrame(planner.log)
    return frames
