"""The one device check of issue 8: SM levels, stage latency samples, the sharing ablation.

Usage (repository root)::

    python3 bench/gpu/run_device_check.py --out "$OUT"      # on the H200, ~7 min
    python3 bench/gpu/run_device_check.py --dry-run --out /tmp/x   # same path, CPU, tiny

Sections run in priority order, each under its own wall-clock budget inside
a total one (bench/gpu/plan.py); a failing section is recorded in
``summary.json`` and the run goes on. Outputs (at most 8 files, see
bench/gpu/README.md): ``summary.json``, ``green.csv``, ``encode.csv``,
``lm.csv``, ``ablation.csv`` and ``samples/<model>.json`` (fitted back on the
development machine with ``easerve profile fit``).

Needs only torch, transformers, numpy and pandas (what the H200 image has):
the repository root is put on ``sys.path``, so easerve need not be installed.

This file is the door: it reads and checks the flags (and the tables
``--share-tables`` names) before torch loads, so a bad one is refused with
exit status 2 in about a second, not after ten seconds of imports. The run
itself is :func:`bench.gpu.device_run.run`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.gpu.plan import MODELS, SECTIONS, dry_plan  # noqa: E402
from easerve_core.sm_share import SMShareTable  # noqa: E402


def read_flags(argv: list[str] | None = None) -> tuple[argparse.Namespace, dict[str, SMShareTable]]:
    """The flags, checked before torch loads (a bad one is refused at once, exit 2), and the SM-share
    tables ``--share-tables`` names."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny models, fake SM levels")
    parser.add_argument("--out", default=None, help="output folder (default: $OUT, else runs/device_check)")
    parser.add_argument("--models", nargs="*", default=None, help="subset of model pairs to profile")
    parser.add_argument("--sections", default=None,
                        help=f"comma-separated subset of {','.join(SECTIONS)} (a rerun); default all")
    parser.add_argument("--share-tables", type=Path, default=None,
                        help="an earlier run's summary.json: its measured SM-share tables drive the "
                             "ablation when this run does not measure encode")
    args = parser.parse_args(argv)
    if args.models:
        unknown = sorted(set(args.models) - set(MODELS))
        if unknown:
            parser.error(f"unknown models {unknown}; known: {', '.join(MODELS)}")
        args.models = tuple(args.models)
    if args.sections:
        args.sections = tuple(x.strip() for x in args.sections.split(","))
        try:  # the plan's own check, on the plan that needs no device
            dataclasses.replace(dry_plan(), sections=args.sections)
        except ValueError as exc:
            parser.error(f"--sections: {exc}")
    earlier: dict[str, SMShareTable] = {}
    if args.share_tables:
        try:
            tables = json.loads(args.share_tables.read_text()).get("sm_share_table") or {}
            earlier = {m: SMShareTable.from_dict(t) for m, t in tables.items()}
        except (OSError, UnicodeDecodeError, ValueError, AttributeError, TypeError) as exc:
            parser.error(f"--share-tables {args.share_tables}: not an earlier run's summary.json "
                         f"({type(exc).__name__}: {exc})")
    return args, earlier


def main(argv: list[str] | None = None) -> int:
    args, earlier = read_flags(argv)
    out = Path(args.out or os.environ.get("OUT") or ROOT / "runs" / "device_check")
    from bench.gpu.device_run import run  # torch and transformers: seconds, so after the flags

    return run(dry_run=args.dry_run, out=out, models=args.models, sections=args.sections, earlier=earlier)


if __name__ == "__main__":
    sys.exit(main())
