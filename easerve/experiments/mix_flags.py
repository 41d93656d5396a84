"""The mix shifts' flags of ``easerve controller-eval``, read into the study's settings.

Each reader takes a flag's text (``None`` when the flag is absent: the
evaluation's default from :mod:`easerve.experiments.mix_control`) and raises a
``ValueError`` naming the flag on a bad value; the command turns that into one
line and exit 2.
"""

from __future__ import annotations

import math
from dataclasses import replace

from easerve.experiments.mix_control import CUT_Z, MOVES, ORACLE_LEAD_S, SETTLE_Z
from easerve.experiments.shift_control import MoveMechanisms


def move_mechanisms(deadline: str | None, concurrent: bool | None,
                    serve_first: bool | None = None, linger: bool | None = None) -> MoveMechanisms:
    """``--drain-deadline`` (seconds >= 0 or ``none``), ``--[no-]concurrent-steps``,
    ``--[no-]serve-first`` and ``--[no-]linger`` over
    :data:`~easerve.experiments.mix_control.MOVES`; a bad deadline is a ``ValueError`` naming it."""
    moves = MOVES
    if deadline is not None:
        value = _number("--drain-deadline", deadline, None, least=0.0, none=True, what="seconds >= 0")
        moves = replace(moves, drain_deadline_s=value)
    if concurrent is not None:
        moves = replace(moves, concurrent_steps=concurrent)
    if serve_first is not None:
        moves = replace(moves, serve_first=serve_first)
    if linger is not None:
        moves = replace(moves, linger=linger)
    return moves


def settle_z_of(value: str | None) -> float | None:
    """``--settle-z`` (a number > 0 or ``none``; absent: :data:`~easerve.experiments.mix_control.SETTLE_Z`);
    a bad one is a ``ValueError`` naming it."""
    return _number("--settle-z", value, SETTLE_Z, none=True)


def cut_z_of(value: str | None) -> float | None:
    """``--cut-z``, read as :func:`settle_z_of` reads its flag (absent:
    :data:`~easerve.experiments.mix_control.CUT_Z`)."""
    return _number("--cut-z", value, CUT_Z, none=True)


def rate_scale_of(value: str | None) -> float:
    """``--rate-scale`` (a number > 0; absent: 1, the shifts as set)."""
    scale = _number("--rate-scale", value, 1.0)
    assert scale is not None
    return scale


def seed_of(value: str | None) -> int:
    """``--seed`` (an integer >= 0; absent: 0, the evaluation's)."""
    seed = _number("--seed", value, 0.0, least=0.0, what="an integer >= 0")
    assert seed is not None
    if seed != int(seed):
        raise ValueError(f"--seed must be an integer >= 0, got {value!r}")
    return int(seed)


def oracle_lead_of(value: str | None) -> float:
    """``--oracle-lead`` (seconds >= 0; absent: :data:`~easerve.experiments.mix_control.ORACLE_LEAD_S`)."""
    lead = _number("--oracle-lead", value, ORACLE_LEAD_S, least=0.0, what="seconds >= 0")
    assert lead is not None
    return lead


def _number(flag: str, value: str | None, default: float | None, *, least: float | None = None,
            none: bool = False, what: str = "a number > 0") -> float | None:
    """``value`` as a finite number above 0 (or at least ``least``), ``none`` where allowed, the
    default when absent; otherwise a ``ValueError`` naming ``flag``."""
    if value is None:
        return default
    if none and value.strip().lower() == "none":
        return None
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    ok = number >= least if least is not None else number > 0
    if not (ok and math.isfinite(number)):
        raise ValueError(f"{flag} must be {what}{' or none' if none else ''}, got {value!r}")
    return number
