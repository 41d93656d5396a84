"""Host effects: what a real host adds to the stage latencies, as one group of simulator knobs.

A live run on one small CPU host differs from isolated stage timings in ways
a stage profile cannot see (docs/calibration.md). :class:`HostEffects` is the
one type that holds them: the ``[sim.host]`` table of a config, the ``host``
group of :class:`sim.options.SimOptions`, and what the calibration loop fits
and writes into a profile (``calibration.loop.host.HostModel.effects``).
Every knob is off at its default, so a run without host effects is the plain
model of docs/simulator.md.

Fields (every time in seconds, every count >= 0):

* ``num_host_cores``: the cores every running stage shares by processor
  sharing (:mod:`sim.host`), fitted to k busy processes running at
  ``min(1, cores / k)`` of their speed alone; 0 turns the host model off.
* ``background_cores``: steady load on those cores besides the stages (the
  live front end); only with ``num_host_cores``.
* ``colocated_speed_frac``: with ``num_host_cores``, the speed of each of an
  encode worker's two lanes while both run (two threads of one process: the
  interpreter lock and shared caches); it replaces the time-slice formula.
* ``dispatch_latency_s``: from a request's arrival to its offer at an encode
  worker (the live front end's hand-off of the raw input).
* ``decode_join_s``, ``decode_leave_s``: work a Decode worker adds to its next
  segment for every request that joins its batch (growing the cache) or
  leaves it while others stay; ``decode_join_more_s`` more for every join
  beyond the first at one step boundary (:mod:`calibration.loop.joins`).
* ``handoff_prefill_s``, ``handoff_decode_s``: delay of every hand-off to a
  remote Prefill / a Decode worker beyond the link (the work around the
  message at both ends, :mod:`sim.pipeline`); ``handoff_busy_s`` more when
  the sender started its next batch before the message arrived;
  ``handoff_*_quantiles_s`` equally likely values of the first two (every
  hand-off draws one with the run's seed instead; empty: off).
* ``stall_s``: a one-off pause of every worker process (:mod:`sim.stalls`: the
  first full garbage collection after start), 0 is off; it hits an encode
  worker's batch number k drawn uniformly from
  ``[stall_encode_batches_min, stall_encode_batches_max]`` (encode and local
  Prefill batches counted together), a remote Prefill worker's batch from
  ``stall_prefill_batches_*``, a Decode worker's step from
  ``stall_decode_steps_*``; ``stall_<stage>_frac`` of each stage's workers
  pause at all (1: every one).
* ``warmup_<lane>_s`` for the lanes :data:`WARMUP_LANES`: extra seconds of a
  fresh worker's first batches of that lane, one value per batch from batch 0
  (:mod:`sim.warmup`); empty is off.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from easerve_core import checks

#: (stage, unit) of the stall model's per-stage ranges: ``stall_<stage>_<unit>_min`` / ``_max``
STALL_COUNTERS = (("encode", "batches"), ("prefill", "batches"), ("decode", "steps"))
#: lanes of the warm-up model (:mod:`sim.warmup`): ``warmup_<lane>_s``
WARMUP_LANES = ("encode", "local_prefill", "prefill", "decode")
#: the fields that are lists of seconds (empty: that model is off)
SECONDS_LISTS = (*(f"warmup_{lane}_s" for lane in WARMUP_LANES), "handoff_prefill_quantiles_s",
                 "handoff_decode_quantiles_s")
_NON_NEGATIVE = ("num_host_cores", "background_cores", "dispatch_latency_s", "decode_join_s",
                 "decode_leave_s", "decode_join_more_s", "handoff_prefill_s", "handoff_decode_s",
                 "handoff_busy_s", "stall_s")


@dataclass(frozen=True, slots=True, kw_only=True)
class HostEffects:
    """The host effects the simulator can model (see the module docstring); all off by default."""

    num_host_cores: float = 0.0
    background_cores: float = 0.0
    colocated_speed_frac: float = 1.0
    dispatch_latency_s: float = 0.0
    decode_join_s: float = 0.0
    decode_leave_s: float = 0.0
    decode_join_more_s: float = 0.0
    handoff_prefill_s: float = 0.0
    handoff_decode_s: float = 0.0
    handoff_busy_s: float = 0.0
    handoff_prefill_quantiles_s: tuple[float, ...] = ()
    handoff_decode_quantiles_s: tuple[float, ...] = ()
    stall_s: float = 0.0
    stall_encode_batches_min: int = 0
    stall_encode_batches_max: int = 0
    stall_prefill_batches_min: int = 0
    stall_prefill_batches_max: int = 0
    stall_decode_steps_min: int = 0
    stall_decode_steps_max: int = 0
    stall_encode_frac: float = 1.0
    stall_prefill_frac: float = 1.0
    stall_decode_frac: float = 1.0
    warmup_encode_s: tuple[float, ...] = ()
    warmup_local_prefill_s: tuple[float, ...] = ()
    warmup_prefill_s: tuple[float, ...] = ()
    warmup_decode_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        for name in _NON_NEGATIVE:
            set_(self, name, checks.non_negative(f"host.{name}", getattr(self, name)))
        colocated = checks.fraction("host.colocated_speed_frac", self.colocated_speed_frac)
        if colocated <= 0.0:
            raise ValueError(f"host.colocated_speed_frac must be > 0, got {colocated!r}")
        set_(self, "colocated_speed_frac", colocated)
        for stage, unit in STALL_COUNTERS:
            low, high = (f"stall_{stage}_{unit}_{end}" for end in ("min", "max"))
            set_(self, low, checks.integer(f"host.{low}", getattr(self, low), minimum=0))
            set_(self, high, checks.integer(f"host.{high}", getattr(self, high), minimum=0))
            if getattr(self, high) < getattr(self, low):
                raise ValueError(f"host.{high} must be >= host.{low}, "
                                 f"got {getattr(self, high)!r} < {getattr(self, low)!r}")
            frac = f"stall_{stage}_frac"
            set_(self, frac, checks.fraction(f"host.{frac}", getattr(self, frac)))
        for name in SECONDS_LISTS:
            set_(self, name, _seconds(f"host.{name}", getattr(self, name)))

    @property
    def shares_cores(self) -> bool:
        """Whether the host CPU model (shared cores) is on."""
        return self.num_host_cores > 0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostEffects:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown host field(s): {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(known))}")
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def _seconds(name: str, value: Any) -> tuple[float, ...]:
    """``value`` as a tuple of finite seconds >= 0."""
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise ValueError(f"{name} must be a list of seconds, got {value!r}")
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x < 0:
            raise ValueError(f"{name} must hold finite numbers >= 0, got {value!r}")
    return tuple(float(x) for x in value)
