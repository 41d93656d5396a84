"""Policy factories: the encode batcher and the per-worker routers of a deployment.

Both engines build their policies here and nowhere else, through the tables
that define them (:data:`BATCHERS` by batching mode, ``router.ROUTERS`` by
router name), so a simulated and a live encode worker of one plan start from
the same objects.

Seeding rule (one for both engines): the routers of a run's encode workers
take, in worker order, the children of ``numpy.random.SeedSequence(seed)``
spawned once per worker; one worker's draws never shift another's, and a
live worker process builds exactly the router its simulated twin gets.

The adaptive batcher is given the per-worker share of the deployment's rate
hint (``rate_hint_hz / encode.num_workers``): the front end spreads arrivals
evenly over the encode workers, so each sees that rate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from easerve_core.batcher import AdaptiveBatcher, Batcher, FixedBatcher
from easerve_core.deployment import BatchingMode, Deployment
from easerve_core.router import ROUTERS, Router


def _adaptive(deployment: Deployment) -> Batcher[Any]:
    rate = deployment.rate_hint_hz
    per_worker = None if rate is None else rate / max(1, deployment.encode.num_workers)
    return AdaptiveBatcher(deployment.max_encode_batch, gap_factor=deployment.gap_factor,
                           max_wait_s=deployment.max_wait_s, rate_hz=per_worker)


def _fixed(deployment: Deployment) -> Batcher[Any]:
    return FixedBatcher(deployment.max_encode_batch, timeout_s=deployment.batch_timeout_s)


#: batching mode -> the batcher one encode worker of the deployment runs
BATCHERS: Mapping[BatchingMode, Callable[[Deployment], Batcher[Any]]] = {
    BatchingMode.ADAPTIVE: _adaptive,
    BatchingMode.FIXED: _fixed,
}


def make_batcher(deployment: Deployment) -> Batcher[Any]:
    """A fresh batcher for one encode worker of ``deployment``."""
    return BATCHERS[deployment.batching](deployment)


def make_routers(deployment: Deployment, seed: int) -> list[Router]:
    """One router per encode worker, in worker order (see the module docstring)."""
    n = deployment.encode.num_workers
    build = ROUTERS[deployment.router]
    children = np.random.SeedSequence(seed).spawn(n)
    return [build(deployment.remote_fraction, np.random.default_rng(child)) for child in children]


def make_router(deployment: Deployment, seed: int, index: int) -> Router:
    """The router of encode worker ``index`` alone (a live worker process builds only its own)."""
    if not 0 <= index < deployment.encode.num_workers:
        raise ValueError(f"index must be in [0, {deployment.encode.num_workers}), got {index!r}")
    return make_routers(deployment, seed)[index]
