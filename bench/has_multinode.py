"""HAS over placement on 2 x 8 GPUs: search wall time per paper model (target: at most 3 min each).

For each paper config (LLaVA-34B image, Qwen2.5-VL-32B video, Ultravox-27B
audio on RTX 6000 Ada), the config's cluster becomes ``--nodes`` nodes of 8
GPUs joined by ``--network`` NICs (calibration/specs/networks), the target
rate ``--rate-factor`` x the config's; then the screen (placements
``packed`` and ``spread`` for every allocation, a network stage) and a
``--trials``-trial TPE study in a fresh SQLite file, each trial one
simulator run, as ``easerve search`` runs them. Prints, per model: screen
counts, the network-bound allocations dropped, wall time, the best
deployment and its goodput.

Run: ``.venv/bin/python bench/has_multinode.py [--nodes 2] [--network ndr-400g] [--trials 30]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.has_speed import CONFIGS  # noqa: E402  (the three paper models' configs)
from calibration.networks import network_spec  # noqa: E402
from easerve.cli.search_cmd import dump_toml, plan_search  # noqa: E402
from easerve_core.has import top_k, trials_frame  # noqa: E402
from runtime.files import read_toml  # noqa: E402
from runtime.has import SearchSettings, run_search  # noqa: E402


def multinode_config(path: Path, tmp: Path, *, nodes: int, network: str) -> tuple[Path, float]:
    """``path`` on ``nodes`` x 8 GPUs with ``network`` NICs, written under ``tmp``; and its rate."""
    data = read_toml(path, what="config")
    net = network_spec(network)
    data["cluster"] = {**data["cluster"], "num_gpus": 8 * nodes, "num_nodes": nodes,
                       "nic_bytes_per_s": net.nic_bytes_per_s, "nic_latency_s": net.nic_latency_s}
    out = tmp / f"{path.stem}-{nodes}x8.toml"
    out.write_text(dump_toml(data))
    return out, float(data["workload"]["rate_hz"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--network", default="ndr-400g")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--rate-factor", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for name, path in CONFIGS.items():
            cfg, base_rate = multinode_config(path, tmp, nodes=args.nodes, network=args.network)
            rate = base_rate * args.rate_factor
            start = time.perf_counter()
            plan = plan_search(cfg, rate_hz=rate, tier="moderate")
            screened = time.perf_counter() - start
            rep = plan.report
            by_net = sum(1 for c in rep.candidates if c.capacity.network_rps < rate)
            settings = SearchSettings(sampler="tpe", num_trials=args.trials, seed=args.seed,
                                      storage=str(tmp / f"{path.stem}.db"), study_name="bench")
            frame = trials_frame(run_search(plan.space, plan.evaluator, settings))
            wall = time.perf_counter() - start
            best = top_k(frame, 1).iloc[0]
            print(f"{name} on {args.nodes}x8 {args.network} @ {rate:g} req/s: screen "
                  f"{len(rep.candidates)} -> {len(rep.survivors)} ({by_net} below the rate on the network); "
                  f"screen {screened:.1f} s, HAS {args.trials} trials {wall:.1f} s "
                  f"({'within' if wall <= 180 else 'OVER'} the 3 min bar); best {best['goodput_rps']:.3f} "
                  f"req/s: {best['label']}", flush=True)


if __name__ == "__main__":
    main()
