"""How long a simulated stream must be: one rule for HAS trials, sweep points and capacity probes.

A stream judged on too few seconds of arrivals hides a queue that grows
slowly: every deployment that meets the SLO over the window scores the same
ceiling, and a search then picks among ties by noise (docs/has.md §7). So a
stream is sized in **time**, not in requests: it covers at least
:attr:`TrialLength.trial_s` seconds of arrivals, and, when the SLO's TTFT
limit ``L`` is known, at least the *growth horizon*
``(1 - g) / g * L`` seconds, with ``g`` = :attr:`TrialLength.growth_frac`.

Why that horizon: under arrivals at ``rate`` a deployment that serves
``(1 - g) * rate`` requests/s builds a backlog of ``g * rate * t`` requests
by time ``t``, which the last arrival waits out at ``(1 - g) * rate``
requests/s: ``g * t / (1 - g)`` seconds. That wait passes the TTFT limit
``L`` once ``t >= (1 - g) / g * L``: 19 L for a queue growing at 5% of the
rate. A moderate SLO (15x the unloaded TTFT) on the paper's models is 1.2 s
(audio), 8.9 s (image) and 19.9 s (video) on RTX 6000 Ada, so the horizon is
22 s, 168 s and 379 s. The floor ``trial_s`` (default 60 s) holds where no
SLO is known or the limit is tight, and ``min_requests`` (default 100) keeps
a slow stream's statistics from resting on a handful of requests.

A stream never exceeds ``max_requests`` (default 50,000: about 20 s of
simulation); the count is capped there and the cap is reported by
:meth:`TrialLength.capped`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from easerve_core import checks
from easerve_core.settings import Settings, rule

#: the queue growth (a fraction of the arrival rate) a stream must be long enough to expose
DEFAULT_GROWTH_FRAC = 0.05
#: the floor on a stream's seconds of arrivals
DEFAULT_TRIAL_S = 60.0
#: the floor on a stream's request count
DEFAULT_MIN_REQUESTS = 100
#: the cap on a stream's request count
DEFAULT_MAX_REQUESTS = 50_000
#: the longest stream a user may ask for, in seconds of arrivals (a week)
MAX_TRIAL_S = 7 * 24 * 3600.0


def _trial_seconds(name: str, value: Any) -> Any:
    if checks.positive(name, value) > MAX_TRIAL_S:
        raise ValueError(f"{name} must be at most {MAX_TRIAL_S:g} s (a week of arrivals), got {value!r}")
    return value


def _growth(name: str, value: Any) -> Any:
    if not 0.0 <= checks.finite(name, value) < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialLength(Settings):
    """The length rule (module docstring): seconds of arrivals, then requests at a rate.

    Args:
        trial_s: at least this many seconds of arrivals.
        growth_frac: the queue growth, as a fraction of the rate, that the
            stream must expose against the SLO's TTFT limit (0 turns the
            SLO term off).
        min_requests: at least this many requests.
        max_requests: at most this many requests.
    """

    trial_s: float = field(default=DEFAULT_TRIAL_S, metadata=rule(_trial_seconds, label="trial-s"))
    growth_frac: float = field(default=DEFAULT_GROWTH_FRAC, metadata=rule(_growth))
    min_requests: int = field(default=DEFAULT_MIN_REQUESTS,
                              metadata=rule(checks.integer, minimum=1, label="min-requests"))
    max_requests: int = DEFAULT_MAX_REQUESTS

    def __post_init__(self) -> None:
        self.validate()
        checks.integer("max_requests", self.max_requests, minimum=self.min_requests)

    def horizon_s(self, ttft_limit_s: float | None = None) -> float:
        """Seconds of arrivals: ``max(trial_s, (1 - g) / g * ttft_limit_s)``."""
        if ttft_limit_s is None or self.growth_frac == 0.0:
            return self.trial_s
        limit = checks.positive("ttft_limit_s", ttft_limit_s)
        return max(self.trial_s, (1.0 - self.growth_frac) / self.growth_frac * limit)

    def uncapped_requests_at(self, rate_hz: float, ttft_limit_s: float | None = None) -> int:
        rate = checks.positive("rate_hz", rate_hz)
        return max(self.min_requests, math.ceil(rate * self.horizon_s(ttft_limit_s)))

    def requests_at(self, rate_hz: float, ttft_limit_s: float | None = None) -> int:
        """Requests a stream at ``rate_hz`` holds (within ``[min_requests, max_requests]``)."""
        return min(self.max_requests, self.uncapped_requests_at(rate_hz, ttft_limit_s))

    def capped(self, rate_hz: float, ttft_limit_s: float | None = None) -> bool:
        """Whether ``max_requests`` cut the stream at ``rate_hz`` short of the rule."""
        return self.uncapped_requests_at(rate_hz, ttft_limit_s) > self.max_requests


#: the rule HAS, ``easerve capacity`` and the plan tables use unless told otherwise
DEFAULT_TRIAL_LENGTH = TrialLength()
