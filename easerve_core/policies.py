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
from dataclasses import dataclass
from typing import Any

import numpy as np

from easerve_core import checks
from easerve_core.batcher import AdaptiveBatcher, Batch, Batcher, FixedBatcher
from easerve_core.deployment import BatchingMode, Deployment, SMSharing
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


def make_routers(deployment: Deployment, seed: int, generation: int = 0) -> list[Router]:
    """One router per encode worker, in worker order (see the module docstring).

    ``generation`` counts the controller's retunes (:func:`retune`): generation
    g > 0 draws from the children of ``SeedSequence((seed, g))``, so a
    retuned random router does not replay its first draws.
    """
    n = deployment.encode.num_workers
    build = ROUTERS[deployment.router]
    root = np.random.SeedSequence(seed if generation == 0 else (seed, generation))
    return [build(deployment.remote_fraction, np.random.default_rng(child)) for child in root.spawn(n)]


def make_router(deployment: Deployment, seed: int, index: int, generation: int = 0) -> Router:
    """The router of encode worker ``index`` alone (a live worker process builds only its own)."""
    if not 0 <= index < deployment.encode.num_workers:
        raise ValueError(f"index must be in [0, {deployment.encode.num_workers}), got {index!r}")
    return make_routers(deployment, seed, generation)[index]


@dataclass(frozen=True, slots=True)
class Retuned:
    """An encode worker's policies after a controller's retune, and the batch the old batcher closed."""

    batcher: Batcher[Any]
    router: Router
    flushed: Batch[Any] | None


def fast_knobs(current: Deployment, target: Deployment) -> Deployment:
    """``current`` with ``target``'s fast knobs (B, s, batching mode and its knobs, rate hint).

    What changes without moving weights: the allocation and the SM-sharing
    mode stay ``current``'s (s is clamped where the allocation has no remote
    Prefill or no local prefill).
    """
    s = target.remote_fraction
    if current.prefill.num_workers == 0:
        s = 0.0
    elif current.sm_sharing is SMSharing.NONE:  # no local prefill on this allocation's encode GPUs
        s = 1.0
    return current.with_(max_encode_batch=target.max_encode_batch, remote_fraction=s,
                         batching=target.batching, batch_timeout_s=target.batch_timeout_s,
                         gap_factor=target.gap_factor, max_wait_s=target.max_wait_s,
                         rate_hint_hz=target.rate_hint_hz)


def retune(batcher: Batcher[Any], deployment: Deployment, *, now: float, seed: int, index: int,
           generation: int) -> Retuned:
    """New policies for encode worker ``index`` under ``deployment`` (one rule for both engines).

    The open micro-batch closes at once (reason ``retune``) and goes to the
    encoder as is; the new batcher starts empty, the new router's counts
    (and, for a random router, its stream: ``generation``) start afresh.
    """
    return Retuned(batcher=make_batcher(deployment), router=make_router(deployment, seed, index, generation),
                   flushed=batcher.flush(now))


def interim_remote_fraction(remote_fraction: float, *, remote_serving: float, local_serving: float) -> float:
    """The remote share that keeps a target's per-worker Prefill loads while only part of it serves.

    A deployment's s sends ``s`` of the encoded requests to its remote Prefill
    workers and ``1 - s`` to its encoders' local Prefill. Mid-move only
    ``remote_serving`` of the target's remote Prefill GPUs and ``local_serving``
    of its LM-holding encoders' GPUs (fractions of the target's) may serve yet;
    each serving worker keeps the load the target gives it when the share is
    the odds of ``s * remote_serving`` against ``(1 - s) * local_serving``.
    Where both sides serve alike (1 and 1: the move is done) that is ``s``
    exactly; with either side absent the share is left at ``s`` (a caller
    handles the absent side: sim.roster prefills locally what finds no remote
    Prefill worker).
    """
    checks.fraction("remote_fraction", remote_fraction)
    checks.non_negative("remote_serving", remote_serving)
    checks.non_negative("local_serving", local_serving)
    if remote_serving == local_serving or remote_serving == 0 or local_serving == 0:
        return remote_fraction
    remote = remote_fraction * remote_serving
    return remote / (remote + (1.0 - remote_fraction) * local_serving)
