"""Unstable queues: a growing queue is seen, a loaded but stable one is not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from easerve_core.request import Status
from easerve_core.slo import SLO
from easerve_core.stability import assess


def _fifo(rate_hz: float, service_hz: float, n: int, seed: int, *, exponential: bool = True
          ) -> pd.DataFrame:
    """One FIFO server with Poisson arrivals and exponential (or fixed) service: its records."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / rate_hz, n))
    service = rng.exponential(1 / service_hz, n) if exponential else np.full(n, 1 / service_hz)
    start = np.empty(n)
    free = 0.0
    for i in range(n):
        start[i] = max(free, arrival[i])
        free = start[i] + service[i]
    first = start + service
    return pd.DataFrame({"arrival_s": arrival, "first_token_s": first, "finish_s": first + 0.5,
                         "output_tokens": np.full(n, 11), "status": Status.OK.value})


SLO_ = SLO(ttft_s=5.0, tpot_s=1.0)


SEEDS = range(20)


@pytest.mark.parametrize("busy", [0.8, 0.9])
def test_a_loaded_stable_queue_is_rarely_called_unstable(busy: float) -> None:
    flagged = [assess(_fifo(rate_hz=10.0 * busy, service_hz=10.0, n=2000, seed=s), SLO_).unstable
               for s in SEEDS]
    assert sum(flagged) <= 1, flagged


def test_a_queue_growing_at_five_percent_is_seen_over_the_growth_horizon() -> None:
    # fixed service at 95% of the rate (a serving stage's near-constant time per request), over
    # 19 TTFT limits of arrivals (the growth horizon): the drift is about the size of the arrival
    # noise, so most streams, not all, show it
    found = [assess(_fifo(rate_hz=10.0, service_hz=9.5, n=950, seed=s, exponential=False), SLO_)
             for s in SEEDS]
    assert sum(f.unstable for f in found) >= 16, [f.reason for f in found]
    # over twice the horizon the drift dominates
    longer = [assess(_fifo(rate_hz=10.0, service_hz=9.5, n=1900, seed=s, exponential=False), SLO_)
              for s in SEEDS]
    assert sum(f.unstable for f in longer) >= 19


def test_an_overloaded_queue_is_always_unstable() -> None:
    found = [assess(_fifo(rate_hz=10.0, service_hz=8.0, n=950, seed=s), SLO_) for s in SEEDS]
    assert all(f.unstable and "trend" in f.reason for f in found)


def test_a_tail_that_falls_behind_is_unstable() -> None:
    frame = _fifo(rate_hz=5.0, service_hz=10.0, n=900, seed=0)
    late = frame["arrival_s"] >= frame["arrival_s"].quantile(0.8)
    frame.loc[late, "status"] = Status.FAILED.value  # the last fifth never finished
    found = assess(frame, SLO_)
    assert found.unstable and "tail" in found.reason
    assert found.tail_attainment < found.attainment


def test_an_empty_or_tiny_run_is_not_called_unstable() -> None:
    assert not assess(_fifo(rate_hz=1.0, service_hz=2.0, n=0, seed=0), SLO_).unstable
    assert assess(_fifo(rate_hz=1.0, service_hz=2.0, n=12, seed=0), SLO_).trend_z == 0.0
