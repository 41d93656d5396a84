"""Queueing theory: an M/D/1 encode queue gives the Pollaczek-Khinchine mean wait.

One encode worker, batch size 1 (request-at-a-time), a constant encode time
D and Poisson arrivals at rate lambda: utilisation rho = lambda D and the
mean wait in queue is ``rho D / (2 (1 - rho))``. A pure-encode run
(``SimOptions(encode_only=True)``) keeps 100,000 requests fast.
"""

from __future__ import annotations

import numpy as np
import pytest

from easerve_core import Cluster, Deployment, StageGroup
from easerve_core.plan import assemble
from easerve_core.workload import WorkloadSpec, generate
from sim import SimOptions, simulate
from sim.options import Recording
from tests.sim.conftest import AffineProfile

ENCODE_S = 0.01
NUM_REQUESTS = 100_000
TOLERANCE_FRAC = 0.03


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_md1_mean_wait_matches_pollaczek_khinchine(rho: float) -> None:
    profile = AffineProfile(encode_base_s=ENCODE_S)
    dep = Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                     decode=StageGroup(num_workers=1), max_encode_batch=1, batching="fixed",
                     batch_timeout_s=0.0, remote_fraction=1.0, sm_sharing="none")
    spec = WorkloadSpec.from_dict({"mix": "ultravox-audio", "rate_hz": rho / ENCODE_S,
                                   "num_requests": NUM_REQUESTS})
    requests = generate(spec, np.random.default_rng(2026))
    options = SimOptions(encode_only=True, record=Recording(utilization=False, queues=False))
    result = simulate(assemble(dep, requests, cluster=Cluster(gpu="test-gpu"), profile=profile), profile,
                      options=options)
    records = result.records
    wait = (records["encode_start_s"] - records["arrival_s"]).mean()
    expected = rho * ENCODE_S / (2 * (1 - rho))
    assert (records["encode_end_s"] - records["encode_start_s"]).max() == pytest.approx(ENCODE_S)
    assert wait == pytest.approx(expected, rel=TOLERANCE_FRAC)
