"""A worker is handed only the queues it reads or writes: O(workers) each, not every queue of the trial."""

from __future__ import annotations

import multiprocessing as mp

from live.placement import queues_per_worker, start_method
from live.transport import FRONTEND, Channels


def _count(channels: Channels) -> int:
    fans = [*channels.inboxes.values(), *channels.acks.values(), channels.events]
    return sum(len(f.queues) for f in fans)


def test_each_worker_holds_its_own_queues_only_and_they_grow_linearly():
    ctx = mp.get_context("fork")
    counts = {}
    for n in (2, 4, 8):
        workers = [("encode", i) for i in range(n // 2)] + [("decode", i) for i in range(n - n // 2)]
        channels = Channels.build(ctx, workers)
        try:
            views = {w: channels.for_worker(w) for w in workers}
            counts[n] = {_count(v) for v in views.values()}
            assert counts[n] == {queues_per_worker(n)}
            me, other = workers[0], workers[-1]
            view = views[me]
            view.inboxes[other].put(me, "job")  # it writes into another worker's inbox as itself
            assert channels.inboxes[other].get(timeout=5) == "job"
            view.ack(other, 7, receiver=me)
            assert channels.acks[other].get(timeout=5) == 7
            channels.inboxes[me].put(FRONTEND, "from the front end")  # and reads its own inbox whole
            assert view.inboxes[me].get(timeout=5) == "from the front end"
        finally:
            channels.close()
    assert counts == {2: {10}, 4: {18}, 8: {34}}  # 4n + 2: linear, where every queue was n^2 + 3n + 2


def test_sixteen_workers_still_start_with_the_forkserver():
    assert start_method(16, "forkserver") == "forkserver"  # was spawn beyond six workers
    assert start_method(64, "forkserver") == "spawn"
