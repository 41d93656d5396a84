"""The online controller on four traffic shapes, for each paper model.

docs/controller.md, "Evaluation: four traffic shapes on the three paper models".

Beyond the rate shift: each model's cluster is offered four shapes of
traffic over one timeline ``T`` (:func:`shapes`), around a mean rate ``m``
that is two thirds of what the screen says the model's best allocation
carries (:func:`screened_capacity_hz`), so each shape's peak, ``1.5 m``, is
at that capacity:

* ``step``: ``0.5 m`` until ``T / 2``, then ``1.5 m``;
* ``spike``: ``0.5 m``, and ``1.5 m`` from ``T / 3`` for ``T / 6``;
* ``diurnal``: ``m (1 + 0.5 sin(2 pi t / T))``, one period;
* ``drift``: linear from ``0.5 m`` at 0 to ``1.5 m`` at ``T``.

Each model's plan table is HAS at ``0.5 m``, ``m`` and ``1.5 m``, searched
on streams ``T / 4`` long and cross-checked on fresh ones
(:func:`~easerve.experiments.plan_tables.phase_plan_table`,
:func:`~easerve.experiments.plan_tables.cross_checked_table`); the four
systems are :func:`~easerve.experiments.shift_control.four_systems`': the
static ones on HAS's own choices at ``m`` and ``1.5 m``, the oracle and the
controller on the cross-checked table. A shape's phases, the oracle's
script, are the runs of 5 s grid times that the table plans for with one
band; "high" requests arrive while the offered rate is above ``m``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from easerve.experiments.plan_tables import cross_checked_table, phase_plan_table
from easerve.experiments.setup import Setup
from easerve.experiments.shift_control import Traffic, four_systems
from easerve_core.has.screen import screen
from easerve_core.rate_search import GeometricBisection, find_capacity
from easerve_core.workload import generate
from easerve_core.workload.shapes import DriftArrivals, SineArrivals, SpikeArrivals, StepArrivals
from runtime.parallel import IN_PROCESS, Backend

SHAPE_NAMES = ("step", "spike", "diurnal", "drift")
#: the shapes' rates as multiples of the mean: the plan table's bands
BAND_MULTIPLES = (0.5, 1.0, 1.5)


def shapes(mean_rate_hz: float, timeline_s: float) -> dict[str, Any]:
    """The four arrival shapes (module docstring) around ``mean_rate_hz`` over ``timeline_s``."""
    m, t = mean_rate_hz, timeline_s
    return {
        "step": StepArrivals(rate_before_hz=0.5 * m, rate_after_hz=1.5 * m, at_s=t / 2),
        "spike": SpikeArrivals(rate_hz=0.5 * m, spike_rate_hz=1.5 * m, start_s=t / 3, duration_s=t / 6),
        "diurnal": SineArrivals(rate_hz=m, amplitude_frac=0.5, period_s=t),
        "drift": DriftArrivals(start_rate_hz=0.5 * m, end_rate_hz=1.5 * m, duration_s=t),
    }


#: the bracket :func:`screened_capacity_hz` bisects, req/s: its ends are taken as carried and not
SCREEN_BRACKET_HZ = (1e-3, 1e3)


def screened_capacity_hz(setup: Setup, *, tier: str = "moderate", steps: int = 40) -> float:
    """The highest rate some allocation carries by the screen (its weakest stage, the typical
    request, no queueing: optimistic), by ``steps`` geometric bisections of
    :data:`SCREEN_BRACKET_HZ` on the screen's verdict
    (:class:`~easerve_core.rate_search.GeometricBisection`)."""
    def carried(rate_hz: float) -> bool:
        try:
            screen(setup.profile, setup.plan.cluster, setup.mix, rate_hz=rate_hz, slo=setup.slos[tier])
        except ValueError:
            return False
        return True

    search = GeometricBisection(*SCREEN_BRACKET_HZ, num_steps=steps)
    return find_capacity(search, carried).capacity_hz


def controller_shapes(setups: Mapping[str, Setup], *, timeline_s: float, trials: int,
                      num_samples: int = 1, seed: int = 0, bin_s: float | None = None,
                      backend: Backend = IN_PROCESS) -> dict[str, pd.DataFrame]:
    """Every model of ``setups`` on every shape: ``systems`` and ``phases`` (as
    :func:`~easerve.experiments.shift_control.four_systems`' with ``modality``, ``mean_rate_hz``
    and ``shape`` columns), ``bins``, ``decisions`` and ``plan_tables`` (each model's
    cross-check scores)."""
    segment_s = timeline_s / 4
    frames: dict[str, list[pd.DataFrame]] = {k: [] for k in ("systems", "phases", "bins", "decisions",
                                                             "plan_tables")}
    for modality, setup in setups.items():
        mean = round(2.0 / 3.0 * screened_capacity_hz(setup), 2)
        rates = tuple(mean * f for f in BAND_MULTIPLES)
        has_table = phase_plan_table(setup, rates, segment_s=segment_s, trials=trials,
                                     num_samples=num_samples, seed=seed, backend=backend)
        table, scores = cross_checked_table(setup, has_table, segment_s=segment_s)
        labels = {"modality": modality, "mean_rate_hz": mean}
        frames["plan_tables"].append(scores.assign(**labels))
        for name, shape in shapes(mean, timeline_s).items():
            n = max(1, round(float(shape.cumulative(np.array([timeline_s]))[0])))
            spec = replace(setup.workload, num_requests=n, arrivals=shape)
            requests = tuple(generate(spec, np.random.default_rng(seed)))
            traffic = Traffic(shape.rate_at, mean, mean * max(BAND_MULTIPLES))
            out = four_systems(setup, table, requests, traffic, has_table=has_table, seed=seed,
                               bin_s=bin_s or timeline_s / 24, backend=backend)
            for key, frame in out.items():
                frames[key].append(frame.assign(**labels, shape=name))
    return {k: pd.concat(v, ignore_index=True) for k, v in frames.items()}
