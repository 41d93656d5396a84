"""The predictive planner's forecasters: the controller's windowed rate, smoothed and projected ahead.

The controller (:mod:`easerve_core.controller`) measures the rate of its
table's signal over a sliding window at every check (``check_every_s``
apart). A forecaster takes that series, one value per check, and answers the
rate expected ``lead_s`` ahead, which the controller's rules then read
instead of the measured rate (docs/controller.md, "The predictive planner"):

* ``none``: the measured rate itself (the reactive rules);
* ``ewma``: exponential smoothing, ``level = alpha x + (1 - alpha) level``;
  it smooths, and projects nothing (the forecast is the level at any lead);
* ``holt``: Holt's linear trend (double exponential smoothing),
  ``level = alpha x + (1 - alpha)(level + trend)``,
  ``trend = beta (level - previous level) + (1 - beta) trend`` (per check),
  and the forecast ``level + trend x lead_s / check_every_s``, never below 0.

Why Holt, and its parameters: a step in the offered rate reaches the
windowed rate as a ramp over one window, and a diurnal or drifting load is
a ramp already; Holt's trend follows a ramp with no lag in the limit, so its
projection by the re-role time (``lead_s``) crosses a band's threshold that
much earlier and the new workers are warm when the phase arrives. The window
already smooths Poisson noise (60 s at 1 req/s: 13% standard error), so the
level may follow it closely (``alpha = 0.5``: half-weight after one check);
the trend is smoothed harder (``beta = 0.3``, about three checks) so that the
noise of one window does not project far. A forecast is only as good as the
trend: a step with no ramp before it (a phase that starts at once) is seen
no earlier than the window shows it, only acted on sooner.

Pure state machines like the batcher: the controller feeds them at its own
checks, so the same observations give the same forecasts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from easerve_core import checks

Forecast = Callable[[float, float], float]
"""``(windowed rate, lead_s) -> rate expected lead_s ahead`` (NaN in: NaN out, no update)."""


class _Measured:
    """``none``: the measured rate."""

    def __call__(self, rate: float, lead_s: float) -> float:
        return rate


class _Ewma:
    """``ewma``: the smoothed level, at any lead."""

    def __init__(self, *, alpha: float) -> None:
        self.alpha = alpha
        self.level = math.nan

    def __call__(self, rate: float, lead_s: float) -> float:
        if math.isnan(rate):
            return rate
        self.level = rate if math.isnan(self.level) else self.alpha * rate + (1 - self.alpha) * self.level
        return self.level


class _Holt:
    """``holt``: level and trend per check, projected ``lead_s`` ahead."""

    def __init__(self, *, alpha: float, beta: float, step_s: float) -> None:
        self.alpha, self.beta, self.step_s = alpha, beta, step_s
        self.level = math.nan
        self.trend = 0.0

    def __call__(self, rate: float, lead_s: float) -> float:
        if math.isnan(rate):
            return rate
        if math.isnan(self.level):
            self.level = rate
        else:
            level = self.alpha * rate + (1 - self.alpha) * (self.level + self.trend)
            self.trend = self.beta * (level - self.level) + (1 - self.beta) * self.trend
            self.level = level
        return max(0.0, self.level + self.trend * lead_s / self.step_s)


#: the forecasters by name (ControllerSettings.forecaster)
FORECASTERS: Mapping[str, str] = {
    "none": "the measured windowed rate (reactive)",
    "ewma": "exponentially smoothed windowed rate",
    "holt": "Holt's linear trend, projected lead_s ahead",
}


def make_forecaster(name: str, *, alpha: float, beta: float, step_s: float) -> Forecast:
    """A fresh forecaster (ValueError naming ``controller.forecaster`` for an unknown name)."""
    checks.one_of("controller.forecaster", name, list(FORECASTERS))
    if name == "ewma":
        return _Ewma(alpha=alpha)
    if name == "holt":
        return _Holt(alpha=alpha, beta=beta, step_s=checks.positive("step_s", step_s))
    return _Measured()
