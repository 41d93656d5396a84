"""The simulator as a HAS evaluator: goodput of a deployment, over one or more request streams."""

from __future__ import annotations

import pytest

from easerve_core import SLO
from easerve_core.plan import assemble
from easerve_core.workload import WorkloadSpec
from sim.evaluate import make_evaluator

SPEC = WorkloadSpec.from_dict({"mix": "ultravox-audio", "rate_hz": 2.0, "num_requests": 40})
SLO_ = SLO(ttft_s=0.5, tpot_s=0.05)


def _plan(epd, cluster, profile, seed):
    return assemble(epd, [], cluster=cluster, profile=profile, seed=seed, slo=SLO_, workload=SPEC)


def test_mean_over_streams(profile, cluster, epd):
    one = [make_evaluator(_plan(epd, cluster, profile, seed), profile, num_requests=40)(epd)
           for seed in (7, 8)]
    both = make_evaluator(_plan(epd, cluster, profile, 7), profile, num_requests=40, num_samples=2)
    assert both(epd) == pytest.approx(sum(one) / 2)
    assert one[0] != one[1]  # the streams differ


def test_num_samples_must_be_positive(profile, cluster, epd):
    with pytest.raises(ValueError, match="num_samples"):
        make_evaluator(_plan(epd, cluster, profile, 0), profile, num_samples=0)
