"""The controller's plan table: one HAS deployment per band of a traffic signal.

A :class:`PlanTable` holds :class:`Band` s in increasing level of its
``signal`` (:data:`SIGNALS`: request rate, output or multimodal tokens per
second, or their means per request); :class:`~easerve_core.controller.Controller`
reads it, ``easerve plan-table`` writes it. Re-exported by
:mod:`easerve_core.controller`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from easerve_core import checks
from easerve_core.deployment import Deployment


@dataclass(frozen=True, slots=True, kw_only=True)
class Band:
    """The deployment HAS planned for ``rate_hz``."""

    rate_hz: float
    deployment: Deployment

    def __post_init__(self) -> None:
        checks.positive("band.rate_hz", self.rate_hz)


#: what a table's bands are planned along: a request's weight in what the controller measures
#: over its window (``requests``: req/s; ``output_tokens``: output tokens asked per second, the
#: max_tokens a request carries; ``mm_tokens``: multimodal LM tokens per second, known once the
#: processor ran; the ``*_mean`` ones: the same weight's mean per request, for shifts of the mix
#: at a steady request rate)
SIGNALS: Mapping[str, Callable[[Any], float]] = {
    "requests": lambda request: 1.0,
    "output_tokens": lambda request: float(request.output_tokens),
    "mm_tokens": lambda request: float(request.mm_tokens),
    "output_tokens_mean": lambda request: float(request.output_tokens),
    "mm_tokens_mean": lambda request: float(request.mm_tokens),
}


@dataclass(frozen=True, slots=True)
class PlanTable:
    """Bands in increasing level of the table's ``signal`` (:data:`SIGNALS`; a band's ``rate_hz`` is
    in its unit: req/s for ``requests``, tokens/s for ``output_tokens`` and ``mm_tokens``, tokens
    per request for the ``*_mean`` ones); :meth:`band_for` is the rule between them."""

    bands: tuple[Band, ...]
    signal: str = "requests"

    def __post_init__(self) -> None:
        checks.one_of("plan table: signal", self.signal, list(SIGNALS))
        if not self.bands:
            raise ValueError("plan table: needs at least one band")
        rates = [b.rate_hz for b in self.bands]
        if rates != sorted(rates) or len(set(rates)) != len(rates):
            raise ValueError(f"plan table: band rates must increase, got {rates}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"bands": [{"rate_hz": b.rate_hz, "deployment": b.deployment.to_dict()}
                                         for b in self.bands]}
        if self.signal != "requests":  # a request-rate table's JSON stays as it was
            out["signal"] = self.signal
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanTable:
        """A table from its JSON form (``easerve plan-table`` writes it)."""
        raw = data.get("bands") if isinstance(data, Mapping) else None
        if not isinstance(raw, list) or not raw:
            raise ValueError("plan table: 'bands' must be a non-empty list of {rate_hz, deployment}")
        bands = []
        for i, band in enumerate(raw):
            if not isinstance(band, Mapping) or set(band) != {"rate_hz", "deployment"}:
                raise ValueError(f"plan table: bands[{i}] must hold rate_hz and deployment")
            try:
                bands.append(Band(rate_hz=band["rate_hz"],
                                  deployment=Deployment.from_dict(dict(band["deployment"]))))
            except ValueError as exc:
                raise ValueError(f"plan table: bands[{i}]: {exc}") from None
        return cls(tuple(bands), signal=data.get("signal", "requests"))

    def weight(self, request: Any) -> float:
        """``request``'s weight in the table's signal (1 for ``requests``)."""
        return SIGNALS[self.signal](request)

    def band_for(self, rate_hz: float) -> int:
        """The first band planned for at least ``rate_hz``; the top band above them all."""
        for i, band in enumerate(self.bands):
            if band.rate_hz >= rate_hz:
                return i
        return len(self.bands) - 1
