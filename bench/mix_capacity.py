"""A phase mix's capacity in the simulator, and how long a stream must be to measure it.

The image -> video and resolution shifts run each phase at
:data:`easerve.experiments.shifts.SIM_LOAD_FRAC` of its mix's capacity
(:data:`~easerve.experiments.shifts.SIM_CAPACITY_HZ`): the highest rate at
which the best of the screen's best allocations for either phase keeps >= 90%
of the requests within the mix's moderate SLO (8 x RTX 6000 Ada; ``B8``; the
allocations are :data:`ALLOCATIONS`). This measures it again, for each stream
length of ``--lengths``: one Poisson stream (seed 2000) that long at each rate
tried, the batcher told that rate, the highest rate found by
:class:`easerve_core.rate_search.RateBisection` (to 1%). A rate "holds" when
>= 90% of the stream's requests meet the SLO, the rule the constants were set
by; the first ones were set on 300 s streams.

A mix whose requests decode for a minute or more fills its decoder slowly:
the queue that shows a rate is too high starts to build only after several
hundred seconds, and its TTFT passes the limit later still. A stream is long
enough when a longer one gives the same capacity; the table shows where that
is for each mix (docs/controller.md, "The shifts").

Run: ``.venv/bin/python bench/mix_capacity.py [--mixes llava-small-chat,...]
[--lengths 300,900,1800,3600] [--jobs 2]``
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.trace_encode_batch import deployment  # noqa: E402
from easerve.experiments.mix_control import phase_setups  # noqa: E402
from easerve.experiments.shifts import SHIFTS  # noqa: E402
from easerve.experiments.sweep import SegmentLength, Sweep  # noqa: E402
from easerve_core.deployment import SMSharing  # noqa: E402
from easerve_core.rate_search import RateBisection, find_capacity  # noqa: E402
from runtime.parallel.base import run_tasks  # noqa: E402
from runtime.parallel.local_pool import LocalPool  # noqa: E402

#: each mix's shift and the screen's best allocations for either of its shift's phases (s 0 where
#: all Prefill is local, 0.5 where it is split, 1 where the encoders cannot hold the LM); every
#: one shares each encoder's SMs per micro-batch (EAServe's dynamic sharing)
ALLOCATIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "qwen-image-chat": ("image-video", ("E2x1 P1x2 D1x4 s1", "E2x2 P0x2 D1x4 s0")),
    "qwen-video-caption": ("image-video", ("E2x1 P2x2 D1x2 s1", "E3x2 P0x2 D1x2 s0")),
    "llava-small-chat": ("resolution", ("E2x2 P0x2 D1x4 s0", "E1x2 P1x2 D1x4 s0.5")),
    "llava-anyres-short": ("resolution", ("E3x2 P0x2 D1x2 s0", "E1x2 P2x2 D1x2 s0.5")),
}
BATCH = 8
SEED = 2000
TARGET = 0.9


def capacity(mix: str, allocation: str, length_s: float) -> dict[str, object]:
    """The highest rate at which ``allocation`` keeps :data:`TARGET` of ``mix``'s requests within
    its moderate SLO on one stream ``length_s`` long (a task)."""
    setup = phase_setups(SHIFTS[ALLOCATIONS[mix][0]])[mix]
    slo = setup.slos["moderate"]
    sweep = Sweep(length=SegmentLength(segment_s=length_s), seeds=(SEED,))
    base = setup.deployment.with_(sm_sharing=SMSharing.DYNAMIC)

    def holds(rate_hz: float) -> bool:
        dep = deployment(base, allocation, BATCH, rate_hz)
        (point,) = sweep.points(setup, dep, rate_hz)
        summary = point.simulate().summary(slo)
        return summary.attainment is not None and summary.attainment >= TARGET

    found = find_capacity(RateBisection(2.0, max_rate_hz=16.0, min_rate_hz=0.1, rel_tol_frac=0.01), holds)
    return {"mix": mix, "allocation": allocation, "length_s": length_s,
            "capacity_hz": round(found.capacity_hz, 3), "failed_hz": found.failed_hz,
            "outcome": str(found.outcome), "runs": found.num_steps}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mixes", default=",".join(ALLOCATIONS))
    parser.add_argument("--lengths", default="300,900,1800,3600")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    mixes = [m for m in args.mixes.split(",") if m]
    unknown = sorted(set(mixes) - set(ALLOCATIONS))
    if unknown:
        parser.error(f"--mixes: unknown {', '.join(unknown)}; known: {', '.join(ALLOCATIONS)}")
    try:
        lengths = [float(x) for x in args.lengths.split(",")]
    except ValueError:
        parser.error(f"--lengths: expected seconds like 300,3600, got {args.lengths!r}")
    if not lengths or min(lengths) <= 0:
        parser.error(f"--lengths: every length must be > 0, got {args.lengths!r}")
    tasks = [partial(capacity, m, a, s) for m in mixes for a in ALLOCATIONS[m][1] for s in lengths]
    with LocalPool(args.jobs) as pool:
        frame = pd.DataFrame(run_tasks(pool, tasks))
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(frame.to_string(index=False))
        best = frame.groupby(["mix", "length_s"])["capacity_hz"].max().unstack("length_s")
        print("\nthe best allocation's capacity (req/s) by stream length (s):")
        print(best.to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
