"""Same seed, same records (byte-identical Parquet); another seed, other records."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from easerve_core import Cluster, Deployment
from easerve_core.plan import assemble
from easerve_core.workload import WorkloadSpec, generate
from runtime.results import write_result
from sim import simulate
from tests.sim.conftest import AffineProfile

PROFILE = AffineProfile(encode_per_token_s=2e-6, prefill_per_token_s=4e-5, decode_per_ctx_s=1e-8)


def _requests(seed: int) -> list:
    spec = WorkloadSpec.from_dict({"mix": "llava-image", "arrival": "gamma", "cv": 2.0,
                                   "rate_hz": 6.0, "num_requests": 400})
    return generate(spec, np.random.default_rng(seed))


def _parquet(tmp: Path, name: str, dep: Deployment, cluster: Cluster, seed: int) -> bytes:
    result = simulate(assemble(dep, _requests(0), cluster=cluster, seed=seed, profile=PROFILE), PROFILE)
    path = tmp / f"{name}.parquet"
    result.records.to_parquet(path, index=False)
    return path.read_bytes()


def test_same_seed_gives_byte_identical_records(tmp_path: Path, epd: Deployment,
                                               cluster: Cluster) -> None:
    dep = epd.with_(router="random")
    assert _parquet(tmp_path, "a", dep, cluster, 3) == _parquet(tmp_path, "b", dep, cluster, 3)


def test_other_seed_gives_other_records(tmp_path: Path, epd: Deployment, cluster: Cluster) -> None:
    dep = epd.with_(router="random")
    assert _parquet(tmp_path, "a", dep, cluster, 3) != _parquet(tmp_path, "b", dep, cluster, 4)


def test_deficit_router_ignores_the_seed(tmp_path: Path, epd: Deployment, cluster: Cluster) -> None:
    """Only random policies read the seed: the deficit router's run is seed-free."""
    assert _parquet(tmp_path, "a", epd, cluster, 0) == _parquet(tmp_path, "b", epd, cluster, 9)


def test_result_write_is_deterministic(tmp_path: Path, epd: Deployment, cluster: Cluster) -> None:
    for name in ("x", "y"):
        plan = assemble(epd, _requests(1), cluster=cluster, profile=PROFILE)
        write_result(simulate(plan, PROFILE), tmp_path / name)
    for file in ("records.parquet", "utilization.parquet", "stage_log.parquet", "queues.parquet"):
        assert (tmp_path / "x" / file).read_bytes() == (tmp_path / "y" / file).read_bytes()
