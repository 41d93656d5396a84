"""The mix shifts against the evaluation's bars: one row a shift and seed, and their spread.

A run of the mix shifts (:func:`easerve.experiments.mix_control.mix_shift_tables`)
gives five systems per shift. :func:`verdicts` reads its frames into one row a
shift: whether HAS's per-phase picks differ, the better controller (the higher
goodput of the reactive and the predictive; on a tie the reactive), its decisions, its high-phase
attainment, its goodput over the better static system's and over the oracle's,
whether the oracle stays at or above the worse static system in every phase,
and whether each bar of :class:`MixBars` holds (docs/controller.md, "Shifts
where the optimum moves"). ``easerve controller-eval --mix-shifts ... --seeds
0,1,2`` runs the shifts once per seed; :func:`spread` then says, per shift, how
far the figures move over the seeds and on how many seeds each bar holds: how
sure one seed's row is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

CONTROLLERS = ("reactive", "predictive")
STATICS = ("static-low", "static-high")
#: the bar columns of :func:`verdicts`, in the order :func:`spread` counts them, and what each says
BARS_SAID = {
    "moves": "a move (HAS's picks differ, the controller decides)",
    "attainment_ok": "high-phase attainment",
    "over_static_ok": "goodput over the better static",
    "of_oracle_ok": "goodput near the oracle's",
    "oracle_ok": "the oracle at the worse static per phase",
}
BAR_COLUMNS = tuple(BARS_SAID)


@dataclass(frozen=True, slots=True, kw_only=True)
class MixBars:
    """The evaluation's bars on a shift where the optimum moves.

    ``high_attainment``: the better controller's least high-phase attainment;
    ``over_static``: its least goodput over the better static system's;
    ``of_oracle``: its least goodput over the oracle's.
    """

    high_attainment: float = 0.9
    over_static: float = 1.15
    of_oracle: float = 0.9


BARS = MixBars()


def verdicts(frames: Mapping[str, pd.DataFrame], *, seed: int, bars: MixBars = BARS) -> pd.DataFrame:
    """One row a shift of one run's :data:`~easerve.experiments.mix_control.MIX_TABLES` frames.

    ``moves``: HAS's per-phase picks differ and the better controller decided at least once;
    ``holds``: every bar of :data:`BAR_COLUMNS`."""
    systems = frames["controller_mix_shifts"]
    phases = frames["controller_mix_shifts_phases"]
    plans = frames["controller_mix_shifts_plans"]
    rows = []
    for shift, table in systems.groupby("shift", sort=False):
        by = table.set_index("system")
        controller = str(by.loc[list(CONTROLLERS), "goodput_rps"].idxmax())
        goodput = float(by.loc[controller, "goodput_rps"])
        per_phase = phases[phases["shift"] == shift].pivot(index="phase", columns="system",
                                                           values="attainment")
        picks = plans.loc[plans["shift"] == shift, "deployment"]
        row = {
            "shift": shift,
            "seed": seed,
            "picks_differ": picks.nunique() > 1,
            "controller": controller,
            "decisions": int(by.loc[controller, "decisions"]),
            "attainment_high": float(by.loc[controller, "attainment_high"]),
            "over_static": _ratio(goodput, float(by.loc[list(STATICS), "goodput_rps"].max())),
            "of_oracle": _ratio(goodput, float(by.loc["oracle", "goodput_rps"])),
            "oracle_ok": bool((per_phase["oracle"] >= per_phase[list(STATICS)].min(axis=1)).all()),
        }
        row["moves"] = bool(row["picks_differ"] and row["decisions"] > 0)
        row["attainment_ok"] = row["attainment_high"] >= bars.high_attainment
        row["over_static_ok"] = row["over_static"] >= bars.over_static
        row["of_oracle_ok"] = row["of_oracle"] >= bars.of_oracle
        row["holds"] = all(row[c] for c in BAR_COLUMNS)
        rows.append(row)
    return pd.DataFrame(rows)


def spread(rows: pd.DataFrame) -> pd.DataFrame:
    """Per shift of :func:`verdicts`' rows over seeds: the seeds, the least, median and most of
    each figure, and on how many seeds each bar (and all of them) holds, as ``k/n``."""
    out = []
    for shift, table in rows.groupby("shift", sort=False):
        n = len(table)
        row: dict[str, object] = {"shift": shift, "seeds": ",".join(str(s) for s in table["seed"])}
        for column in ("attainment_high", "over_static", "of_oracle"):
            values = table[column]
            row[column] = f"{values.min():.3f} / {values.median():.3f} / {values.max():.3f}"
        for column in (*BAR_COLUMNS, "holds"):
            row[column] = f"{int(table[column].sum())}/{n}"
        out.append(row)
    return pd.DataFrame(out)


def misses(row: pd.Series) -> str:
    """The bars one row of :func:`verdicts` misses, as :data:`BARS_SAID` says them (``none``)."""
    return "; ".join(said for column, said in BARS_SAID.items() if not row[column]) or "none"


def _ratio(a: float, b: float) -> float:
    """``a / b``; where ``b`` is 0, infinite if ``a`` is above 0, else NaN (no bar holds)."""
    if b > 0:
        return a / b
    return math.inf if a > 0 else math.nan
