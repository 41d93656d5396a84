"""``easerve controller-eval``: the online-controller study alone, printed.

The study is :mod:`easerve.experiments.controller_eval`, whose flags and
docstring (the ``--help`` text) this command takes; ``python -m
easerve.experiments.controller_eval`` is the same command by its old name.
"""

from __future__ import annotations

import argparse

from easerve.cli.common import command_parser
from easerve.experiments import controller_eval


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "controller-eval", help="the online-controller study alone, printed "
                       "(docs/controller.md)", doc=controller_eval.__doc__, func=controller_eval.run)
    controller_eval.add_arguments(p)
    p.set_defaults(error_prefix="easerve controller-eval")
