"""The ``easerve`` command: one front door, one module per subcommand.

Each subcommand module exposes ``register(subparsers)``, which adds its
parser and sets ``func`` to a callable taking the parsed namespace and
returning an exit status. :data:`COMMANDS` is the one table of subcommands.

Errors: :func:`main` is the one error boundary (docs/cli.md). Bad input of
any kind (a ``ValueError`` from a config, argument or file, an ``OSError``
from an unusable path, a ``MemoryError`` from an absurd size) becomes one
line on stderr naming the culprit and exit status 2, with no traceback;
argparse's own errors too (no usage block). Anything else is a bug: one
line, exit status 1, and the traceback with ``easerve --debug ...`` or
``EASERVE_DEBUG=1``. SIGTERM stops a command as Ctrl-C does (exit status 143;
130 for Ctrl-C). Commands check their outputs before they start and write
them whole (:mod:`easerve.cli.outputs`), so nothing is half-written. A choice
made for the user (:class:`easerve_core.checks.Notice`: a trace sorted, a
default deployment, folders created for ``--out``) is one line on stderr,
``easerve CMD: note: ...``, and the command goes on. A reader that closes the
output early (``easerve model list | head``) ends the command quietly, with
exit status 141 as for SIGPIPE.
"""

from __future__ import annotations

import argparse
import importlib
import os
import select
import signal
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

from easerve import __version__
from easerve_core.checks import Notice

#: subcommand name -> module under easerve.cli that registers it
COMMANDS: dict[str, str] = {
    "sim": "easerve.cli.sim_cmd",
    "capacity": "easerve.cli.capacity_cmd",
    "workload": "easerve.cli.workload_cmd",
    "search": "easerve.cli.search_cmd",
    "profile": "easerve.cli.profile_cmd",
    "live": "easerve.cli.live_cmd",
    "calibrate": "easerve.cli.calibrate_cmd",
    "validate": "easerve.cli.validate_cmd",
    "reproduce": "easerve.cli.reproduce_cmd",
    "plan-table": "easerve.cli.plan_table_cmd",
    "controller-eval": "easerve.cli.controller_eval_cmd",
    "recipe": "easerve.cli.recipe_cmd",
    "model": "easerve.cli.model_cmd",
    "gpu": "easerve.cli.gpu_cmd",
}
#: set to 1 to see the traceback of an internal error (like ``--debug``)
DEBUG_ENV = "EASERVE_DEBUG"


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as an interrupt so every command's Ctrl-C path handles it."""


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors as one line (no usage block) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {one_line(message)}", file=sys.stderr)
        raise SystemExit(2)


def one_line(text: str) -> str:
    """``text`` with its lines joined by ``; `` (a message must stay one line)."""
    return "; ".join(part.strip() for part in str(text).splitlines() if part.strip())


def describe(exc: BaseException) -> tuple[str, int]:
    """(the one line to print, the exit status) for an exception a command raised."""
    if isinstance(exc, ValueError):
        return one_line(str(exc)), 2
    if isinstance(exc, OSError):
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
        what = exc.strerror or type(exc).__name__
        return one_line(f"{where}: {what}" if where else f"{what}: {exc}"), 2
    if isinstance(exc, MemoryError):
        return one_line(f"too large for this machine's memory ({exc or 'MemoryError'}); "
                        "see the size limits in docs/cli.md"), 2
    return one_line(f"internal error: {type(exc).__name__}: {exc} (a bug; rerun with --debug "
                    f"or {DEBUG_ENV}=1 for the traceback)"), 1


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While a command runs, SIGTERM raises :class:`Terminated` in the main thread. A library that
    turns the interrupt it met into a plain ``KeyboardInterrupt`` (Ray's ``wait`` does) still
    ends the command as terminated."""
    received: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        received.append(signum)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except KeyboardInterrupt as exc:
        if received and not isinstance(exc, Terminated):
            raise Terminated() from exc
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def notices_on_stderr(command: str) -> Iterator[None]:
    """While a command runs, each :class:`Notice` is one line on stderr (every time it is issued)."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", Notice)
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
            if issubclass(category, Notice):
                print(f"easerve {command}: note: {one_line(str(message))}", file=sys.stderr)
            else:
                shown(message, category, *args, **kwargs)

        warnings.showwarning = show
        yield


def stdout_reader_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (``| head`` read enough)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll here, or stdout is no file
        return False


def named_command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option, if it is a command
    (None after a top-level ``--help``, which lists every command)."""
    for word in argv:
        if word in ("-h", "--help"):
            return None
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with ``command``, only that subcommand's module is imported, and the
    others are their names alone (a command's imports take seconds: ``easerve workload`` should
    not wait for the simulator's plots and the live executor's models)."""
    parser = OneLineParser(
        prog="easerve",
        description="Encode-aware disaggregated serving of multimodal LLMs: "
        "simulate, search, run live and calibrate.",
    )
    parser.add_argument("--version", action="version", version=f"easerve {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help=f"show the traceback of an internal error (also {DEBUG_ENV}=1)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if command in (None, name):
            importlib.import_module(module_name).register(subparsers)
        else:
            subparsers.add_parser(name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(named_command(sys.argv[1:] if argv is None else argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a one-line usage error
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    debug = args.debug or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    try:
        with sigterm_as_interrupt(), notices_on_stderr(args.command):
            status = int(args.func(args) or 0)
            sys.stdout.flush()  # here, not at exit: a reader gone is then the case below
            return status
    except KeyboardInterrupt as exc:
        why = "terminated" if isinstance(exc, Terminated) else "interrupted"
        print(f"easerve {args.command}: {why}", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and stdout_reader_gone():  # not a worker's pipe: `| head`
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
            return 128 + signal.SIGPIPE  # as a command killed by SIGPIPE
        if debug:
            raise
        message, status = describe(exc)
        print(f"easerve {args.command}: error: {message}", file=sys.stderr)
        return status


if __name__ == "__main__":
    sys.exit(main())
