"""``easerve reproduce [--quick] --out DIR``: the paper's evaluation in the simulator.

Writes CSV tables, PNG figures and ``report.md`` into DIR
(:mod:`easerve.experiments.reproduce`). ``--quick`` finishes in under three
minutes on a 2-core machine; the full run's report is committed under
docs/results/.
"""

from __future__ import annotations

import argparse

from easerve.cli.common import add_force, add_out, command_parser
from easerve.cli.outputs import RunFolder
from easerve.experiments.reproduce import reproduce


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "reproduce", help="run the paper's evaluation in the simulator",
                       doc=__doc__, func=run)
    add_out(p, "output folder")
    p.add_argument("--quick", action="store_true", help="a small version (under 3 minutes)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    add_force(p)


def run(args: argparse.Namespace) -> int:
    folder = RunFolder(args.out, force=args.force)
    with folder as staging:
        path = reproduce(staging, quick=args.quick, quiet=args.quiet)
    print(f"report: {args.out / path.relative_to(staging)}")
    return 0
