"""What-if: re-plan with the simulator in the loop, each band planned when the run first needs it.

The :class:`~easerve_core.controller.Controller` reads its bands from a plan
table computed before the run. :class:`ReplanningController` has no table:
its bands are a grid of rates (every ``step_hz`` up to ``max_rate_hz``), and
a band's deployment is asked of an injected planner (rate -> deployment; the
experiments pass HAS on the simulator, :mod:`easerve.experiments.replan_study`)
the first time a rule needs it, then kept. The rules are the controller's,
unchanged (docs/controller.md): the rate estimate, hysteresis against the
band's grid rate, SLO escalation one grid step up, settle, dwell. A band is
planned when it has settled as the target (rule 5 compares its deployment
with the current one), so planning sits inside ``settle_s``; it takes no
simulated time. On a real cluster the planner must finish within the settle;
the evaluation reports the planner's wall time per band beside it.

Band indices (a decision's ``band``, the records' ``controller_band``) are
grid indices; :attr:`table` holds the bands planned so far, in rate order,
and :attr:`planned` the order they were planned in.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable

from easerve_core import checks
from easerve_core.controller import Band, Controller, ControllerSettings, PlanTable
from easerve_core.deployment import Deployment

Planner = Callable[[float], Deployment]
"""Rate in req/s -> the deployment to serve it (deterministic: the same rate, the same answer)."""


def rate_grid(step_hz: float, max_rate_hz: float) -> tuple[float, ...]:
    """``step_hz, 2 step_hz, ...`` up to the first that reaches ``max_rate_hz``."""
    step = checks.positive("replan.step_hz", step_hz)
    top = checks.positive("replan.max_rate_hz", max_rate_hz)
    count = max(1, math.ceil(top / step - 1e-9))
    return tuple(round(step * (i + 1), 9) for i in range(count))


class ReplanningController(Controller):
    """The controller with bands planned in the loop (see the module docstring)."""

    def __init__(self, planner: Planner, *, step_hz: float, max_rate_hz: float, start_rate_hz: float,
                 settings: ControllerSettings | None = None, start_s: float = 0.0) -> None:
        self.grid = rate_grid(step_hz, max_rate_hz)
        self.planned: list[Band] = []
        self._planner = planner
        self._by_band: dict[int, Deployment] = {}
        start = self._band_for(checks.positive("replan.start_rate_hz", start_rate_hz))
        super().__init__(PlanTable((Band(rate_hz=self.grid[start], deployment=planner(self.grid[start])),)),
                         settings, start_s=start_s)
        self._keep(start, self.table.bands[0].deployment)
        self.band = start

    def _num_bands(self) -> int:
        return len(self.grid)

    def _band_rate(self, band: int) -> float:
        return self.grid[band]

    def _band_for(self, rate_hz: float) -> int:
        return min(bisect_left(self.grid, rate_hz), len(self.grid) - 1)

    def _deployment(self, band: int) -> Deployment:
        deployment = self._by_band.get(band)
        if deployment is None:
            deployment = self._planner(self.grid[band])
            if not isinstance(deployment, Deployment):
                raise ValueError(f"replan: the planner gave {type(deployment).__name__} for "
                                 f"{self.grid[band]:g} req/s, not a Deployment")
            self._keep(band, deployment)
        return deployment

    def _keep(self, band: int, deployment: Deployment) -> None:
        self._by_band[band] = deployment
        self.planned.append(Band(rate_hz=self.grid[band], deployment=deployment))
        self.table = PlanTable(tuple(sorted(self.planned, key=lambda b: b.rate_hz)))
