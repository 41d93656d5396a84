"""The evaluation's tables do not depend on the backend or its number of workers.

A small goodput sweep (with HAS choosing EAServe's deployment per rate, and
the request-at-a-time baseline's under the same budget, the choices made in
parallel) and a small HAS-convergence study run in this
process, on two local workers and on two Ray jobs (where Ray is
installed); their CSVs are byte-identical. Each row's seed is its point's
own: a row equals the same point simulated alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO

import pandas as pd
import pytest

from easerve.experiments.choose import convergence
from easerve.experiments.headline import Chooser
from easerve.experiments.points import Point, summarise
from easerve.experiments.reproduce import EvalSize
from easerve.experiments.setup import Setup, load_setup
from easerve.experiments.sweep import Scale, goodput_sweep
from runtime.parallel import IN_PROCESS, Backend
from tests.backends import PARALLEL_PARAMS, open_for

SCALE = Scale(num_requests=40, rates_hz=(0.5, 2.0), num_seeds=2, timeline_s=60.0, refine_levels=1)
PLAN = EvalSize(scale=SCALE, has_trials=3, has_requests=30, convergence_seeds=(0, 1))


@pytest.fixture(scope="module")
def audio() -> Setup:
    return load_setup("audio", anchored=True)


@pytest.fixture(scope="module", params=PARALLEL_PARAMS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    yield from open_for(request, request.param)


def _sweep(setup: Setup, backend: Backend) -> tuple[str, str]:
    setups = {"audio": setup}
    chooser = Chooser(setups, PLAN, backend)
    sweep = goodput_sweep(setups, chooser.deployment_for(), SCALE, systems=("easerve", "dynamo"),
                                  backend=backend, prepare=chooser.prepare)
    return sweep.to_csv(index=False), chooser.table(("easerve", "dynamo")).to_csv(index=False)


@pytest.fixture(scope="module")
def serial_sweep(audio: Setup) -> tuple[str, str]:
    return _sweep(audio, IN_PROCESS)


def test_a_sweep_and_its_has_choices_are_byte_identical_on_every_backend(
        audio: Setup, backend: Backend, serial_sweep: tuple[str, str]) -> None:
    assert _sweep(audio, backend) == serial_sweep


def test_seeds_belong_to_points_not_workers(audio: Setup, serial_sweep: tuple[str, str]) -> None:
    sweep = pd.read_csv(StringIO(serial_sweep[0]))
    per_rate = sweep.groupby(["system", "rate_hz"])["seed"].apply(list)
    assert all(seeds == [0, 1] for seeds in per_rate)
    row = sweep[(sweep["system"] == "dynamo") & (sweep["rate_hz"] == 2.0) & (sweep["seed"] == 1)]
    tuned = Chooser({"audio": audio}, PLAN)("audio", 2.0, "dynamo").deployment  # made again, alone
    alone = summarise(Point.of(audio, tuned, rate_hz=2.0, num_requests=SCALE.num_requests, seed=1,
                               preset="dynamo"))
    assert row["goodput_moderate_rps"].item() == alone["goodput_moderate_rps"]
    assert row["ttft_p99_s"].item() == alone["ttft_p99_s"]


def _convergence(setup: Setup, backend: Backend) -> tuple[str, float]:
    frame, best = convergence(setup, rate_hz=1.0, trials=3, seeds=(0, 1), num_requests=30, backend=backend)
    return frame.to_csv(index=False), best


@pytest.fixture(scope="module")
def video() -> Setup:
    return load_setup("video", anchored=True)  # the smallest grid: 72 points


def test_has_convergence_is_byte_identical_on_every_backend(video: Setup, backend: Backend) -> None:
    assert _convergence(video, backend) == _convergence(video, IN_PROCESS)
