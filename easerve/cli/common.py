"""What every subcommand module shares: how its parser is made, and the one door from a
config argument to a session."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from calibration.session import Overrides, Session, compose
from easerve.resources import load_config
from easerve_core.checks import notice
from easerve_core.config import ExperimentConfig
from easerve_core.workload.replay import TokenTrace
from runtime.parallel import BACKENDS, BackendSettings


def command_parser(subparsers: Any, name: str, *, help: str, doc: str | None,
                   func: Callable[[argparse.Namespace], int] | None) -> argparse.ArgumentParser:
    """The subcommand ``name``: ``help`` in the command list, the module docstring ``doc`` as its
    ``--help`` text (line breaks kept), ``func`` run with the parsed namespace (None: its own
    sub-actions set theirs)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if func is not None:
        parser.set_defaults(func=func)
    return parser


def add_config(parser: argparse.ArgumentParser, help: str = "experiment TOML") -> None:
    """The config argument: a path, or a shipped example by file name (easerve.resources.find_config)."""
    parser.add_argument("config", type=Path, help=f"{help}; a path, or a shipped example by name "
                        "(e.g. llava34b_rtx6000ada.toml)")


def add_out(parser: argparse.ArgumentParser, help: str) -> None:
    """The required ``--out`` argument."""
    parser.add_argument("--out", type=Path, required=True, help=help)


def add_force(parser: argparse.ArgumentParser) -> None:
    """``--force``: replace an existing, non-empty output folder whole (easerve.cli.outputs)."""
    parser.add_argument("--force", action="store_true",
                        help="replace an existing, non-empty --out folder (default: refuse)")


def add_backend(parser: argparse.ArgumentParser, *, jobs: bool = True, jobs_default: str = "1") -> None:
    """Where the command's independent tasks run: ``--backend``, ``--address`` and (``jobs``) ``--jobs``.

    ``jobs_default`` only words the help; the default itself is resolved by
    the command (docs/scaling.md).
    """
    parser.add_argument("--backend", default="local",
                        help=f"where independent tasks run: {' | '.join(BACKENDS)} (default local)")
    if jobs:
        parser.add_argument("--jobs", type=int, default=None,
                            help=f"tasks at once (default {jobs_default}; local 1 runs in this process; "
                                 "ray: every CPU of the cluster)")
    parser.add_argument("--address", default=None,
                        help="the Ray cluster to join (--backend ray): auto, HEAD:6379 or "
                             "ray://HEAD:10001; none starts a local Ray on this machine's cores")


def backend_settings(args: argparse.Namespace, *, num_jobs: int | None = None) -> BackendSettings:
    """The backend ``args`` ask for (``num_jobs`` when the command resolved it, else ``--jobs``)."""
    jobs = num_jobs if num_jobs is not None else getattr(args, "jobs", None)
    return BackendSettings(name=args.backend, num_jobs=jobs, address=args.address)


def open_session(config: str | Path | ExperimentConfig, overrides: Overrides | None = None, *,
                 runs_deployment: bool = False) -> Session:
    """The command line's one way from a config argument to a run: the config (a path or a
    shipped name, :func:`easerve.resources.load_config`, ``runs_deployment`` as there; or one
    the command loaded already) composed with ``overrides`` (:func:`calibration.session.compose`).
    Two choices the plan made for the user are one note each (docs/cli.md): a public trace's rows
    whose inputs its items exceed, and outputs stopped at the model's context."""
    if not isinstance(config, ExperimentConfig):
        config = load_config(config, runs_deployment=runs_deployment)
    session = compose(config, overrides)
    plan = session.plan
    trace = plan.workload.trace if plan.workload is not None else None
    if isinstance(trace, TokenTrace) and (under := trace.rows_under_items(plan.requests)):
        notice(f"workload.trace: {under:,} of {len(plan.requests):,} rows have no more input tokens than the "
               "items drawn for them; each of those prompts is 1 token, and its input is longer than the "
               "trace's (the trace's input counts text and items together)")
    if capped := plan.outputs_at_context:
        notice(f"workload: {capped:,} of {len(plan.requests):,} outputs end at the model's context of "
               f"{plan.max_context_tokens:,} tokens (prompt, items and output); they stop there, as an "
               "engine stops them")
    return session


def given(args: argparse.Namespace, flags: Iterable[str], *,
          switches: Collection[str] = ()) -> dict[str, bool]:
    """Whether the command line gives each of ``flags``: its value is not its default None (nor
    False, the default of a ``store_true`` flag; a ``--[no-]`` flag in ``switches`` is given as
    True or as False)."""
    values = {flag: getattr(args, flag.lstrip("-").replace("-", "_")) for flag in flags}
    return {flag: value is not None and (value is not False or flag in switches)
            for flag, value in values.items()}


def refuse_unread(flags_given: Mapping[str, bool], reads: Mapping[str, Collection[str]], form: str,
                  names: Mapping[str, str]) -> None:
    """A flag is read or refused (docs/cli.md): the first flag of ``flags_given`` (flag -> whether
    the command line gives it, :func:`given`) that the run's ``form`` does not read (``reads``:
    form -> its flags) is a ``ValueError`` naming it, the forms that read it and the run's
    (``names``: form -> how a user asks for it)."""
    for flag, yes in flags_given.items():
        if yes and flag not in reads[form]:
            readers = [names[f] for f, flags in reads.items() if flag in flags]
            raise ValueError(f"{flag}: read only by {' and '.join(readers)}; this run is {names[form]}")
