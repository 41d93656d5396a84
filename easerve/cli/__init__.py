"""The ``easerve`` command: one front door, one module per subcommand.

Each subcommand module exposes ``register(subparsers)``, which adds its
parser and sets ``func`` to a callable taking the parsed namespace and
returning an exit status. :data:`COMMANDS` is the one table of subcommands.

Errors: a ``ValueError`` (bad config, bad argument, bad file) becomes one
line on stderr and exit status 2, with no traceback; commands write their
outputs only after their inputs validated, so nothing is half-written.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from easerve import __version__

#: subcommand name -> module under easerve.cli that registers it
COMMANDS: dict[str, str] = {
    "sim": "easerve.cli.sim_cmd",
    "workload": "easerve.cli.workload_cmd",
    "search": "easerve.cli.search_cmd",
    "profile": "easerve.cli.profile_cmd",
    "live": "easerve.cli.live_cmd",
    "calibrate": "easerve.cli.calibrate_cmd",
    "validate": "easerve.cli.validate_cmd",
    "reproduce": "easerve.cli.reproduce_cmd",
}


class UsageError(ValueError):
    """A bad argument or input; reported as one line and exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="easerve",
        description="Encode-aware disaggregated serving of multimodal LLMs: "
        "simulate, search, run live and calibrate.",
    )
    parser.add_argument("--version", action="version", version=f"easerve {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMANDS.values():
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:
        print(f"easerve {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"easerve {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
