"""The evaluation's unit of work as a value: one simulation, and what travels to a worker.

A :class:`Point` is everything one simulation of a study needs: the setup
(plan, profile, SLOs), the deployment, the arrival rate, request count,
arrivals, preset, its own seed, and the labels of its table row. The
studies (:mod:`easerve.experiments.studies`) build their points, map
:func:`summarise` over them on a backend (:mod:`runtime.parallel`) and
assemble the rows in the points' order, so a table is the same whichever
backend and however many workers ran it: a point's seed is its own, never
a worker's, and only the point (pickled dataclasses: plan, profile,
deployment) and its row (a dict) cross the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from easerve.experiments.setup import Arrivals, Setup, run, summary_row
from easerve_core import Deployment
from sim.result import SimResult


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """One simulation of ``deployment`` under ``preset`` at ``rate_hz`` (see the module docstring)."""

    setup: Setup
    deployment: Deployment
    rate_hz: float
    num_requests: int
    seed: int = 0
    preset: str = "easerve"
    arrivals: Arrivals = field(default_factory=Arrivals)
    #: the row's leading columns, in order
    labels: tuple[tuple[str, Any], ...] = ()
    #: keep the deployment's own rate hint (:func:`~easerve.experiments.setup.plan_of`)
    keep_hint: bool = False

    @classmethod
    def of(cls, setup: Setup, deployment: Deployment, *, labels: Mapping[str, Any] | None = None,
           **run_args: Any) -> Point:
        return cls(setup=setup, deployment=deployment, labels=tuple((labels or {}).items()), **run_args)

    def simulate(self) -> SimResult:
        return run(self.setup, self.deployment, rate_hz=self.rate_hz, num_requests=self.num_requests,
                   seed=self.seed, preset=self.preset, arrivals=self.arrivals, keep_hint=self.keep_hint)


def summarise(point: Point) -> dict[str, Any]:
    """The point's table row: its labels, then the summary under every tier."""
    return summary_row(point.simulate(), point.setup, **dict(point.labels))
