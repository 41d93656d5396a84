"""``easerve search --trials 30`` wall time: this tree against another checkout, interleaved.

Runs the same search command from this checkout and from ``--old-tree`` (a
checkout of an older commit, e.g. ``git worktree add ../old COMMIT``) in
turn, ``--repeats`` times each (old, new, old, new, ...), each in a fresh
process with that tree first on ``PYTHONPATH``, and prints both medians and
their ratio (target for issue 29: at most 1.5). The wall time is the whole
command's, start-up included.

Run: ``.venv/bin/python bench/has_paired.py --old-tree ../old [--config C] [--rate R] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _once(tree: Path, config: str, rate: float, trials: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        cmd = [sys.executable, "-m", "easerve", "search", config, "--rate", f"{rate:g}", "--trials",
               str(trials), "--out", str(Path(tmp) / "out")]
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{tree}: easerve search failed: {done.stderr[-500:]}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-tree", required=True, type=Path)
    parser.add_argument("--config", default="configs/llava34b_rtx6000ada.toml")
    parser.add_argument("--rate", type=float, default=2.0)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    walls: dict[str, list[float]] = {"old": [], "new": []}
    for i in range(args.repeats):
        for name, tree in (("old", args.old_tree.resolve()), ("new", ROOT)):
            walls[name].append(_once(tree, args.config, args.rate, args.trials))
            print(f"round {i + 1} {name}: {walls[name][-1]:.2f} s", flush=True)
    old, new = statistics.median(walls["old"]), statistics.median(walls["new"])
    print(f"median wall: old {old:.2f} s, new {new:.2f} s, new/old {new / old:.2f} (target <= 1.5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
