"""The host model a calibrated profile carries: what a CPU host adds to the stage latencies.

A live run on one small CPU host differs from isolated stage timings in ways
the stage fit cannot see (docs/calibration.md). :class:`HostModel` holds the
measured numbers, stored under ``params["host"]`` of a profile document (one
flat object), in two parts:

* ``effects``: a :class:`sim.host_effects.HostEffects`, the very type the
  simulator reads as ``[sim.host]`` (cores and co-location, the front end's
  dispatch, decode batch changes, hand-offs, stalls, warm-ups; each field is
  documented there, and each is fitted by one module of this package:
  :mod:`calibration.loop.measure` the cores, co-location and dispatch,
  :mod:`~calibration.loop.joins`, :mod:`~calibration.loop.handoffs`,
  :mod:`~calibration.loop.stalls` and :mod:`~calibration.loop.warmup` the rest,
  from live traces);
* what the simulator takes elsewhere: ``transfer_latency_s`` /
  ``transfer_bytes_per_s``, one hand-off between processes (the cluster's
  link, :meth:`HostModel.cluster_overrides`), and ``decode_step_overhead_s``,
  the decode loop's work around each step, added to every decode step of the
  profile (:func:`with_overheads`).

:data:`LIVE_MECHANISMS` are the live executor's own choices the simulator
mirrors when it is compared with it (one prefill at a time, an encode worker
that takes no request while it encodes); :meth:`HostModel.sim_base` gives the
options a simulation of a calibrated profile starts from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from calibration.fit import FittedProfile
from easerve_core import checks
from easerve_core.settings import Settings, refuse_unknown, rule
from sim.host_effects import STALL_COUNTERS, HostEffects
from sim.options import Scheduling, SimOptions

#: [sim] knobs that mirror the live executor's mechanisms (docs/live.md, "Known limits")
LIVE_MECHANISMS: Mapping[str, Any] = {
    "prefill_max_batch_tokens": 1,  # remote and local Prefill run one request at a time
    "encode_intake_blocking": True,  # the encode worker's receive loop runs the batch
    # the live aggregated worker runs prefill-first phases, KV reserved per sequence
    "scheduler": Scheduling(chunked_prefill=False),
}
#: (stage group, counter unit) of the stall ranges, as ``[sim.host] stall_<group>_<unit>_min`` / ``_max``
STALL_GROUPS = STALL_COUNTERS
#: parallel transfer paths: every live receiver has its own queue, so transfers do not queue
LINK_PATHS = 64
_OWN = ("transfer_latency_s", "transfer_bytes_per_s", "decode_step_overhead_s")


def _non_negative(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _bandwidth(name: str, value: Any) -> float:
    out = _non_negative(name, value)
    if out <= 0:
        raise ValueError(f"{name} must be > 0, got {out!r}")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class HostModel(Settings):
    """Measured host effects plus the link and the decode-loop overhead (see the module docstring)."""

    prefix = "host."
    effects: HostEffects = field(default_factory=HostEffects,
                                 metadata=rule(checks.instance, kind=HostEffects))
    transfer_latency_s: float = field(default=0.0, metadata=rule(_non_negative, store=True))
    transfer_bytes_per_s: float = field(default=1e12, metadata=rule(_bandwidth, store=True))
    decode_step_overhead_s: float = field(default=0.0, metadata=rule(_non_negative, store=True))

    def with_effects(self, **changes: Any) -> HostModel:
        """A copy whose effects have ``changes`` applied (and validated)."""
        return replace(self, effects=replace(self.effects, **changes))

    def to_dict(self) -> dict[str, Any]:
        """One flat object: the effects' fields and the model's own."""
        return {**self.effects.to_dict(), **{name: getattr(self, name) for name in _OWN}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostModel:
        effect_names = {f.name for f in fields(HostEffects)}
        refuse_unknown(data, sorted(effect_names | set(_OWN)), "host")
        effects = HostEffects.from_dict({k: v for k, v in data.items() if k in effect_names})
        return cls(effects=effects, **{k: v for k, v in data.items() if k in _OWN})

    def sim_base(self) -> SimOptions:
        """The simulator options a run of this host starts from: its effects and :data:`LIVE_MECHANISMS`."""
        return SimOptions(host=self.effects, **LIVE_MECHANISMS)

    def cluster_overrides(self) -> dict[str, Any]:
        """The ``[cluster]`` link keys: a hand-off between worker processes."""
        return {"link_latency_s": self.transfer_latency_s, "link_bytes_per_s": self.transfer_bytes_per_s,
                "num_links": LINK_PATHS}


def with_overheads(profile: FittedProfile, host: HostModel) -> FittedProfile:
    """``profile`` with the decode loop's per-step overhead added to every decode step."""
    if host.decode_step_overhead_s == 0:
        return profile
    decode = dict(profile.decode)
    decode["fixed_s"] += host.decode_step_overhead_s
    return replace(profile, decode=decode)


def host_of(params: Mapping[str, Any]) -> HostModel | None:
    """The host model stored in a profile document's params, or None."""
    data = params.get("host")
    return None if data is None else HostModel.from_dict(data)


def fit_transfer(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """(latency_s, bytes_per_s) of ``latency = a + bytes / bw`` by least squares (a, 1/bw >= 0)."""
    n = len(rows)
    if n < 2:
        raise ValueError("transfer rows: need at least two message sizes")
    xs = [float(r["bytes"]) for r in rows]
    ys = [float(r["latency_s"]) for r in rows]
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    slope = max(0.0, sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var) if var else 0.0
    intercept = max(0.0, my - slope * mx)
    return intercept, (1.0 / slope if slope > 0 else 1e12)
