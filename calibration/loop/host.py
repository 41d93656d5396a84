"""The host model a calibrated profile carries: what a CPU host adds to the stage latencies.

A live run on one small CPU host differs from isolated stage timings in ways
the stage fit cannot see (docs/calibration.md). :class:`HostModel` holds the
measured numbers, stored under ``params["host"]`` of a profile document, and
turns them into the simulator's opt-in knobs:

* ``num_host_cores``: effective cores, fitted to k busy processes running at
  ``min(1, cores / k)`` of their speed alone (``[sim] num_host_cores``);
* ``colocated_speed_frac``: Encode and local Prefill as two threads of one
  process, beyond the core sharing (``[sim] host_colocated_speed_frac``);
* ``transfer_latency_s`` / ``transfer_bytes_per_s``: one hand-off between
  processes (the cluster's link: ``link_latency_s``, ``link_bytes_per_s``);
* ``dispatch_latency_s``: the front end's hand-off of a request's raw input to
  its encode worker (``[sim] dispatch_latency_s``);
* ``decode_step_overhead_s``: the decode loop's work around each step,
  added to every decode step (:func:`with_overheads`);
* ``decode_join_s`` / ``decode_leave_s``: a prefilled request joining a
  running decode batch (taken off the queue, its KV rebuilt and concatenated)
  and a finished one leaving it, paid on the loop all running requests wait
  for (``[sim] decode_join_s``, ``decode_leave_s``; ``decode_join_more_s``
  for every join beyond the first at one boundary); ``calibrate`` measures
  the concatenation alone, the refit the whole change from live traces
  (:mod:`calibration.loop.joins`);
* ``handoff_prefill_s`` / ``handoff_decode_s``: a hand-off to a remote
  Prefill / a Decode worker beyond the link (the work around the message at
  both ends), and ``handoff_busy_s`` more when the sender goes on with its
  next batch at once, fitted from live traces; ``handoff_*_quantiles_s`` the
  spread of the first two (equally likely values the simulator draws from)
  (:mod:`calibration.loop.handoffs`; ``[sim] handoff_*_s``);
* ``stall_s`` and the ``stall_<stage>_*`` ranges: every worker process's
  one-off pause (its first full garbage collection) and the batch numbers it
  hit, and per stage the fraction of processes that paused, fitted from live
  traces (:mod:`calibration.loop.stalls`; ``[sim]
  stall_*``, :mod:`sim.stalls`); ``stall_s = 0`` leaves the stall model off;
* ``warmup_<lane>_s``: a fresh worker process's warm-up, extra seconds of its
  first batches of each lane, fitted from live traces
  (:mod:`calibration.loop.warmup`; ``[sim] warmup_*``, :mod:`sim.warmup`);
  empty leaves the warm-up model off.

:data:`LIVE_MECHANISMS` are the live executor's own choices the simulator
mirrors when it is compared with it (one prefill at a time, an encode worker
that takes no request while it encodes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from calibration.fit import FittedProfile
from sim.options import SECONDS_LISTS

#: [sim] knobs that mirror the live executor's mechanisms (docs/live.md, "Known limits")
LIVE_MECHANISMS: Mapping[str, Any] = {
    "prefill_max_batch_tokens": 1,  # remote and local Prefill run one request at a time
    "encode_intake_blocking": True,  # the encode worker's receive loop runs the batch
}
#: (stage group, counter unit) of the stall ranges, as ``[sim] stall_<group>_<unit>_min`` / ``_max``
STALL_GROUPS = (("encode", "batches"), ("prefill", "batches"), ("decode", "steps"))
#: host fields passed to the ``[sim]`` table under the same name
SIM_KNOBS = ("dispatch_latency_s", "decode_join_s", "decode_leave_s", "decode_join_more_s",
             "handoff_prefill_s", "handoff_decode_s", "handoff_busy_s")
#: parallel transfer paths: every live receiver has its own queue, so transfers do not queue
LINK_PATHS = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class HostModel:
    """Measured host effects (see the module docstring); every field >= 0."""

    num_host_cores: float = 0.0
    colocated_speed_frac: float = 1.0
    transfer_latency_s: float = 0.0
    transfer_bytes_per_s: float = 1e12
    dispatch_latency_s: float = 0.0
    decode_step_overhead_s: float = 0.0
    decode_join_s: float = 0.0
    decode_leave_s: float = 0.0
    decode_join_more_s: float = 0.0
    handoff_prefill_s: float = 0.0
    handoff_decode_s: float = 0.0
    handoff_busy_s: float = 0.0
    handoff_prefill_quantiles_s: tuple[float, ...] = ()
    handoff_decode_quantiles_s: tuple[float, ...] = ()
    background_cores: float = 0.0
    stall_s: float = 0.0
    stall_encode_batches_min: float = 0.0
    stall_encode_batches_max: float = 0.0
    stall_prefill_batches_min: float = 0.0
    stall_prefill_batches_max: float = 0.0
    stall_decode_steps_min: float = 0.0
    stall_decode_steps_max: float = 0.0
    stall_encode_frac: float = 1.0
    stall_prefill_frac: float = 1.0
    stall_decode_frac: float = 1.0
    warmup_encode_s: tuple[float, ...] = ()
    warmup_local_prefill_s: tuple[float, ...] = ()
    warmup_prefill_s: tuple[float, ...] = ()
    warmup_decode_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in SECONDS_LISTS:
                object.__setattr__(self, f.name, _seconds(f"host.{f.name}", value))
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                    or value < 0:
                raise ValueError(f"host.{f.name} must be a finite number >= 0, got {value!r}")
            object.__setattr__(self, f.name, float(value))
        if not 0 < self.colocated_speed_frac <= 1:
            raise ValueError(f"host.colocated_speed_frac must be in (0, 1], "
                             f"got {self.colocated_speed_frac!r}")
        if self.transfer_bytes_per_s <= 0:
            raise ValueError(f"host.transfer_bytes_per_s must be > 0, got {self.transfer_bytes_per_s!r}")
        for group, unit in STALL_GROUPS:
            if getattr(self, f"stall_{group}_frac") > 1:
                raise ValueError(f"host.stall_{group}_frac must be in [0, 1], "
                                 f"got {getattr(self, f'stall_{group}_frac')!r}")
            low, high = (getattr(self, f"stall_{group}_{unit}_{end}") for end in ("min", "max"))
            if high < low:
                raise ValueError(f"host.stall_{group}_{unit}_max must be >= host.stall_{group}_{unit}_min, "
                                 f"got {high!r} < {low!r}")

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostModel:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown host field(s): {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(known))}")
        return cls(**dict(data))

    def sim_options(self) -> dict[str, Any]:
        """The ``[sim]`` table that switches the host model on (plus :data:`LIVE_MECHANISMS`).

        The stall knobs are in it only when ``stall_s`` is above 0, a warm-up
        lane or a hand-off's quantiles only when its tuple is not empty.
        """
        out = {"num_host_cores": self.num_host_cores, "host_background_cores": self.background_cores,
               "host_colocated_speed_frac": self.colocated_speed_frac,
               **{name: getattr(self, name) for name in SIM_KNOBS}, **LIVE_MECHANISMS}
        if self.stall_s > 0:
            out["stall_s"] = self.stall_s
            for group, unit in STALL_GROUPS:
                for end in ("min", "max"):
                    name = f"stall_{group}_{unit}_{end}"
                    out[name] = round(getattr(self, name))
                out[f"stall_{group}_frac"] = getattr(self, f"stall_{group}_frac")
        for name in SECONDS_LISTS:
            if getattr(self, name):
                out[name] = list(getattr(self, name))
        return out

    def cluster_overrides(self) -> dict[str, Any]:
        """The ``[cluster]`` link keys: a hand-off between worker processes."""
        return {"link_latency_s": self.transfer_latency_s, "link_bytes_per_s": self.transfer_bytes_per_s,
                "num_links": LINK_PATHS}


def _seconds(name: str, value: Any) -> tuple[float, ...]:
    """``value`` as a tuple of finite seconds >= 0 (a warm-up lane)."""
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise ValueError(f"{name} must be a list of seconds, got {value!r}")
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x < 0:
            raise ValueError(f"{name} must hold finite numbers >= 0, got {value!r}")
    return tuple(float(x) for x in value)


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
