"""The policy factories: one batcher per batching mode, one router per encode worker, one seeding rule."""

from __future__ import annotations

import numpy as np
import pytest

from easerve_core import AdaptiveBatcher, Deployment, FixedBatcher, StageGroup
from easerve_core.policies import (
    BATCHERS,
    fast_knobs,
    interim_remote_fraction,
    make_batcher,
    make_router,
    make_routers,
    retune,
)
from easerve_core.router import ROUTERS, DeficitRouter, RandomRouter, Route

DEP = Deployment(encode=StageGroup(num_workers=3), prefill=StageGroup(num_workers=1),
                 decode=StageGroup(num_workers=1), remote_fraction=0.5, rate_hint_hz=6.0)


def test_every_batching_mode_has_a_factory():
    assert set(BATCHERS) == {DEP.batching, DEP.with_(batching="fixed").batching}
    adaptive = make_batcher(DEP)
    assert isinstance(adaptive, AdaptiveBatcher)
    assert adaptive.estimated_rate_hz() == pytest.approx(2.0)  # the hint split over 3 workers
    fixed = make_batcher(DEP.with_(batching="fixed", batch_timeout_s=0.2))
    assert isinstance(fixed, FixedBatcher)


def test_one_router_per_worker_from_the_router_table():
    routers = make_routers(DEP, seed=0)
    assert len(routers) == 3 and all(isinstance(r, DeficitRouter) for r in routers)
    randoms = make_routers(DEP.with_(router="random"), seed=0)
    assert all(isinstance(r, RandomRouter) for r in randoms)


def test_random_routers_follow_one_seeding_rule():
    dep = DEP.with_(router="random")
    children = np.random.SeedSequence(7).spawn(3)
    for i, child in enumerate(children):
        expected = RandomRouter(0.5, np.random.default_rng(child))
        alone = make_router(dep, 7, i)  # what a live encode worker process builds
        together = make_routers(dep, 7)[i]  # what the simulator builds
        want = [expected.route() for _ in range(50)]
        assert [alone.route() for _ in range(50)] == want
        assert [together.route() for _ in range(50)] == want
    first = [make_router(dep, 7, 0).route() for _ in range(50)]
    assert first != [make_router(dep, 7, 1).route() for _ in range(50)]


def test_router_names_come_from_the_table():
    assert set(ROUTERS) == {"deficit", "random"}
    with pytest.raises(ValueError, match=r"unknown router 'rr'; known: deficit, random"):
        DEP.with_(router="rr")
    with pytest.raises(ValueError, match="index"):
        make_router(DEP, 0, 3)
    assert make_router(DEP.with_(remote_fraction=1.0), 0, 0).route() is Route.REMOTE


def test_a_retune_flushes_the_open_batch_and_builds_fresh_policies():
    old = make_batcher(DEP)
    for i, t in enumerate((0.0, 0.1)):
        old.offer(i, t)
    tuned = retune(old, DEP.with_(max_encode_batch=2, remote_fraction=0.0), now=0.2, seed=0, index=1,
                   generation=1)
    assert tuned.flushed is not None and tuned.flushed.items == (0, 1) and tuned.flushed.reason == "retune"
    assert len(old) == 0 and old.flush(0.3) is None
    assert tuned.batcher.max_batch == 2 and len(tuned.batcher) == 0
    assert tuned.router.route() is Route.LOCAL
    # a retuned random router draws a new stream (generation), the same one for the same generation
    dep = DEP.with_(router="random")
    first = [make_router(dep, 5, 0).route() for _ in range(40)]
    again = [make_router(dep, 5, 0, generation=1).route() for _ in range(40)]
    assert again != first and again == [make_router(dep, 5, 0, generation=1).route() for _ in range(40)]


def test_fast_knobs_keep_the_allocation():
    target = Deployment(encode=StageGroup(num_workers=2, tp=2), prefill=StageGroup(num_workers=0),
                        decode=StageGroup(num_workers=1), max_encode_batch=16, remote_fraction=0.0,
                        gap_factor=2.0)
    mine = fast_knobs(DEP, target)
    assert (mine.encode, mine.prefill, mine.decode) == (DEP.encode, DEP.prefill, DEP.decode)
    assert (mine.max_encode_batch, mine.remote_fraction, mine.gap_factor) == (16, 0.0, 2.0)
    remote_only = DEP.with_(remote_fraction=1.0, sm_sharing="none")
    assert fast_knobs(remote_only, target).remote_fraction == 1.0  # no local prefill to send to


@pytest.mark.parametrize(("s", "remote", "local", "expected"), [
    (0.82, 0.5, 1.0, 0.41 / (0.41 + 0.18)),  # half the remote Prefill: each worker keeps its load
    (0.6, 1.0, 0.5, 0.6 / (0.6 + 0.2)),  # half the local Prefill
    (0.82, 1.0, 1.0, 0.82),  # the move is done: the target's share, to the bit
    (0.3, 0.5, 0.5, 0.3),  # both halves: the same odds
    (0.82, 0.0, 1.0, 0.82),  # a side absent: left to the caller
    (0.82, 1.0, 0.0, 0.82),
    (0.0, 0.5, 1.0, 0.0),
    (1.0, 0.5, 1.0, 1.0),
    (0.5, 1.5, 1.0, 0.6),  # a leaving worker of the same stage still serving counts too
])
def test_the_interim_share_keeps_each_serving_worker_s_load(s, remote, local, expected):
    assert interim_remote_fraction(s, remote_serving=remote, local_serving=local) == pytest.approx(expected)


def test_the_interim_share_names_a_bad_argument():
    with pytest.raises(ValueError, match="remote_fraction"):
        interim_remote_fraction(1.5, remote_serving=1.0, local_serving=1.0)
    with pytest.raises(ValueError, match="local_serving"):
        interim_remote_fraction(0.5, remote_serving=1.0, local_serving=-1.0)
