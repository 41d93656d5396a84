"""Sim/live parity of the encode control point: same arrivals, same batches, same routes.

The same plan's arrivals, with fixed stage latencies, go through the
simulator's encode worker (``encode_intake_blocking``: the live worker's one
receive loop) and through the live encode worker's own loop
(:class:`live.workers.intake.IntakeLoop`) on a scripted clock. Both build
their policies with :mod:`easerve_core.policies`; a recording wrapper around
the batcher each engine builds captures every batch it closes. The batches
(requests, size, reason) and every request's route must be the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import live.workers.encode as live_encode
import sim.build as sim_build
from easerve_core import Cluster, Deployment, Modality, Request, StageGroup
from easerve_core.batcher import Batch
from easerve_core.plan import RunPlan, assemble
from easerve_core.policies import make_batcher, make_router
from live.workers.intake import IntakeLoop
from sim import SimOptions, simulate
from tests.profiles import ConstantStages

ENCODE_FIXED_S, ENCODE_PER_ITEM_S = 0.03, 0.01
CLUSTER = Cluster(gpu="cpu", num_gpus=8, link_bytes_per_s=1e12, link_latency_s=0.0, num_links=8)


class Fixed(ConstantStages):
    """Fixed stage latencies: encode a + b per item at any SM share (so dynamic sharing leaves it
    alone), prefill and decode steps constant."""

    def encode_s(self, items: Sequence[int], sm_share: float = 1.0) -> float:
        return ENCODE_FIXED_S + ENCODE_PER_ITEM_S * len(items)


class Recording:
    """A batcher that logs every batch it closes as (request ids, reason)."""

    def __init__(self, inner: Any, log: list[tuple[tuple[int, ...], str]], rid: Any) -> None:
        self.inner, self.log, self.rid = inner, log, rid

    @property
    def max_batch(self) -> int:
        return int(self.inner.max_batch)

    def __len__(self) -> int:
        return len(self.inner)

    def next_deadline(self) -> float | None:
        deadline: float | None = self.inner.next_deadline()
        return deadline

    def _seen(self, batch: Batch[Any] | None) -> Batch[Any] | None:
        if batch is not None:
            self.log.append((tuple(self.rid(item) for item in batch.items), str(batch.reason)))
        return batch

    def offer(self, item: Any, now: float) -> Batch[Any] | None:
        return self._seen(self.inner.offer(item, now))

    def poll(self, now: float) -> Batch[Any] | None:
        return self._seen(self.inner.poll(now))


def _plan(deployment: Deployment, seed: int) -> RunPlan:
    """Bursty arrivals (Gamma gaps, cv 2): batches close by size, by gap and by age."""
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(0.25, 0.03 / 0.25, size=160)  # mean 30 ms, cv 2
    times = np.cumsum(gaps)
    requests = [Request(request_id=i, arrival_s=float(t), modality=Modality.IMAGE, prompt_tokens=8,
                        output_tokens=3, mm_tokens_per_item=(32,)) for i, t in enumerate(times)]
    return assemble(deployment, requests, cluster=CLUSTER, profile=Fixed(), seed=seed)


def _sim_side(plan: RunPlan, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], dict[int, str]]:
    log: list[tuple[tuple[int, ...], str]] = []
    monkeypatch.setattr(sim_build, "make_batcher",
                        lambda dep: Recording(make_batcher(dep), log, lambda job: job.req.request_id))
    options = SimOptions(encode_intake_blocking=True, prefill_max_batch_tokens=1)
    records = simulate(plan, Fixed(), options=options).records
    return log, dict(zip(records["request_id"].astype(int), records["route"], strict=True))


class ScriptedInbox:
    """The live worker's inbox on a scripted clock: arrivals become messages at their times."""

    def __init__(self, requests: Sequence[Request], loop_batcher: Any) -> None:
        self.pending = list(requests)
        self.now = 0.0
        self.batcher = loop_batcher

    def clock(self) -> float:
        return self.now

    def get(self, timeout_s: float) -> Any:
        if self.pending and self.pending[0].arrival_s <= self.now + timeout_s:
            self.now = max(self.now, self.pending[0].arrival_s)  # queued while busy: taken at once
            return self.pending.pop(0)
        if not self.pending and not len(self.batcher):
            return None  # everything delivered and dispatched: the front end stops the worker
        wake = self.now + timeout_s
        deadline = self.batcher.next_deadline()
        if deadline is not None and abs(wake - deadline) < 1e-9:
            wake = deadline  # a real timer fires at the deadline, not a rounding error before it
        self.now = wake
        return ...


def _live_side(plan: RunPlan) -> tuple[list[Any], dict[int, str]]:
    log: list[tuple[tuple[int, ...], str]] = []
    batcher = Recording(make_batcher(plan.deployment), log, lambda req: req.request_id)
    router = make_router(plan.deployment, plan.seed, 0)
    inbox = ScriptedInbox(plan.requests, batcher)
    routes: dict[int, str] = {}

    def run_batch(batch: Batch[Request]) -> None:  # the encoder, then the router, in batch order
        items = [t for req in batch.items for t in req.mm_tokens_per_item]
        inbox.now += Fixed().encode_s(items)
        for req in batch.items:
            routes[req.request_id] = router.route().value

    loop = IntakeLoop(batcher, clock=inbox.clock, poll_s=live_encode_poll_s(),
                      is_request=lambda msg: isinstance(msg, Request))
    loop.run(inbox.get, lambda req, now: batcher.offer(req, now), run_batch)
    return log, routes


def live_encode_poll_s() -> float:
    """The live default poll interval (what the encode worker's loop wakes on without a deadline)."""
    from live.options import LiveOptions

    return LiveOptions().poll_interval_s


DEPLOYMENTS = {
    "adaptive": Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                           decode=StageGroup(num_workers=1), max_encode_batch=4, max_wait_s=0.15,
                           remote_fraction=0.5, sm_sharing="dynamic"),
    "adaptive-hint": Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                                decode=StageGroup(num_workers=1), max_encode_batch=6, gap_factor=0.5,
                                rate_hint_hz=33.0, remote_fraction=0.3, sm_sharing="dynamic"),
    "adaptive-age": Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                               decode=StageGroup(num_workers=1), max_encode_batch=16, gap_factor=4.0,
                               rate_hint_hz=33.0, max_wait_s=0.08, remote_fraction=0.5,
                               sm_sharing="dynamic"),
    "fixed-random": Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                               decode=StageGroup(num_workers=1), max_encode_batch=4, batching="fixed",
                               batch_timeout_s=0.05, remote_fraction=0.6, router="random",
                               sm_sharing="dynamic"),
}


#: the dispatch rules each case's arrivals exercise
REASONS = {"adaptive": {"size", "gap"}, "adaptive-hint": {"size", "gap"}, "adaptive-age": {"age", "size"},
           "fixed-random": {"size", "timeout"}}


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_same_batches_and_routes_in_both_engines(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan(DEPLOYMENTS[name], seed=11)
    sim_batches, sim_routes = _sim_side(plan, monkeypatch)
    live_batches, live_routes = _live_side(plan)
    assert sum(len(ids) for ids, _ in sim_batches) == len(plan.requests)
    assert live_batches == sim_batches
    assert live_routes == sim_routes
    assert {reason for _, reason in sim_batches} == REASONS[name]  # every rule of the case was exercised
    assert {"local", "remote"} <= set(sim_routes.values())


def test_the_live_worker_uses_the_shared_factories() -> None:
    # the live encode worker builds its policies through the same names the parity test wraps
    assert live_encode.make_batcher is make_batcher and live_encode.make_router is make_router
