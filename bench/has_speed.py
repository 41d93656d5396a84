"""HAS on the simulator: search wall time, and TPE vs random vs the exhaustive grid.

Default: the 30-trial TPE search of ``configs/llava34b_rtx6000ada.toml`` at
2 req/s, moderate tier, run through the ``easerve search`` command exactly as
a user would (screen, study in a fresh SQLite file, outputs); prints its wall
time (target: at most 120 s on the 2-core development machine).

``--bars``: per example config, the exhaustive grid once, then TPE and random
search with ``--trials`` trials for ``--seeds`` seeds; prints the grid's best
goodput, the median over seeds of each sampler's best as a fraction of it
(target for TPE: at least 0.99), the median trials to reach 99%, and the
deployments chosen.

Run: ``.venv/bin/python bench/has_speed.py [--bars] [--rate R] [--image-rate R]
[--video-rate R] [--audio-rate R]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import optuna

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from easerve.cli import main as easerve_main  # noqa: E402
from easerve.cli.search_cmd import SearchSetup, plan_search  # noqa: E402
from easerve_core.has import top_k, trials_frame, trials_to_reach  # noqa: E402
from runtime.has import SearchSettings, run_search  # noqa: E402

CONFIGS = {
    "llava34b (image)": ROOT / "configs" / "llava34b_rtx6000ada.toml",
    "qwen25vl32b (video)": ROOT / "configs" / "qwen25vl32b_rtx6000ada.toml",
    "ultravox27b (audio)": ROOT / "configs" / "ultravox27b_rtx6000ada.toml",
}


def speed(rate: float, trials: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["search", str(CONFIGS["llava34b (image)"]), "--rate", str(rate), "--tier",
                "moderate", "--trials", str(trials), "--out", str(Path(tmp) / "out")]
        start = time.perf_counter()
        status = easerve_main(argv)
        wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"easerve search failed with status {status}")
    return wall


def _study(plan: SearchSetup, sampler: str, seed: int, trials: int, tmp: Path) -> optuna.Study:
    settings = SearchSettings(sampler=sampler, num_trials=trials, seed=seed,
                              storage=str(tmp / f"{sampler}-{seed}.db"), study_name="bench")
    return run_search(plan.space, plan.evaluator, settings)


def bars(name: str, path: Path, rate: float, trials: int, seeds: int) -> None:
    plan = plan_search(path, rate_hz=rate, tier="moderate")
    n_fit, n_keep = len(plan.report.candidates), len(plan.report.survivors)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        start = time.perf_counter()
        grid = trials_frame(_study(plan, "grid", 0, 1, tmp))
        grid_wall = time.perf_counter() - start
        best = float(grid["goodput_rps"].max())
        print(f"\n{name} @ {rate:g} req/s: screen {n_fit} -> {n_keep}; grid {len(grid)} points "
              f"in {grid_wall:.1f} s, best {best:.3f} req/s: {top_k(grid, 1).iloc[0]['label']}")
        near = int((grid["goodput_rps"] >= 0.99 * best).sum())
        print(f"  grid points within 99% of the best: {near}/{len(grid)}; worst "
              f"{grid['goodput_rps'].min():.3f} req/s")
        for sampler in ("tpe", "random"):
            fracs, reach, chosen = [], [], []
            for seed in range(seeds):
                frame = trials_frame(_study(plan, sampler, seed, trials, tmp))
                fracs.append(float(frame["goodput_rps"].max()) / best if best > 0 else 1.0)
                hit = trials_to_reach(frame, 0.99 * best)
                reach.append(hit if hit is not None else trials + 1)
                chosen.append(str(top_k(frame, 1).iloc[0]["label"]))
            print(f"  {sampler:<6} best/grid median {statistics.median(fracs):.4f} "
                  f"(min {min(fracs):.4f}); trials to 99% median {statistics.median(reach):g} "
                  f"({trials + 1} = never)")
            for seed, label in enumerate(chosen):
                print(f"    seed {seed}: {label}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bars", action="store_true", help="TPE vs random vs grid per config")
    parser.add_argument("--rate", type=float, default=2.0)
    parser.add_argument("--image-rate", type=float, help="rate for the image config (default --rate)")
    parser.add_argument("--video-rate", type=float, default=1.0,
                        help="rate for the video config (2 req/s screens empty on 8 GPUs)")
    parser.add_argument("--audio-rate", type=float, help="rate for the audio config (default --rate)")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if not args.bars:
        wall = speed(args.rate, args.trials)
        print(f"has_speed: {args.trials}-trial TPE search, llava34b @ {args.rate:g} req/s: "
              f"{wall:.1f} s wall (target <= 120 s)")
        return
    rates = {"image": args.image_rate, "video": args.video_rate, "audio": args.audio_rate}
    for name, path in CONFIGS.items():
        modality = name.split("(")[1].rstrip(")")
        bars(name, path, rates[modality] or args.rate, args.trials, args.seeds)


if __name__ == "__main__":
    main()
