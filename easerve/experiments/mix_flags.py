"""The mix shifts' flags of ``easerve controller-eval``, read into the study's settings.

:func:`add_mix_flags` declares the flags that set how the systems' moves run,
the controllers' rules, the oracle, the load and the seed. Each reader takes a
flag's text (``None`` when the flag is absent: the evaluation's default from
:mod:`easerve.experiments.mix_control`) and raises a ``ValueError`` naming the
flag on a bad value; the command turns that into one line and exit 2.
:func:`shifts_of` reads the shifts a run names, and :func:`study_of` which of
the command's four studies a run is: a flag that study does not read is
refused (:data:`ONLY_IN`), not left unread.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

from easerve.cli.common import given
from easerve.experiments.mix_control import (
    CUT_Z,
    MOVES,
    ORACLE_LEAD_S,
    SETTLE_Z,
    mix_capacity_hz,
    synthetic_trace_shift,
)
from easerve.experiments.shift_control import MoveMechanisms
from easerve.experiments.shifts import KNOWN_SHIFTS, Shift, load_shift
from easerve.experiments.trace_shift import TRACE_LOAD_FRAC, TRACE_RATE, trace_arrivals, trace_shift

#: the flags that take a value (absent: the evaluation's default): flag, metavar, what it sets
VALUE_FLAGS = (
    ("--drain-deadline", "S", "seconds a draining Decode worker keeps its sequences before it hands "
     "them to the Decode workers that serve, which recompute their KV (sim.roster; 0: at once; none: "
     "it finishes them; default: the evaluation's, mix_control.MOVES)"),
    ("--settle-z", "Z", "the controllers skip the settle once the window's signal is Z standard errors "
     "past the move's threshold (none: always wait it; default: mix_control.SETTLE_Z)"),
    ("--cut-z", "Z", "the controllers' window starts after a step once its two sides differ by Z "
     "standard errors (none: never; default: mix_control.CUT_Z)"),
    ("--oracle-lead", "S", "seconds before each phase the oracle moves (default: "
     "mix_control.ORACLE_LEAD_S, at the phase's start)"),
    ("--rate-scale", "X", "every phase's rate X times as high (a what-if on load; not with a trace's "
     "shift; default 1)"),
    ("--trace-load", "F", "with --trace: the trace's mean rate is scaled to F of the mix's screened "
     "capacity on the cluster, 0 < F <= 1 (default: trace_shift.TRACE_LOAD_FRAC, 0.6); a bursty "
     "trace's busy windows run well above its mean"),
    ("--seed", "N", "the seed of the streams, HAS's searches and the simulations (default 0, the "
     "evaluation's)"),
    ("--seeds", "N,M,...", "run the shifts once per seed (not with --seed), each seed's tables under "
     "DIR/seed-N, and say on how many seeds each bar holds (mix_bars)"),
    ("--jobs", "N", "HAS's searches and the systems' simulations N at once on a local pool (default 1: "
     "in this process; the tables are the same bytes)"),
)
#: the on/off flags (``--X`` / ``--no-X``; absent: the evaluation's default): flag, what it sets
SWITCHES = (
    ("--concurrent-steps", "a staged move's steps start side by side where their GPUs are disjoint and "
     "no stage goes dark unplanned (default: mix_control.MOVES)"),
    ("--serve-first", "a stage losing its every worker in a move comes up first (easerve_core.moves; "
     "default: mix_control.MOVES)"),
    ("--linger", "a draining Decode worker whose sequences cannot move (the target's decoders are "
     "smaller) takes new ones while no other serves, until those it held have left (sim.roster; "
     "default: mix_control.MOVES)"),
    ("--interim-share", "while a move leaves part of the target's remote Prefill or LM-holding encoders "
     "serving, the target's encoders route at the share that keeps each serving worker's load "
     "(easerve_core.policies.interim_remote_fraction; default: mix_control.MOVES)"),
    ("--standby", "a re-roled GPU wakes a standby engine (weights copied back, a 1 s re-warm: "
     "calibration.reconfig.STANDBY_WARMUP_S) in place of starting one cold (default: mix_control.MOVES)"),
    ("--phase-tables", "every system's encoders run each phase's SM-share table from the phase's start "
     "(sim.sm_tables; default: mix_control.PHASE_TABLES)"),
    ("--trace-planning", "a trace's shift: HAS and the cross-check plan each class on the trace's own "
     "gaps from its windows after the replayed ones, not on Poisson streams at the class's mean rate "
     "(where the trace holds enough of them; default: trace_shift.TRACE_PLANNING)"),
)


#: the command's studies in the order the flags that choose them win, each with those flags;
#: none of them given: the rate shift
STUDIES = (("mix shifts", ("--mix-shifts", "--shift", "--trace")), ("shapes", ("--shapes",)),
           ("ceiling", ("--ceiling",)))
#: the flags that only some studies read, with those studies (every other flag: all of them)
ONLY_IN: dict[str, tuple[str, ...]] = {
    "--shapes": ("shapes",),
    "--ceiling": ("ceiling",),
    "--quick": ("rate shift", "shapes", "mix shifts"),
    "--sweep-streams": ("rate shift",),
    "--frugal": ("rate shift",),
    "--replan": ("rate shift",),
    "--no-cross-check": ("mix shifts",),
    "--out": ("mix shifts",),
    "--forecaster": ("mix shifts",),
    **{flag: ("mix shifts",) for flag, _, _ in VALUE_FLAGS},
    **{flag: ("mix shifts",) for flag, _ in SWITCHES},
}
_STUDY_NAMES = {"rate shift": "the rate shift (no study flag)", "shapes": "the shapes (--shapes)",
                "ceiling": "the ceiling (--ceiling)",
                "mix shifts": "the mix shifts (--mix-shifts, --shift or --trace)"}


def _given(args: argparse.Namespace, flag: str) -> bool:
    return given(args, [flag], switches={f for f, _ in SWITCHES})[flag]


def _either(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def study_of(args: argparse.Namespace) -> str:
    """The study the run's flags choose (:data:`STUDIES`; none: ``rate shift``); a flag it does not
    read (:data:`ONLY_IN`), or ``--trace-format`` without ``--trace``, is a ``ValueError`` naming it."""
    study, door = next(((name, flag) for name, doors in STUDIES for flag in doors if _given(args, flag)),
                       ("rate shift", ""))
    this = f"the {study}" + (f" ({door})" if door else "")
    for flag, studies in ONLY_IN.items():
        if _given(args, flag) and study not in studies:
            if flag in {d for _, doors in STUDIES for d in doors}:
                raise ValueError(f"{flag}: not with {door} (one study a run)")
            shown = f"--[no-]{flag[2:]}" if flag in {f for f, _ in SWITCHES} else flag
            raise ValueError(f"{shown}: read only by {_either([_STUDY_NAMES[s] for s in studies])}; "
                             f"this run is {this}")
    for flag in ("--trace-format", "--trace-load"):
        if _given(args, flag) and not _given(args, "--trace"):
            raise ValueError(f"{flag}: goes with --trace")
    return study


def shifts_of(names: str | None, shift_file: str | None = None, trace: str | None = None,
              trace_format: str | None = None, trace_load: float = TRACE_LOAD_FRAC) -> list[Shift]:
    """The shifts a run names: ``--shift FILE``'s, ``--trace FILE``'s (``--trace-format``, default
    burstgpt; its mean rate ``trace_load`` of the mix's screened capacity), then ``--mix-shifts``'
    (comma-separated, :data:`KNOWN_SHIFTS` or ``trace-rate``).
    An unknown or empty name, or two shifts of one name (their tables are keyed by it), is a
    ``ValueError`` naming the flag."""
    shifts = [load_shift(shift_file)] if shift_file is not None else []
    if trace is not None:
        arrivals = trace_arrivals(trace, "burstgpt" if trace_format is None else trace_format)
        shifts.append(trace_shift(arrivals, capacity_hz=mix_capacity_hz("image", "llava-image"),
                                  load_frac=trace_load))
    listed = names.split(",") if names is not None else []
    known = [*KNOWN_SHIFTS, TRACE_RATE]
    unknown = sorted({repr(n) if not n.strip() else n for n in listed} - set(known))
    if unknown:
        raise ValueError(f"--mix-shifts: unknown shift(s) {', '.join(unknown)}; known: {', '.join(known)}")
    shifts += [synthetic_trace_shift() if n == TRACE_RATE else KNOWN_SHIFTS[n] for n in listed]
    named = [s.name for s in shifts]
    twice = sorted({n for n in named if named.count(n) > 1})
    if twice:
        raise ValueError(f"--mix-shifts: each shift runs once; {', '.join(twice)} is named twice "
                         "(among --shift, --trace and --mix-shifts)")
    return shifts


def add_mix_flags(parser: argparse.ArgumentParser) -> None:
    """Declare :data:`VALUE_FLAGS` (read as text, None when absent) and :data:`SWITCHES`."""
    for flag, metavar, what in VALUE_FLAGS:
        parser.add_argument(flag, metavar=metavar, default=None, help=f"mix shifts: {what}")
    for flag, what in SWITCHES:
        parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None,
                            help=f"mix shifts: {what}")


def move_mechanisms(deadline: str | None, concurrent: bool | None,
                    serve_first: bool | None = None, linger: bool | None = None,
                    interim_share: bool | None = None, standby: bool | None = None) -> MoveMechanisms:
    """``--drain-deadline`` (seconds >= 0 or ``none``), ``--[no-]concurrent-steps``,
    ``--[no-]serve-first``, ``--[no-]linger``, ``--[no-]interim-share`` and ``--[no-]standby`` over
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
    if interim_share is not None:
        moves = replace(moves, interim_share=interim_share)
    if standby is not None:
        moves = replace(moves, standby=standby)
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


def trace_load_of(value: str | None) -> float:
    """``--trace-load`` (a fraction in (0, 1]; absent:
    :data:`~easerve.experiments.trace_shift.TRACE_LOAD_FRAC`)."""
    load = _number("--trace-load", value, TRACE_LOAD_FRAC, what="a fraction in (0, 1]")
    assert load is not None
    if load > 1:
        raise ValueError(f"--trace-load must be a fraction in (0, 1], got {value!r}")
    return load


def seed_of(value: str | None, flag: str = "--seed") -> int:
    """``--seed`` (an integer >= 0; absent: 0, the evaluation's)."""
    return _whole(flag, value, least=0)


def seeds_of(value: str | None) -> tuple[int, ...] | None:
    """``--seeds`` (distinct integers >= 0, comma-separated; absent: None, one run at ``--seed``)."""
    if value is None:
        return None
    seeds = tuple(seed_of(part, "--seeds") for part in value.split(","))
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise ValueError(f"--seeds must name each seed once, got {', '.join(map(str, twice))} twice")
    return seeds


def jobs_of(value: str | None) -> int:
    """``--jobs`` (an integer >= 1; absent: 1, this process)."""
    return _whole("--jobs", value, least=1)


def oracle_lead_of(value: str | None) -> float:
    """``--oracle-lead`` (seconds >= 0; absent: :data:`~easerve.experiments.mix_control.ORACLE_LEAD_S`)."""
    lead = _number("--oracle-lead", value, ORACLE_LEAD_S, least=0.0, what="seconds >= 0")
    assert lead is not None
    return lead


def _whole(flag: str, value: str | None, *, least: int) -> int:
    """``value`` as a whole number >= ``least`` (absent: ``least``); otherwise a ``ValueError``
    naming ``flag``."""
    number = _number(flag, value, float(least), least=float(least), what=f"an integer >= {least}")
    assert number is not None
    if number != int(number):
        raise ValueError(f"{flag} must be an integer >= {least}, got {value!r}")
    return int(number)


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
