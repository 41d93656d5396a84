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
from dataclasses import dataclass, field
from typing import Any

from easerve_core import checks
from easerve_core.settings import Settings, rule

#: (stage, unit) of the stall model's per-stage ranges: ``stall_<stage>_<unit>_min`` / ``_max``
STALL_COUNTERS = (("encode", "batches"), ("prefill", "batches"), ("decode", "steps"))
#: lanes of the warm-up model (:mod:`sim.warmup`): ``warmup_<lane>_s``
WARMUP_LANES = ("encode", "local_prefill", "prefill", "decode")
#: the fields that are lists of seconds (empty: that model is off)
SECONDS_LISTS = (*(f"warmup_{lane}_s" for lane in WARMUP_LANES), "handoff_prefill_quantiles_s",
                 "handoff_decode_quantiles_s")


def _seconds(name: str, value: Any) -> tuple[float, ...]:
    """``value`` as a tuple of finite seconds >= 0."""
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise ValueError(f"{name} must be a list of seconds, got {value!r}")
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x < 0:
            raise ValueError(f"{name} must hold finite numbers >= 0, got {value!r}")
    return tuple(float(x) for x in value)


def _speed(name: str, value: Any) -> float:
    speed = checks.fraction(name, value)
    if speed <= 0.0:
        raise ValueError(f"{name} must be > 0, got {speed!r}")
    return speed


def _knob(check: Any, default: Any, **options: Any) -> Any:
    """A field checked by ``check`` that keeps the normalised value (a new field each call)."""
    return field(default=default, metadata=rule(check, store=True, **options))


def _seconds_off() -> Any:
    return _knob(checks.non_negative, 0.0)


def _frac_all() -> Any:
    return _knob(checks.fraction, 1.0)


def _count_off() -> Any:
    return _knob(checks.integer, 0, minimum=0)


def _list_off() -> Any:
    return _knob(_seconds, ())


@dataclass(frozen=True, slots=True, kw_only=True)
class HostEffects(Settings):
    """The host effects the simulator can model (see the module docstring); all off by default."""

    section = "host"
    prefix = "host."
    num_host_cores: float = _seconds_off()
    background_cores: float = _seconds_off()
    colocated_speed_frac: float = _knob(_speed, 1.0)
    dispatch_latency_s: float = _seconds_off()
    decode_join_s: float = _seconds_off()
    decode_leave_s: float = _seconds_off()
    decode_join_more_s: float = _seconds_off()
    handoff_prefill_s: float = _seconds_off()
    handoff_decode_s: float = _seconds_off()
    handoff_busy_s: float = _seconds_off()
    handoff_prefill_quantiles_s: tuple[float, ...] = _list_off()
    handoff_decode_quantiles_s: tuple[float, ...] = _list_off()
    stall_s: float = _seconds_off()
    stall_encode_batches_min: int = _count_off()
    stall_encode_batches_max: int = _count_off()
    stall_prefill_batches_min: int = _count_off()
    stall_prefill_batches_max: int = _count_off()
    stall_decode_steps_min: int = _count_off()
    stall_decode_steps_max: int = _count_off()
    stall_encode_frac: float = _frac_all()
    stall_prefill_frac: float = _frac_all()
    stall_decode_frac: float = _frac_all()
    warmup_encode_s: tuple[float, ...] = _list_off()
    warmup_local_prefill_s: tuple[float, ...] = _list_off()
    warmup_prefill_s: tuple[float, ...] = _list_off()
    warmup_decode_s: tuple[float, ...] = _list_off()

    def __post_init__(self) -> None:
        self.validate()
        for stage, unit in STALL_COUNTERS:
            low, high = (f"stall_{stage}_{unit}_{end}" for end in ("min", "max"))
            if getattr(self, high) < getattr(self, low):
                raise ValueError(f"host.{high} must be >= host.{low}, "
                                 f"got {getattr(self, high)!r} < {getattr(self, low)!r}")

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in Settings.to_dict(self).items()}

    @property
    def shares_cores(self) -> bool:
        """Whether the host CPU model (shared cores) is on."""
        return self.num_host_cores > 0
