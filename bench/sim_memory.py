"""Simulator memory: peak resident set size of one long run with recording off.

200,000 requests of the LLaVA-34B image workload (the mix's own output
lengths) at 0.5 req/s on the EAServe deployment of
``configs/llava34b_rtx6000ada.toml``, with no time series recorded
(``[sim.record]`` off, as HAS trials and sweeps run). Prints the process's
peak RSS (``getrusage``'s ``ru_maxrss``, the figure ``/usr/bin/time -v``
reports as "Maximum resident set size"); the target is under 400 MB.

``--record`` keeps the config's time series (utilisation and queue lengths) instead.

Run: ``.venv/bin/python bench/sim_memory.py [--num-requests N] [--rate R] [--record]``
(or under ``/usr/bin/time -v`` to see the same figure from outside).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibration.session import Overrides, compose  # noqa: E402
from easerve_core.workload import generate  # noqa: E402
from runtime.configs import load_experiment  # noqa: E402
from sim.options import NO_RECORDING  # noqa: E402

CONFIG = ROOT / "configs" / "llava34b_rtx6000ada.toml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-requests", type=int, default=200_000)
    parser.add_argument("--rate", type=float, default=0.5, help="arrival rate in req/s (default 0.5)")
    parser.add_argument("--record", action="store_true", help="keep the config's time series")
    args = parser.parse_args()
    config = load_experiment(CONFIG)
    spec = replace(config.workload.with_rate(args.rate), num_requests=args.num_requests)
    requests = generate(spec, np.random.default_rng(config.seed))
    session = compose(config, Overrides(requests=requests))
    options = session.sim_options()
    if not args.record:
        options = replace(options, record=NO_RECORDING)
    engine = session.sim(options)
    start = time.perf_counter()
    result = engine.run()
    wall = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"{args.num_requests} requests at {args.rate} req/s, recording {'on' if args.record else 'off'}: "
          f"{len(result.records)} records, "
          f"simulate {wall:.1f} s, peak RSS {peak_mb:.0f} MB (bar: under 400 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
