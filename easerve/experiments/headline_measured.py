"""Run only the headline on measured hardware: ``python -m easerve.experiments.headline_measured --out DIR``.

The full ``easerve reproduce`` runs it among every other study (``EvalSize.measured_headline``);
this entry point runs it alone, at the full run's settings
(:func:`~easerve.experiments.measured_study.measured_plan` of
:data:`~easerve.experiments.reproduce.FULL`), and writes ``DIR/headline_measured.csv``
plus ``DIR/headline_measured.json`` (its settings and wall time). Copy the CSV into
``docs/results/`` and rebuild the report from the committed tables
(docs/results/README.md, "The headline on measured hardware").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from easerve.cli.outputs import check_study_folder, write_tables
from easerve.experiments.eval_size import FULL
from easerve.experiments.measured_setup import MEASURED_SYSTEMS
from easerve.experiments.measured_study import KINDS, measured_headline, measured_plan
from runtime.files import write_text_atomic
from runtime.parallel import BackendSettings, open_backend


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m easerve.experiments.headline_measured",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for headline_measured.csv")
    parser.add_argument("--jobs", type=int, default=1, help="local worker processes (default 1)")
    parser.add_argument("--systems", nargs="+", default=list(MEASURED_SYSTEMS),
                        help=f"aiconfigurator systems (default: {' '.join(MEASURED_SYSTEMS)})")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS),
                        help=f"profile kinds (default: {' '.join(KINDS)})")
    args = parser.parse_args(argv)
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f} s] {msg}", file=sys.stderr, flush=True)

    plan = measured_plan(FULL)
    settings = BackendSettings(num_jobs=args.jobs)
    try:
        check_study_folder(args.out)  # before ten minutes of simulation
        with open_backend(settings) as pool:
            table = measured_headline(plan, systems=args.systems, kinds=args.kinds, backend=pool, log=log)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_tables(args.out, {"headline_measured": table})
    meta = {"systems": args.systems, "kinds": args.kinds, "scale": asdict(plan.scale),
            "has_trials": plan.has_trials, "has_requests": plan.has_requests,
            "has_samples": plan.has_samples, "backend": settings.describe(),
            "wall_s": time.perf_counter() - start}
    write_text_atomic(args.out / "headline_measured.json", json.dumps(meta, indent=2) + "\n")
    log(f"wrote {args.out / 'headline_measured.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
