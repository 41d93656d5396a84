"""Policy overhead: the median cost of one batcher ``offer`` + one router ``route``.

The encode control plane runs once per request beside millisecond-scale
forwards, so its decisions must be negligible. Target: at most 5 us per
request on the project's 2-core CPU.

    .venv/bin/python bench/policy_overhead.py [--requests N] [--repeats R]

Prints the median over R repeats of the per-request cost (offer + route,
plus the poll a driver makes at each deadline) in microseconds.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from easerve_core import Deployment, StageGroup
from easerve_core.policies import make_batcher, make_router

#: one encode worker's policies as both engines build them: adaptive B = 8, deficit router at s = 0.55
DEPLOYMENT = Deployment(encode=StageGroup(num_workers=1), max_encode_batch=8, max_wait_s=1.0,
                        remote_fraction=0.55)


def one_repeat(arrivals: np.ndarray) -> float:
    batcher = make_batcher(DEPLOYMENT)
    router = make_router(DEPLOYMENT, 0, 0)
    times = arrivals.tolist()
    start = time.perf_counter()
    for i, now in enumerate(times):
        deadline = batcher.next_deadline()
        if deadline is not None and deadline <= now:
            batch = batcher.poll(deadline)
            if batch is not None:
                for _ in batch.items:
                    router.route()
        batch = batcher.offer(i, now)
        if batch is not None:
            for _ in batch.items:
                router.route()
    elapsed = time.perf_counter() - start
    return elapsed / len(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    arrivals = np.cumsum(rng.exponential(1 / 50.0, size=args.requests))
    one_repeat(arrivals[:1000])  # warm up
    costs = [one_repeat(arrivals) for _ in range(args.repeats)]
    median_us = statistics.median(costs) * 1e6
    spread = (max(costs) - min(costs)) * 1e6
    print(f"policy overhead: {median_us:.2f} us per request (offer + route + deadline poll), "
          f"median of {args.repeats} x {args.requests} requests, spread {spread:.2f} us; target <= 5 us")


if __name__ == "__main__":
    main()
