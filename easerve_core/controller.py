"""The online controller: re-plan EPD serving as traffic shifts (pure and clock-agnostic, like the batcher).
It stays past 300 lines on purpose: the six rules below, the windows they read and the settings
that tune them are one unit, read together.

The paper leaves "a complete controller for rapidly shifting demand" open;
this is ours (docs/controller.md). It is offered observations with ``now``
(each arrival, each finished request and whether it met the SLO, the queued
requests) and answers, when polled, with a :class:`Decision` or nothing;
:meth:`Controller.next_deadline` says when it wants to be polled again.

The plans come from a :class:`PlanTable`: one HAS deployment per rate band,
computed offline by the simulator. The plan for a rate is the first band
planned for at least that rate (between bands the controller provisions for
the higher one; above the top band, the top one).

Rules, in the order they apply at each check (every ``check_every_s``):

1. the arrival rate is the count of arrivals in the last ``window_s`` over
   ``window_s`` (over the time since the start while that is shorter; no
   estimate before ``min_arrivals`` arrivals were seen); with ``cut_z`` the
   window starts after its most likely change point when the signal before
   and after it differs by ``cut_z`` standard errors (a step is then read at
   its new level within ``min_arrivals`` arrivals, not as a blend);
2. hysteresis: the controller moves up only when the rate exceeds the
   current band's planned rate by ``hysteresis_frac``, and down only when
   the rate falls that margin below the current band's planned rate; either
   way to the table's band for the rate (the lowest band planned for at
   least it), so noise around a band edge moves nothing, a move down needs
   the rate to fall a margin below where it moved up, and a band planned
   for exactly the low rate is reached;
3. SLO escalation: when at least ``min_finished`` requests finished in the
   window, fewer than ``attainment_floor`` of them met the SLO and the queue
   grew over the window, the target is one band above the current (an
   overload the rate alone does not show, e.g. heavier requests); not on a
   ``*_mean`` table, whose bands are mixes, not capacities: the band above
   serves another mix, not more of the one that arrives;
4. a target other than the current band must hold, unchanged, at every check
   for ``settle_s`` before it is acted on (a step in rate raises the windowed
   estimate gradually; the controller waits for it to settle instead of
   re-planning at every band it passes), unless ``settle_z`` is set and the
   signal is past the move's threshold (the hysteresis edge of rule 2) by at
   least ``settle_z`` standard errors of the window's estimate: then the
   evidence has settled it (a step in the mix moves a window's mean far past
   the edge within seconds, long before ``settle_s``);
5. a target band that holds the current band's deployment is followed
   without a decision (nothing changes on the servers, so no dwell applies);
6. and at least ``dwell_s`` must have passed since the last decision (or
   since the start): the controller never oscillates faster than that.

The decision names the deployment; the engine applies its fast knobs (B, s,
the gap factor, the SM-share table) at once and re-roles GPUs for a new
allocation, paying the reconfiguration cost (docs/controller.md).

The plan table itself lives in :mod:`easerve_core.plan_table` (re-exported
here); its cross-check in :mod:`easerve_core.plan_check`, the
evaluation's scripted oracle in :mod:`easerve_core.oracle`, the what-if that
plans bands with the simulator in the loop in :mod:`easerve_core.replan`.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from easerve_core import checks
from easerve_core.deployment import Deployment
from easerve_core.forecast import FORECASTERS, make_forecaster
from easerve_core.plan_table import SIGNALS, Band, PlanTable
from easerve_core.settings import Settings, rule


def _forecaster(name: str, value: Any) -> str:
    return checks.one_of(name, value, list(FORECASTERS))


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerSettings(Settings):
    """The controller's knobs (see the module docstring)."""

    section = "controller"
    prefix = "controller."

    #: the arrival rate is the arrivals of the last window over the window (rule 1)
    window_s: float = field(default=60.0, metadata=rule(checks.positive))
    #: checks run at fixed times, this far apart
    check_every_s: float = field(default=5.0, metadata=rule(checks.positive))
    #: how far past a band's planned rate the rate must go before the band changes (rule 2)
    hysteresis_frac: float = field(default=0.15, metadata=rule(checks.fraction))
    #: how long a new target must hold at every check before it is acted on (rule 4)
    settle_s: float = field(default=60.0, metadata=rule(checks.non_negative))
    #: the least time between two decisions, and from the start to the first (rule 6)
    dwell_s: float = field(default=120.0, metadata=rule(checks.non_negative))
    #: no rate estimate before this many arrivals
    min_arrivals: int = field(default=20, metadata=rule(checks.integer, minimum=1))
    #: no SLO escalation on fewer finished requests in the window (rule 3)
    min_finished: int = field(default=20, metadata=rule(checks.integer, minimum=1))
    #: SLO escalation below this fraction of the window's finished requests meeting the SLO
    attainment_floor: float = field(default=0.9, metadata=rule(checks.fraction))
    #: the predictive planner (:mod:`easerve_core.forecast`): ``none`` (the reactive rules), ``ewma``
    #: or ``holt``, run on the windowed rate at every check; the rules read its forecast
    #: ``lead_s`` ahead instead of the rate (docs/controller.md, "The predictive planner")
    forecaster: str = field(default="none", metadata=rule(_forecaster))
    #: the forecaster's level smoothing (weight of the newest windowed rate)
    forecast_alpha: float = field(default=0.5, metadata=rule(checks.fraction))
    #: Holt's trend smoothing (weight of the newest change of level)
    forecast_beta: float = field(default=0.3, metadata=rule(checks.fraction))
    #: how far ahead the forecast looks: the re-role time, so a move is warm when the phase comes
    lead_s: float = field(default=0.0, metadata=rule(checks.non_negative))
    #: rule 4 waives the settle for a rate move whose signal is this many standard errors of the
    #: window's estimate past the move's threshold (None: never; docs/controller.md, "Settled by
    #: the evidence")
    settle_z: float | None = field(default=None, metadata=rule(checks.positive, optional=True))
    #: rule 1's window starts after its most likely change point when the signal before and after
    #: it differs by at least this many standard errors of the difference (None: never; each side
    #: holds ``min_arrivals`` arrivals at least; docs/controller.md, "A window that cuts at a step")
    cut_z: float | None = field(default=None, metadata=rule(checks.positive, optional=True))

    def to_dict(self) -> dict[str, Any]:
        out = Settings.to_dict(self)
        if self.forecaster == "none":  # a reactive controller's settings stay as they were
            for name in ("forecaster", "forecast_alpha", "forecast_beta", "lead_s"):
                del out[name]
        if self.settle_z is None:  # so do those of one that always waits the settle
            del out["settle_z"]
        if self.cut_z is None:  # and of one whose window never cuts
            del out["cut_z"]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """Move from band ``from_band`` to ``band`` at ``at_s`` (``reason``: ``rate`` or ``slo``)."""

    at_s: float
    from_band: int
    band: int
    rate_hz: float
    reason: str
    deployment: Deployment


#: forgotten observations the controller keeps before it drops them (amortised compaction)
_COMPACT_AT = 4096


class Controller:
    """The online controller (see the module docstring)."""

    def __init__(self, table: PlanTable, settings: ControllerSettings | None = None, *,
                 start_band: int = 0, start_s: float = 0.0) -> None:
        if not 0 <= start_band < len(table.bands):
            raise ValueError(f"start_band must be in [0, {len(table.bands)}), got {start_band!r}")
        self.table = table
        self.settings = settings or ControllerSettings()
        self.band = start_band
        self.decisions: list[Decision] = []
        # arrival and finish times in order, the window from index ``_a0`` / ``_f0`` on (the
        # window's start is found by bisection and the lists compacted now and then: a check
        # costs the same whatever the rate); ``_met_upto[i]``: finishes up to i that met the SLO
        self._arrival_s: list[float] = []
        self._a0 = 0
        self._finish_s: list[float] = []
        self._met_upto: list[int] = []
        self._f0 = 0
        self._met_before = 0  # finishes that met the SLO before the lists' first entry
        self._queue: deque[tuple[float, int]] = deque()
        self._seen_before = 0  # arrivals before the list's first entry
        self._start_s = self._last_change_s = checks.non_negative("start_s", start_s)
        self._next_check_s = start_s + self.settings.check_every_s
        self._pending: tuple[int, float] | None = None  # (target band, since when)
        self._forecast = make_forecaster(self.settings.forecaster, alpha=self.settings.forecast_alpha,
                                         beta=self.settings.forecast_beta,
                                         step_s=self.settings.check_every_s)
        #: a weighted signal's running sum of weights, per arrival (``_weight_upto[i]``: up to i)
        self._weight_upto: list[float] = []
        self._weight_before = 0.0
        self._square_upto: list[float] = []  # the same for the squared weights (rule 4's evidence)
        self._square_before = 0.0
        # rule 1's cut at the last check: ((now, arrivals, window start), (first index, span))
        self._cut_memo: tuple[tuple[float, int, int], tuple[int, float]] = ((math.nan, 0, 0), (0, 0.0))
        if table.signal != "requests":
            self.arrive = self._arrive_weighted  # type: ignore[method-assign]
        self._escalates = not table.signal.endswith("_mean")  # rule 3 (module docstring)

    # -- observations -----------------------------------------------------------------
    def arrive(self, now: float, weight: float = 1.0) -> None:
        """An arrival (``weight``: its weight in the table's signal, :meth:`PlanTable.weight`;
        a request-rate table counts arrivals and ignores it)."""
        self._arrival_s.append(now)

    def _arrive_weighted(self, now: float, weight: float = 1.0) -> None:
        upto, squares = self._weight_upto, self._square_upto
        self._arrival_s.append(now)
        upto.append((upto[-1] if upto else self._weight_before) + weight)
        squares.append((squares[-1] if squares else self._square_before) + weight * weight)

    def finish(self, now: float, *, met_slo: bool) -> None:
        upto = self._met_upto
        self._finish_s.append(now)
        upto.append((upto[-1] if upto else self._met_before) + bool(met_slo))

    def queue(self, now: float, waiting: int) -> None:
        if type(waiting) is not int or waiting < 0:  # the common case pays one test
            waiting = checks.integer("waiting", waiting, minimum=0)
        self._queue.append((now, waiting))

    # -- decisions --------------------------------------------------------------------
    def next_deadline(self) -> float:
        return self._next_check_s

    def rate_hz(self, now: float) -> float:
        """The windowed arrival rate (NaN before ``min_arrivals`` arrivals)."""
        self._forget(now)
        if self._seen_before + len(self._arrival_s) < self.settings.min_arrivals:
            return math.nan
        a0, span = self._window(now)
        if span <= 0:
            return math.nan
        if self.table.signal == "requests":
            return (len(self._arrival_s) - a0) / span
        upto = self._weight_upto
        if not upto:
            return 0.0
        before = upto[a0 - 1] if a0 else self._weight_before
        if self.table.signal.endswith("_mean"):
            count = len(self._arrival_s) - a0
            return (upto[-1] - before) / count if count else math.nan
        return (upto[-1] - before) / span

    def _window(self, now: float) -> tuple[int, float]:
        """Rule 1's window: the index of its first arrival and its span; with ``cut_z``, from the
        window's most likely change point on when the signal differs across it by ``cut_z``
        standard errors (a two-sample test at each cut leaving ``min_arrivals`` on either side;
        means of the weights for a ``*_mean`` signal, rates over the spans otherwise)."""
        a0, span = self._a0, min(self.settings.window_s, now - self._start_s)
        z, times = self.settings.cut_z, self._arrival_s
        least = max(2, self.settings.min_arrivals)
        count = len(times) - a0
        if z is None or count < 2 * least or span <= 0:
            return a0, span
        if self._cut_memo[0] == (now, len(times), a0):
            return self._cut_memo[1]
        if self.table.signal == "requests":
            sums = squares = np.arange(count + 1, dtype=float)
        else:
            base = self._weight_upto[a0 - 1] if a0 else self._weight_before
            sums = np.concatenate(([0.0], np.asarray(self._weight_upto[a0:]) - base))
            base = self._square_upto[a0 - 1] if a0 else self._square_before
            squares = np.concatenate(([0.0], np.asarray(self._square_upto[a0:]) - base))
        k = np.arange(least, count - least + 1)  # arrivals on the older side of each cut
        old, new = sums[k], sums[-1] - sums[k]
        old_sq, new_sq = squares[k], squares[-1] - squares[k]
        t = np.asarray(times[a0:])
        at = (t[k - 1] + t[k]) / 2  # each cut's time, between its two arrivals
        if self.table.signal.endswith("_mean"):
            n_old, n_new = k.astype(float), count - k.astype(float)
            gap = new / n_new - old / n_old
            var_old = np.maximum(0.0, (old_sq - old * old / n_old) / (n_old - 1))
            var_new = np.maximum(0.0, (new_sq - new * new / n_new) / (n_new - 1))
            error2 = var_old / n_old + var_new / n_new
        else:
            s_old, s_new = at - (now - span), now - at
            gap = new / s_new - old / s_old
            error2 = old_sq / s_old ** 2 + new_sq / s_new ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(error2 > 0, np.abs(gap) / np.sqrt(error2), np.where(gap != 0, np.inf, 0.0))
        best = int(np.argmax(score))
        out = (a0 + int(k[best]), now - float(at[best])) if score[best] >= z else (a0, span)
        self._cut_memo = ((now, len(times), a0), out)
        return out

    def poll(self, now: float) -> Decision | None:
        """The decision due at ``now``, if any (checks run every ``check_every_s``)."""
        if now < self._next_check_s:
            return None
        while self._next_check_s <= now:
            self._next_check_s += self.settings.check_every_s
        rate = self._forecast(self.rate_hz(now), self.settings.lead_s)
        target = self._target(now, rate)
        if target == self.band:
            self._pending = None
            return None
        if self._pending is None or self._pending[0] != target:
            self._pending = (target, now)
        s = self.settings
        if now - self._pending[1] < s.settle_s and not self._decisive(now, target, rate):
            return None
        if self._deployment(target) == self._deployment(self.band):
            self.band, self._pending = target, None  # rule 5: nothing to change on the servers
            return None
        if now - self._last_change_s < s.dwell_s:
            return None
        reason = "rate" if target == self._rate_target(rate) else "slo"
        decision = Decision(at_s=now, from_band=self.band, band=target, rate_hz=rate, reason=reason,
                            deployment=self._deployment(target))
        self.band, self._last_change_s, self._pending = target, now, None
        self.decisions.append(decision)
        return decision

    # the bands as the rules read them (easerve_core.replan plans them as the run needs them)
    def _num_bands(self) -> int:
        return len(self.table.bands)

    def _band_rate(self, band: int) -> float:
        return self.table.bands[band].rate_hz

    def _band_for(self, rate_hz: float) -> int:
        return self.table.band_for(rate_hz)

    def _deployment(self, band: int) -> Deployment:
        return self.table.bands[band].deployment

    def _rate_target(self, rate: float) -> int:
        if math.isnan(rate):
            return self.band
        h = self.settings.hysteresis_frac
        covering = self._band_for(rate)  # the lowest band planned for at least the rate
        if covering > self.band:
            return covering if rate > self._band_rate(self.band) * (1 + h) else self.band
        # down, the mirror of up: the rate a margin below the current band's planned rate, to the
        # band that covers it (not a band planned for a margin more than the rate: that put the
        # threshold below the lower band's own rate, and a band planned for exactly the low rate
        # was never reached)
        if covering < self.band and rate * (1 + h) < self._band_rate(self.band):
            return covering
        return self.band

    def _decisive(self, now: float, target: int, rate: float) -> bool:
        """Rule 4's waiver: a rate move whose signal is ``settle_z`` standard errors past its
        threshold (rule 2's edge: the current band's planned rate, a margin up or down)."""
        z = self.settings.settle_z
        if z is None or math.isnan(rate) or target != self._rate_target(rate):
            return False
        here, h = self._band_rate(self.band), self.settings.hysteresis_frac
        edge = here * (1 + h) if target > self.band else here / (1 + h)
        return abs(rate - edge) >= z * self._standard_error(now)

    def _standard_error(self, now: float) -> float:
        """The standard error of the window's estimate (:meth:`rate_hz`): of a count over the span
        (Poisson: the square root of the sum of the squared weights over the span) or, for a
        ``*_mean`` signal, of the window's mean (its sample deviation over the square root of the
        count); infinite on fewer than two arrivals."""
        a0, span = self._window(now)
        count = len(self._arrival_s) - a0
        if count < 2 or span <= 0:
            return math.inf
        if self.table.signal == "requests":
            return math.sqrt(count) / span
        upto, squares = self._weight_upto, self._square_upto
        total = upto[-1] - (upto[a0 - 1] if a0 else self._weight_before)
        square = squares[-1] - (squares[a0 - 1] if a0 else self._square_before)
        if not self.table.signal.endswith("_mean"):
            return math.sqrt(square) / span
        variance = max(0.0, (square - total * total / count) / (count - 1))
        return math.sqrt(variance / count)

    def _target(self, now: float, rate: float) -> int:
        target = self._rate_target(rate)
        if target <= self.band and self.band + 1 < self._num_bands() and self._escalates \
                and self._overloaded():
            return self.band + 1
        return target

    def _overloaded(self) -> bool:
        s = self.settings
        finished = len(self._finish_s) - self._f0
        if finished < s.min_finished or len(self._queue) < 2:
            return False
        before = self._met_upto[self._f0 - 1] if self._f0 else self._met_before
        met = (self._met_upto[-1] - before) / finished
        return met < s.attainment_floor and self._queue[-1][1] > self._queue[0][1]

    def _forget(self, now: float) -> None:
        edge = now - self.settings.window_s
        self._a0 = bisect_right(self._arrival_s, edge, self._a0)
        self._f0 = bisect_right(self._finish_s, edge, self._f0)
        while self._queue and self._queue[0][0] <= edge:
            self._queue.popleft()
        if self._a0 > _COMPACT_AT:
            self._seen_before += self._a0
            del self._arrival_s[:self._a0]
            if self._weight_upto:
                self._weight_before = self._weight_upto[self._a0 - 1]
                self._square_before = self._square_upto[self._a0 - 1]
                del self._weight_upto[:self._a0], self._square_upto[:self._a0]
            self._a0 = 0
        if self._f0 > _COMPACT_AT:
            self._met_before = self._met_upto[self._f0 - 1]
            del self._finish_s[:self._f0], self._met_upto[:self._f0]
            self._f0 = 0


__all__ = ["SIGNALS", "Band", "Controller", "ControllerSettings", "Decision", "PlanTable"]
