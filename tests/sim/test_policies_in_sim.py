"""Inside the simulator the policies keep their contracts (DESIGN.md §4.2)."""

from __future__ import annotations

import numpy as np
import pytest

from easerve_core import Cluster, Deployment, StageGroup
from easerve_core.plan import assemble
from easerve_core.workload import WorkloadSpec, generate
from sim import SimOptions, simulate
from tests.sim.conftest import AffineProfile

PROFILE = AffineProfile(encode_base_s=0.02, encode_per_token_s=1e-5, prefill_per_token_s=2e-5,
                        decode_per_ctx_s=1e-8)


def _requests(rate_hz: float, n: int = 1500) -> list:
    spec = WorkloadSpec.from_dict({"mix": "llava-image", "arrival": "gamma", "cv": 3.0,
                                   "rate_hz": rate_hz, "num_requests": n})
    return generate(spec, np.random.default_rng(11))


@pytest.mark.parametrize("s", [0.0, 0.3, 0.5, 0.9, 1.0])
def test_remote_fraction_within_one_request_per_worker(s: float, cluster: Cluster) -> None:
    dep = Deployment(encode=StageGroup(num_workers=3), prefill=StageGroup(num_workers=1),
                     decode=StageGroup(num_workers=2, tp=2), remote_fraction=s,
                     sm_sharing="dynamic" if s < 1 else "none")
    log: list[tuple] = []
    simulate(assemble(dep, _requests(8.0), cluster=cluster, profile=PROFILE), PROFILE, trace=log)
    for worker in range(3):
        routes = [what for _, what, w, _ in log if w == worker and what.startswith("route_")]
        assert routes, f"worker {worker} routed nothing"
        remote = np.cumsum([r == "route_remote" for r in routes])
        n = np.arange(1, len(routes) + 1)
        assert np.all(np.abs(remote - s * n) < 1.0)


@pytest.mark.parametrize("batching", ["adaptive", "fixed"])
@pytest.mark.parametrize("coalesce", [True, False])
def test_no_encode_batch_exceeds_b(batching: str, coalesce: bool, cluster: Cluster) -> None:
    dep = Deployment(encode=StageGroup(num_workers=2), prefill=StageGroup(num_workers=2),
                     decode=StageGroup(num_workers=2), max_encode_batch=5, batching=batching,
                     batch_timeout_s=0.2, remote_fraction=1.0, sm_sharing="none")
    options = SimOptions(coalesce_waiting_batches=coalesce)
    result = simulate(assemble(dep, _requests(60.0), cluster=cluster, profile=PROFILE), PROFILE,
                      options=options)
    encode = result.stage_log[result.stage_log["stage"] == "encode"]
    assert encode["batch_size"].max() == 5  # overloaded: batches fill
    assert result.records["encode_batch_size"].max() <= 5
    assert (result.records["status"] == "ok").all()


def test_encode_batches_run_fifo_one_at_a_time(epd: Deployment, cluster: Cluster) -> None:
    result = simulate(assemble(epd, _requests(20.0), cluster=cluster, profile=PROFILE), PROFILE)
    for _, rows in result.stage_log[result.stage_log["stage"] == "encode"].groupby("worker"):
        starts, ends = rows["start_s"].to_numpy(), rows["end_s"].to_numpy()
        assert np.all(starts[1:] >= ends[:-1])


def test_every_request_accounted_for(epd: Deployment, cluster: Cluster) -> None:
    result = simulate(assemble(epd, _requests(20.0), cluster=cluster, profile=PROFILE), PROFILE)
    rec = result.records
    assert len(rec) == 1500 and (rec["status"] == "ok").all()
    assert (rec["encode_start_s"] >= rec["arrival_s"]).all()
    assert (rec["first_token_s"] >= rec["prefill_start_s"]).all()
    assert (rec["finish_s"] >= rec["first_token_s"]).all()
    assert set(rec["route"]) == {"local", "remote"}
    assert rec["decode_worker"].notna().all()
