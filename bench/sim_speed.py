"""Simulator speed: simulated requests per wall-second and SimPy events per request.

20,000 requests of the LLaVA-34B image workload on 8x RTX 6000 Ada with the
EAServe deployment of ``configs/llava34b_rtx6000ada.toml``, in three rows:
output lengths 128 and 1,024 tokens at 0.5 req/s (stable at both), and a
high-load row at the config's 2 req/s with 512-token outputs (Decode queues
build up). Events per request must not grow with output length (decode
advances to its next join or leave in one timeout); the ratio of the first
two rows is printed. Outputs end at LLaVA-34B's 4,096-token context (docs/models.md, "The
context"; since 2026-12-03): in the 1,024-token row 38% of them end early (656-1,024 tokens, mean
954), so a ``--against`` run with an older tree compares other work on that row; the other two
rows are the same work in both.

``--against DIR``: a paired comparison with another checkout (e.g. a
``git worktree`` of an older commit): every row runs ``--repeat`` times in
each tree, in fresh processes, alternating (this tree, DIR, this tree, ...),
and the medians are printed side by side with their ratio. DIR's
``bench/sim_speed.py`` must have this file's ``run`` function.

``--controller-idle``: the online controller's cost when it is on but never
decides (a one-band plan table holding the run's own deployment: it is
offered every arrival and finish and polled every ``check_every_s``): every
row runs ``--repeat`` times without and with it, in fresh processes of this
tree, alternating, and the medians are printed side by side (bar: under 5%),
with the median of the pairs' costs (each pair runs back to back, so the
host's drift over the bench cancels in it). With ``--instructions`` the
same rows are counted in instructions per request under valgrind
(cachegrind): on a shared 2-core host single timed runs spread by 15% and
more, a count does not.

``--profile measured``: the same rows on a measured profile (calibration.measured:
LLaVA-34B priced from aiconfigurator-core's L40S vLLM tables, the AD102 chip of the
RTX 6000 Ada, the rest of the roofline) against the analytic one, in fresh processes
of this tree, alternating, medians side by side (bar: measured at >= 50% of the
roofline's speed). Building the profile is outside the timed simulation.

Run: ``.venv/bin/python bench/sim_speed.py [--num-requests N] [--rate R]
[--against DIR | --controller-idle | --profile measured] [--repeat 3]`` (default 0.5 req/s
for the first two rows).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TypeVar

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibration.aiconfigurator import load_tables  # noqa: E402
from calibration.measured import MeasuredProfile, model_tables  # noqa: E402
from calibration.session import Overrides, compose  # noqa: E402
from calibration.specs import gpu_spec, model_spec  # noqa: E402
from easerve_core.config import ExperimentConfig  # noqa: E402
from easerve_core.controller import Band, Controller, PlanTable  # noqa: E402
from easerve_core.workload import generate  # noqa: E402
from runtime.configs import load_experiment  # noqa: E402

CONFIG = ROOT / "configs" / "llava34b_rtx6000ada.toml"
OUTPUT_LENGTHS = (128, 1024)
#: arrival rate at which the deployment is stable at both output lengths; at the
#: config's 2 req/s, 1,024-token outputs overload Decode and the run changes regime
RATE_HZ = 0.5
#: the high-load row: the config's own rate, 512-token outputs
HIGH_LOAD = (2.0, 512)


#: the measured profile's database system and engine (``--profile measured``)
MEASURED_FROM = ("l40s", "vllm")


def _measured_profile(config: ExperimentConfig) -> MeasuredProfile:
    model = model_spec(config.model)
    tables = model_tables(load_tables(*MEASURED_FROM), model)
    return MeasuredProfile(model=model, gpu=gpu_spec(config.gpu), tables=tables)


def run(num_requests: int, rate_hz: float | None, output_tokens: int,
        controller_idle: bool = False, profile_kind: str = "analytic") -> dict[str, float]:
    config = load_experiment(CONFIG)
    spec = config.workload if rate_hz is None else config.workload.with_rate(rate_hz)
    mix = replace(spec.mix, output_tokens=(output_tokens, output_tokens))
    spec = replace(spec, mix=mix, num_requests=num_requests)
    requests = generate(spec, np.random.default_rng(config.seed))
    measured = _measured_profile(config) if profile_kind == "measured" else None
    session = compose(config, Overrides(requests=requests, profile=measured))
    controller = None
    if controller_idle:  # one band: the controller observes and polls but never decides
        controller = Controller(PlanTable((Band(rate_hz=1.0, deployment=session.plan.deployment),)))
    engine = session.sim(controller=controller, reconfiguration_s=None if controller is None else 0.0)
    start, cpu = time.perf_counter(), time.process_time()
    result = engine.run()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    summary = result.summary()
    return {"wall_s": wall, "req_per_s": num_requests / wall, "req_per_cpu_s": num_requests / cpu,
            "events_per_req": result.meta["events_per_request"],
            "throughput_rps": summary.throughput_rps, "ok": summary.num_ok}


def _rows(rate_hz: float) -> list[tuple[str, float, int]]:
    rows = [(f"output_tokens={n:5d} @ {rate_hz:g} req/s", rate_hz, n) for n in OUTPUT_LENGTHS]
    rate, n = HIGH_LOAD
    return [*rows, (f"output_tokens={n:5d} @ {rate:g} req/s", rate, n)]


def _run_code(num_requests: int, rate_hz: float, output_tokens: int, controller_idle: bool,
              profile_kind: str = "analytic") -> str:
    """Python for a fresh process that leaves one ``run`` of its tree's bench in ``row``
    (``controller_idle`` and ``profile_kind`` named only when set: another tree's ``run`` may not
    know them)."""
    extra = ", controller_idle=True" if controller_idle else ""
    extra += f", profile_kind={profile_kind!r}" if profile_kind != "analytic" else ""
    return ("import json, sys; sys.path.insert(0, 'bench'); import sim_speed; "
            f"row = sim_speed.run({num_requests}, {rate_hz!r}, {output_tokens}{extra})")


def _run_in(tree: Path, num_requests: int, rate_hz: float, output_tokens: int,
            controller_idle: bool = False, profile_kind: str = "analytic") -> dict[str, float]:
    """One row in a fresh process of ``tree``'s code (its bench/sim_speed.py ``run``)."""
    code = _run_code(num_requests, rate_hz, output_tokens, controller_idle, profile_kind)
    code += "; print(json.dumps(row))"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True,
                         capture_output=True, text=True).stdout
    row: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return row


def _each(runs: list[dict[str, float]]) -> str:
    return ", ".join(f"{r['req_per_s']:.0f}" for r in runs)


K = TypeVar("K")
Row = dict[str, float]


def _alternating(repeat: int, sides: Mapping[K, Callable[[], Row]]) -> dict[K, list[Row]]:
    """``repeat`` runs of every side, alternating (side 1, side 2, side 1, ...)."""
    runs: dict[K, list[Row]] = {key: [] for key in sides}
    for _ in range(repeat):
        for key, run_one in sides.items():
            runs[key].append(run_one())
    return runs


def _medians(runs: Mapping[K, list[Row]], field: str) -> dict[K, float]:
    return {key: statistics.median(r[field] for r in rs) for key, rs in runs.items()}


def paired(other: Path, num_requests: int, rate_hz: float, repeat: int) -> None:
    """Medians of ``repeat`` alternating runs per row here and in ``other``, side by side."""
    trees = {"this": ROOT, "other": other.resolve()}
    # relative to the working folder: the output is quoted in docs, where a machine path means nothing
    print(f"this:  {os.path.relpath(trees['this'])}\nother: {os.path.relpath(trees['other'])}\n"
          f"{num_requests} requests, median of {repeat} alternating runs per row")
    for label, rate, n in _rows(rate_hz):
        runs = _alternating(repeat, {side: partial(_run_in, tree, num_requests, rate, n)
                                     for side, tree in trees.items()})
        med = _medians(runs, "req_per_s")
        ev = {side: rs[0]["events_per_req"] for side, rs in runs.items()}
        print(f"{label}: this {med['this']:7.0f} req/s ({ev['this']:.2f} events/req)  "
              f"other {med['other']:7.0f} req/s ({ev['other']:.2f} events/req)  "
              f"ratio {med['this'] / med['other']:.2f}x  "
              f"[this {_each(runs['this'])}; other {_each(runs['other'])}]")


def paired_idle(num_requests: int, rate_hz: float, repeat: int) -> None:
    """Medians of ``repeat`` alternating runs per row here, without and with an idle controller."""
    print(f"{os.path.relpath(ROOT)}: {num_requests} requests, median of {repeat} alternating runs per row")
    for label, rate, n in _rows(rate_hz):
        runs = _alternating(repeat, {idle: partial(_run_in, ROOT, num_requests, rate, n, controller_idle=idle)
                                     for idle in (False, True)})
        med, cpu = _medians(runs, "req_per_s"), _medians(runs, "req_per_cpu_s")
        ev = {idle: rs[0]["events_per_req"] for idle, rs in runs.items()}
        # each pair ran back to back: the median of the pairs' costs cancels the host's drift
        pairs = statistics.median(1 - on["req_per_s"] / off["req_per_s"]
                                  for off, on in zip(runs[False], runs[True], strict=True))
        print(f"{label}: off {med[False]:7.0f} req/s  idle controller {med[True]:7.0f} req/s  "
              f"cost {1 - med[True] / med[False]:+.1%}, median of the pairs' costs {pairs:+.1%} "
              f"(per CPU-second: off {cpu[False]:.0f}, "
              f"idle {cpu[True]:.0f}, cost {1 - cpu[True] / cpu[False]:+.1%}; events/req "
              f"{ev[False]:.2f} -> {ev[True]:.2f})  [off {_each(runs[False])}; idle {_each(runs[True])}]")


def paired_profiles(num_requests: int, rate_hz: float, repeat: int) -> None:
    """Medians of ``repeat`` alternating runs per row here, on the analytic and the measured profile."""
    print(f"{os.path.relpath(ROOT)}: {num_requests} requests, median of {repeat} alternating runs per "
          f"row; measured = {'/'.join(MEASURED_FROM)} tables")
    for label, rate, n in _rows(rate_hz):
        runs = _alternating(repeat, {kind: partial(_run_in, ROOT, num_requests, rate, n, profile_kind=kind)
                                     for kind in ("analytic", "measured")})
        med = _medians(runs, "req_per_s")
        ev = {kind: rs[0]["events_per_req"] for kind, rs in runs.items()}
        print(f"{label}: analytic {med['analytic']:7.0f} req/s ({ev['analytic']:.2f} events/req)  "
              f"measured {med['measured']:7.0f} req/s ({ev['measured']:.2f} events/req)  "
              f"measured/analytic {med['measured'] / med['analytic']:.2f}x (bar: >= 0.50)  "
              f"[analytic {_each(runs['analytic'])}; measured {_each(runs['measured'])}]", flush=True)


def _instructions(num_requests: int, rate_hz: float, output_tokens: int, controller_idle: bool) -> int:
    """Instructions one fresh process of this tree executes for ``run`` (valgrind's cachegrind,
    no cache simulation; the hash seed fixed), as it counts them."""
    code = _run_code(num_requests, rate_hz, output_tokens, controller_idle)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}
    tool = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    out = subprocess.run([*tool, sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stderr
    refs = [line for line in out.splitlines() if "I   refs:" in line or "I refs:" in line]
    if not refs:
        raise RuntimeError(f"valgrind printed no instruction count:\n{out[-2000:]}")
    return int(refs[-1].split(":")[-1].strip().replace(",", ""))


def instructions_idle(num_requests: int, rate_hz: float) -> None:
    """The idle controller's cost in instructions per simulated request: each side's count at
    ``num_requests`` less its count at a tenth of them (the start-up and imports cancel), so the
    host's speed does not enter; the workload's generation is in both sides."""
    if shutil.which("valgrind") is None:
        raise SystemExit("sim_speed: --instructions needs valgrind on the PATH")
    small = max(1, num_requests // 10)
    print(f"{ROOT}: instructions per request over {num_requests - small} requests "
          f"({num_requests} less {small}), valgrind cachegrind")
    for label, rate, n in _rows(rate_hz):
        per = {}
        for idle in (False, True):
            big, little = (_instructions(k, rate, n, idle) for k in (num_requests, small))
            per[idle] = (big - little) / (num_requests - small)
        print(f"{label}: off {per[False]:9.0f}  idle controller {per[True]:9.0f} instructions/request  "
              f"cost {per[True] / per[False] - 1:+.1%}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-requests", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=RATE_HZ,
                        help=f"arrival rate in req/s of the first two rows (default {RATE_HZ})")
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout to compare with, run for run (see the docstring)")
    parser.add_argument("--controller-idle", action="store_true",
                        help="paired runs without and with an idle online controller (see the docstring)")
    parser.add_argument("--instructions", action="store_true",
                        help="with --controller-idle: count instructions under valgrind instead of timing")
    parser.add_argument("--profile", choices=("analytic", "measured"), default="analytic",
                        help="measured: paired runs on the analytic and a measured profile (docstring)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs per row and side with --against or --controller-idle")
    args = parser.parse_args()
    if args.controller_idle and args.instructions:
        instructions_idle(args.num_requests, args.rate)
        return 0
    if args.controller_idle:
        paired_idle(args.num_requests, args.rate, args.repeat)
        return 0
    if args.profile == "measured":
        paired_profiles(args.num_requests, args.rate, args.repeat)
        return 0
    if args.against is not None:
        paired(args.against, args.num_requests, args.rate, args.repeat)
        return 0
    rows = {label: run(args.num_requests, rate, n) for label, rate, n in _rows(args.rate)}
    for label, row in rows.items():
        print(f"{label}: {row['req_per_s']:8.0f} simulated req/s  "
              f"{row['events_per_req']:6.2f} events/req  wall {row['wall_s']:.2f} s  "
              f"(sim throughput {row['throughput_rps']:.2f} req/s, {row['ok']} ok)")
    a, b = (row["events_per_req"] for row in list(rows.values())[:2])
    print(f"events/req ratio 1024 vs 128: {b / a:.3f} (bar: within 20%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
