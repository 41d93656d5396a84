"""``easerve reproduce [--quick] [--no-residual] --out DIR [--backend local|ray] [--jobs N]
[--address ADDR]``.

The paper's evaluation in the simulator: writes CSV tables, PNG figures and
``report.md`` into DIR (:mod:`easerve.experiments.reproduce`). ``--quick``
finishes in about a minute and a half on a 2-core machine, on two local
workers by default; the full run runs in this process by default, and its
report is committed under docs/results/. ``--jobs`` and ``--backend ray``
spread the simulations and HAS studies over more workers; the tables are the
same whatever runs them (docs/scaling.md). ``--no-residual`` drops the
residual per-call encoder cost, keeping the measured host preprocessing.
"""

from __future__ import annotations

import argparse

from easerve.cli.common import add_backend, add_force, add_out, backend_settings, command_parser
from easerve.cli.outputs import RunFolder
from easerve.experiments.reproduce import reproduce


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "reproduce", help="run the paper's evaluation in the simulator",
                       doc=__doc__, func=run)
    add_out(p, "output folder")
    p.add_argument("--quick", action="store_true", help="a small version (about 90 s on two cores)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--no-residual", action="store_true",
                   help="drop the residual per-call encoder cost (measured host preprocessing only)")
    add_backend(p, jobs_default="1, or 2 with --quick")
    add_force(p)


def run(args: argparse.Namespace) -> int:
    folder = RunFolder(args.out, force=args.force)
    with folder as staging:
        path = reproduce(staging, quick=args.quick, quiet=args.quiet, backend=backend_settings(args),
                         residual=not args.no_residual)
    print(f"report: {args.out / path.relative_to(staging)}")
    return 0
