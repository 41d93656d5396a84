"""Arrival shapes: seeded, exact by time inversion, with the rate per window the shape says.

Tolerance of the window test: counts of a Poisson process in disjoint
windows are independent Poisson(mu), mu the integral of the rate over the
window; every window here has mu >= 1,000, so ``z = (count - mu) /
sqrt(mu)`` is close to a standard normal and ``sum(z**2)`` to a chi-square
with k (the number of windows) degrees of freedom. The bounds: every
``|z| < 4.5`` (crossed by a correct sampler with probability about 7e-6 per
window) and ``sum(z**2) < k + 5 sqrt(2k)`` (five standard deviations; about
1e-4 at k = 20). Together under 0.2% for the four shapes, and the seeds are
fixed, so the test is deterministic. A rate 10% off over the shape's windows
(mu >= 1,000: 3 sigma a window) fails the chi-square bound.
"""

from __future__ import annotations

import numpy as np
import pytest

from easerve.cli import main
from easerve_core.workload import WorkloadSpec, generate
from easerve_core.workload.shapes import (
    SHAPES,
    DriftArrivals,
    SineArrivals,
    SpikeArrivals,
    StepArrivals,
)
from runtime.traces import read_trace

Z_BOUND = 4.5

# (shape, window width s, horizon s): horizon chosen so that its expected count is < n.
CASES = [
    (SineArrivals(rate_hz=100.0, amplitude_frac=0.6, period_s=600.0, phase_frac=0.25), 30.0, 1800.0),
    (StepArrivals(rate_before_hz=50.0, rate_after_hz=250.0, at_s=200.0), 20.0, 400.0),
    (SpikeArrivals(rate_hz=100.0, spike_rate_hz=600.0, start_s=300.0, duration_s=60.0), 20.0, 600.0),
    (DriftArrivals(start_rate_hz=20.0, end_rate_hz=300.0, duration_s=1000.0), 50.0, 1000.0),
]
IDS = ["sine", "step", "spike", "drift"]


def n_for(shape, horizon_s):
    return int(1.2 * float(shape.cumulative(horizon_s))) + 100


@pytest.mark.parametrize(("shape", "width", "horizon"), CASES, ids=IDS)
def test_same_seed_same_arrivals_other_seed_other(shape, width, horizon):
    a = shape.sample(500, np.random.default_rng(11))
    assert np.array_equal(a, shape.sample(500, np.random.default_rng(11)))
    assert not np.array_equal(a, shape.sample(500, np.random.default_rng(12)))


@pytest.mark.parametrize(("shape", "width", "horizon"), CASES, ids=IDS)
def test_time_inversion_is_exact(shape, width, horizon):
    """cumulative(t_i) gives back the unit-rate arrivals drawn from the same seed."""
    t = shape.sample(20_000, np.random.default_rng(5))
    unit = np.cumsum(np.random.default_rng(5).exponential(1.0, size=20_000))
    assert np.all(t > 0) and np.all(np.diff(t) >= 0)
    np.testing.assert_allclose(shape.cumulative(t), unit, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(("shape", "width", "horizon"), CASES, ids=IDS)
def test_rate_per_window_matches_the_shape(shape, width, horizon):
    t = shape.sample(n_for(shape, horizon), np.random.default_rng(0))
    assert t[-1] > horizon  # every window below lies inside the sampled span
    edges = np.arange(0.0, horizon + width / 2, width)
    counts = np.histogram(t, bins=edges)[0]
    mu = np.diff(shape.cumulative(edges))
    assert mu.min() >= 1000
    z = (counts - mu) / np.sqrt(mu)
    k = len(z)
    assert np.abs(z).max() < Z_BOUND, f"window z-scores {np.round(z, 2)}"
    assert (z**2).sum() < k + 5 * np.sqrt(2 * k), f"window z-scores {np.round(z, 2)}"


def test_cumulative_is_the_integral_of_the_rate():
    grid = np.linspace(0.0, 1500.0, 150_001)
    for shape, _, _ in CASES:
        rate = shape.rate_at(grid)
        trapezoid = np.concatenate(([0.0], np.cumsum(np.diff(grid) * (rate[1:] + rate[:-1]) / 2)))
        np.testing.assert_allclose(shape.cumulative(grid), trapezoid, rtol=2e-3, atol=0.5)


def test_zero_rate_stretches_have_no_arrivals():
    step = StepArrivals(rate_before_hz=0.0, rate_after_hz=3.0, at_s=40.0)
    assert step.sample(2_000, np.random.default_rng(0)).min() >= 40.0
    gap = SpikeArrivals(rate_hz=3.0, spike_rate_hz=0.0, start_s=10.0, duration_s=20.0)
    t = gap.sample(2_000, np.random.default_rng(0))
    assert not np.any((t >= 10.0) & (t < 30.0)) and np.any(t < 10.0)


def test_full_amplitude_sine_touches_zero_and_stays_exact():
    sine = SineArrivals(rate_hz=4.0, amplitude_frac=1.0, period_s=60.0, phase_frac=0.75)
    assert float(sine.rate_at(0.0)) == pytest.approx(0.0, abs=1e-12)
    t = sine.sample(5_000, np.random.default_rng(1))
    unit = np.cumsum(np.random.default_rng(1).exponential(1.0, size=5_000))
    np.testing.assert_allclose(sine.cumulative(t), unit, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(("shape", "width", "horizon"), CASES, ids=IDS)
def test_with_rate_scales_every_rate_and_keeps_every_time(shape, width, horizon):
    faster = shape.with_rate(3.0 * shape.mean_rate_hz)
    assert faster.mean_rate_hz == pytest.approx(3.0 * shape.mean_rate_hz)
    grid = np.linspace(0.0, 2.0 * horizon, 401)
    np.testing.assert_allclose(faster.rate_at(grid), 3.0 * shape.rate_at(grid))


TABLES = {
    "sine": {"rate_hz": 2.0, "amplitude_frac": 0.5, "period_s": 86400.0, "phase_frac": 0.75},
    "step": {"rate_before_hz": 1.0, "rate_after_hz": 4.0, "at_s": 60.0},
    "spike": {"rate_hz": 2.0, "spike_rate_hz": 10.0, "start_s": 30.0, "duration_s": 5.0},
    "drift": {"start_rate_hz": 1.0, "end_rate_hz": 3.0, "duration_s": 300.0},
}


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_workload_table_builds_the_shape_and_generate_uses_it(kind):
    spec = WorkloadSpec.from_dict({"arrival": kind, "num_requests": 300, **TABLES[kind]})
    assert spec.arrivals == SHAPES[kind](**TABLES[kind])
    reqs = generate(spec, np.random.default_rng(4))
    times = spec.arrivals.sample(300, np.random.default_rng(4))
    assert [r.arrival_s for r in reqs] == list(times)
    assert spec.with_rate(7.0).mean_rate_hz == pytest.approx(7.0)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"arrival": "sine", "rate_hz": 2.0, "period_s": 10.0}, "workload.amplitude_frac is required"),
        ({**TABLES["sine"], "arrival": "sine", "amplitude_frac": 1.5}, "workload.amplitude_frac must be in"),
        ({**TABLES["sine"], "arrival": "sine", "period_s": 0}, "workload.period_s must be > 0"),
        ({**TABLES["sine"], "arrival": "sine", "phase_frac": -0.1}, "workload.phase_frac"),
        ({**TABLES["sine"], "arrival": "sine", "rate_hz": "fast"}, "workload.rate_hz must be a number"),
        ({**TABLES["step"], "arrival": "step", "rate_after_hz": 0.0}, "workload.rate_after_hz must be > 0"),
        ({**TABLES["step"], "arrival": "step", "at_s": -1.0}, "workload.at_s must be >= 0"),
        ({**TABLES["spike"], "arrival": "spike", "duration_s": 0.0}, "workload.duration_s must be > 0"),
        ({**TABLES["spike"], "arrival": "spike", "spike_rate_hz": -1}, "workload.spike_rate_hz"),
        ({**TABLES["drift"], "arrival": "drift", "end_rate_hz": 0.0}, "workload.end_rate_hz must be > 0"),
        ({**TABLES["drift"], "arrival": "drift", "start_rate_hz": float("inf")},
         "workload.start_rate_hz must be finite"),
        ({**TABLES["step"], "arrival": "step", "rate_hz": 3.0},
         "workload.rate_hz is not a field of arrival 'step'"),
        ({**TABLES["sine"], "arrival": "sine", "cv": 2.0}, "workload.cv is not a field of arrival 'sine'"),
        ({"arrival": "poisson", "rate_hz": 1.0, "period_s": 5.0}, "workload.period_s is not a field"),
        ({**TABLES["drift"], "arrival": "spike", "rate_hz": 1.0, "spike_rate_hz": 2.0, "start_s": 0.0},
         "workload.end_rate_hz is not a field of arrival 'spike'"),
    ],
)
def test_bad_shape_tables_name_the_field(table, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        WorkloadSpec.from_dict(table)


def test_cli_writes_a_shaped_trace(tmp_path):
    cfg = tmp_path / "w.toml"
    cfg.write_text('seed = 2\n[workload]\nmix = "qwen-image"\narrival = "spike"\nnum_requests = 80\n'
                   "rate_hz = 2.0\nspike_rate_hz = 20.0\nstart_s = 5.0\nduration_s = 2.0\n")
    out = tmp_path / "t.csv"
    assert main(["workload", str(cfg), "--out", str(out)]) == 0
    spec = WorkloadSpec.from_dict({"mix": "qwen-image", "arrival": "spike", "num_requests": 80,
                                   **TABLES["spike"], "spike_rate_hz": 20.0, "start_s": 5.0,
                                   "duration_s": 2.0})
    assert read_trace(out) == generate(spec, np.random.default_rng(2))
