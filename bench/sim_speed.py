"""Simulator speed: simulated requests per wall-second and SimPy events per request.

20,000 requests of the LLaVA-34B image workload on 8x RTX 6000 Ada with the
EAServe deployment of ``configs/llava34b_rtx6000ada.toml``, at output lengths
128 and 1,024 tokens. Events per request must not grow with output length
(decode advances to its next join or leave in one timeout); the target is at
least 3,000 simulated requests per wall-second on a 2-core machine.

Run: ``.venv/bin/python bench/sim_speed.py [--num-requests N] [--rate R]`` (default 0.5 req/s).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibration.plans import plan_for  # noqa: E402
from easerve_core.config import load_experiment  # noqa: E402
from easerve_core.workload import generate  # noqa: E402
from sim import simulate  # noqa: E402

CONFIG = ROOT / "configs" / "llava34b_rtx6000ada.toml"
OUTPUT_LENGTHS = (128, 1024)
#: arrival rate at which the deployment is stable at both output lengths; at the
#: config's 2 req/s, 1,024-token outputs overload Decode and the run changes regime
RATE_HZ = 0.5


def run(num_requests: int, rate_hz: float | None, output_tokens: int) -> dict[str, float]:
    config = load_experiment(CONFIG)
    spec = config.workload if rate_hz is None else config.workload.with_rate(rate_hz)
    mix = replace(spec.mix, output_tokens=(output_tokens, output_tokens))
    spec = replace(spec, mix=mix, num_requests=num_requests)
    requests = generate(spec, np.random.default_rng(config.seed))
    resolved = plan_for(config, requests=requests)
    profile, options = resolved.sim_profile(), resolved.sim_options()
    start = time.perf_counter()
    result = simulate(resolved.plan, profile, options=options)
    wall = time.perf_counter() - start
    summary = result.summary()
    return {"wall_s": wall, "req_per_s": num_requests / wall,
            "events_per_req": result.meta["events_per_request"],
            "throughput_rps": summary.throughput_rps, "ok": summary.num_ok}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-requests", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=RATE_HZ,
                        help=f"arrival rate in req/s (default {RATE_HZ})")
    args = parser.parse_args()
    rows = {n: run(args.num_requests, args.rate, n) for n in OUTPUT_LENGTHS}
    for n, row in rows.items():
        print(f"output_tokens={n:5d}: {row['req_per_s']:8.0f} simulated req/s  "
              f"{row['events_per_req']:6.2f} events/req  wall {row['wall_s']:.2f} s  "
              f"(sim throughput {row['throughput_rps']:.2f} req/s, {row['ok']} ok)")
    a, b = (rows[n]["events_per_req"] for n in OUTPUT_LENGTHS)
    print(f"events/req ratio 1024 vs 128: {b / a:.3f} (bar: within 20%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
