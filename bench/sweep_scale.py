"""Sweep scaling: one fixed sweep of 48 simulations on ``local`` x1, ``local`` x2 and ``ray``.

The sweep: the three paper models (image, video, audio) x four systems
(EAServe, Dynamo-like, vLLM-like, fixed-batch, each on its example config's
static deployment: no HAS) x four arrival rates (0.5, 1, 2, 4 req/s) x one
seed, 1,500 requests each, mapped as 48 points by
:func:`easerve.experiments.sweep.goodput_sweep`. Each backend runs it in a
fresh pool (or a fresh local Ray); the bench prints the wall time of the
whole run (opening the backend, the sweep, closing it) and of the sweep
alone, checks that every run's CSV table is byte-identical, and prints the
machine's load average before and after each run (the 2-core machines are
shared, and Linux shares the CPU between sessions, not processes: two
workers gain nothing while other sessions keep both cores busy). The
backends take turns, ``--repeats`` rounds, and the bar is judged on each
backend's fastest run, the one least disturbed by other work. A control
first times a pure-Python loop (8 equal tasks) on one and two local
workers: what parallelism the machine gives this session right now.

Bar: two workers take at most 0.6x the serial wall time (end to end).

Run: ``.venv/bin/python bench/sweep_scale.py [--jobs 2] [--num-requests 1500] [--repeats 2] [--no-ray]``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from easerve.experiments.paper import MODALITIES  # noqa: E402
from easerve.experiments.setup import Setup, load_setup  # noqa: E402
from easerve.experiments.sweep import SYSTEMS, Scale, goodput_sweep  # noqa: E402
from easerve_core import Deployment  # noqa: E402
from runtime.parallel import BackendSettings, open_backend  # noqa: E402

RATES_HZ = (0.5, 1.0, 2.0, 4.0)
NOMINAL_RATE_HZ = 2.0
BAR_FRAC = 0.6


def _static(setups: dict[str, Setup]):  # type: ignore[no-untyped-def]
    def pick(modality: str, system: str, rate_hz: float) -> Deployment:
        return setups[modality].deployment.with_(rate_hint_hz=NOMINAL_RATE_HZ)
    return pick


def burn(n: int) -> int:
    """The control's task: pure CPU, no memory traffic, nothing shared."""
    x = 0
    for i in range(n):
        x += i * i
    return x


def control(jobs: int) -> None:
    walls = []
    for n in (1, jobs):
        start = time.perf_counter()
        with open_backend(BackendSettings(num_jobs=n)) as backend:
            backend.map(burn, [12_000_000] * 8)
        walls.append(time.perf_counter() - start)
    print(f"control (8 pure-CPU tasks): 1 worker {walls[0]:.1f} s, {jobs} workers {walls[1]:.1f} s "
          f"({walls[1] / walls[0]:.2f}x; 1/{jobs} = {1 / jobs:.2f}x on idle cores)", flush=True)


def run(settings: BackendSettings, setups: dict[str, Setup], scale: Scale) -> dict[str, object]:
    start = time.perf_counter()
    with open_backend(settings) as backend:
        opened = time.perf_counter()
        sweep = goodput_sweep(setups, _static(setups), scale, backend=backend)
        swept = time.perf_counter()
    end = time.perf_counter()
    csv = sweep.to_csv(index=False)
    return {"backend": settings.describe(), "rows": len(sweep), "wall_s": end - start,
            "open_s": opened - start, "sweep_s": swept - opened, "csv": csv,
            "sha": hashlib.sha256(csv.encode()).hexdigest()[:16]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="workers of the parallel runs (default 2)")
    parser.add_argument("--num-requests", type=int, default=1500, help="requests per simulation")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of every backend, taking turns")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray run")
    args = parser.parse_args()
    setups = {m: load_setup(m, anchored=True) for m in MODALITIES}
    scale = Scale(num_requests=args.num_requests, rates_hz=RATES_HZ, num_seeds=1,
                          timeline_s=60.0, refine_levels=0)
    runs = [BackendSettings(num_jobs=1), BackendSettings(num_jobs=args.jobs)]
    if args.no_ray:
        print("ray: skipped (--no-ray)")
    elif importlib.util.find_spec("ray") is None:
        print("ray: skipped (not installed: pip install -e '.[ray]')")
    else:
        runs.append(BackendSettings(name="ray", num_jobs=args.jobs))
    points = len(setups) * len(SYSTEMS) * len(RATES_HZ) * scale.num_seeds
    print(f"sweep: {points} simulations of {args.num_requests} requests; {os.cpu_count()} cores; "
          f"load {_load()}")
    control(args.jobs)
    results: dict[str, list[dict[str, object]]] = {}
    for round_ in range(args.repeats):
        for settings in runs:
            before = _load()
            r = run(settings, setups, scale)
            results.setdefault(str(r["backend"]), []).append(r)
            print(f"  round {round_ + 1}  {r['backend']:<22} wall {r['wall_s']:6.1f} s  (backend up "
                  f"{r['open_s']:5.1f} s, sweep {r['sweep_s']:6.1f} s)  rows {r['rows']}  table sha256 "
                  f"{r['sha']}  load {before} -> {_load()}", flush=True)
    tables = {r["csv"] for rs in results.values() for r in rs}
    print(f"tables byte-identical across backends and rounds: {len(tables) == 1}")
    best = {name: min(float(r["wall_s"]) for r in rs) for name, rs in results.items()}  # type: ignore[arg-type]
    serial_name = runs[0].describe()
    for name, wall in best.items():
        if name == serial_name:
            print(f"{name}: fastest {wall:.1f} s")
            continue
        frac = wall / best[serial_name]
        verdict = "meets" if frac <= BAR_FRAC else "misses"
        print(f"{name}: fastest {wall:.1f} s, {frac:.2f}x the serial fastest "
              f"({verdict} the bar of {BAR_FRAC}x)")
    return 0 if len(tables) == 1 else 1


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


if __name__ == "__main__":
    sys.exit(main())
