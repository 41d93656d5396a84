"""Simulator knobs that are not part of a deployment: the ``[sim]`` config table.

A :class:`SimOptions` holds the mechanism choices the paper leaves open and
the simulator has to pick (docs/simulator.md): how the front dispatcher picks
an encode worker, how many tokens one prefill batch may hold, how much a
time-sliced GPU loses to context switches, whether closed encode batches
that wait for a busy encoder are merged, and whether to stop at Encode.
Every knob carries its unit in its name; the defaults are documented there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from easerve_core import checks

DISPATCH_POLICIES = ("round-robin", "least-loaded")
#: (stage, unit) of the stall model's per-stage ranges: ``stall_<stage>_<unit>_min`` / ``_max``
STALL_COUNTERS = (("encode", "batches"), ("prefill", "batches"), ("decode", "steps"))
#: lanes of the warm-up model (:mod:`sim.warmup`): ``warmup_<lane>_s``
WARMUP_LANES = ("encode", "local_prefill", "prefill", "decode")
#: the options that are lists of seconds (empty: that model is off)
SECONDS_LISTS = (*(f"warmup_{lane}_s" for lane in WARMUP_LANES), "handoff_prefill_quantiles_s",
                 "handoff_decode_quantiles_s")


@dataclass(frozen=True, slots=True, kw_only=True)
class SimOptions:
    """Mechanism knobs of the simulator.

    Args:
        dispatch: front dispatcher, ``round-robin`` or ``least-loaded`` (fewest
            requests waiting or running on the encode worker, lowest index on a tie).
        prefill_max_batch_tokens: a prefill batch takes waiting requests in
            arrival order while their summed input tokens stay within this
            budget; a single longer request still runs, alone.
        time_slice_overhead_frac: under ``time-slice`` sharing, the fraction of
            GPU time lost to context switches while Encode and local Prefill
            both have work; each then progresses at ``(1 - overhead) / 2`` of
            its exclusive speed.
        coalesce_waiting_batches: when the encoder frees and several closed
            batches wait, merge them in order while the total stays within B
            (a batch is never split); False runs each closed batch as closed.
        encode_only: stop every request after Encode (pure-encode what-ifs and
            the queueing-theory check); records then have no prefill or decode.
        record_utilization: keep the per-GPU busy-fraction time series.
        record_queues: keep the per-stage queue-length time series.
        num_host_cores: host CPU contention (sim.host, docs/calibration.md): the
            cores that every running stage shares by processor sharing, for
            worker processes on one CPU host; 0 (default) turns the model off.
        host_background_cores: steady load on those cores besides the stages
            (the live front end); only with ``num_host_cores``.
        host_colocated_speed_frac: with ``num_host_cores``, the speed of each of an
            encode worker's two lanes while both run (two threads of one
            process: the interpreter lock and shared caches), measured by
            ``easerve calibrate``; it replaces the time-slice formula there.
        dispatch_latency_s: delay from a request's arrival to its offer at an
            encode worker (the live front end's hand-off); 0 by default.
        encode_intake_blocking: an encode worker takes no request while it
            encodes (the live worker's one receive loop runs the batch):
            requests that reach it meanwhile are offered when the batch ends,
            one by one until a batch closes, and its batcher is not polled
            while it encodes. False by default.
        decode_join_s: work a Decode worker adds to its next segment for every
            request that joins its batch (growing the cache); 0 by default.
        decode_leave_s: work a Decode worker adds to its next segment for every
            request that leaves its batch while others stay; 0 by default.
        decode_join_more_s: more work for every join beyond the first at one
            step boundary (live: several at once cost more than their sum);
            0 by default.
        handoff_prefill_s, handoff_decode_s: delay of every hand-off to a
            remote Prefill / a Decode worker beyond the link (the work around
            the message at both ends, :mod:`sim.pipeline`); 0 by default.
        handoff_busy_s: more delay of a hand-off whose sender started its next
            batch before the message arrived (:mod:`sim.pipeline`); 0 by default.
        handoff_prefill_quantiles_s, handoff_decode_quantiles_s: equally likely
            values of that delay (the quantiles of measured ones); when given,
            every hand-off draws one with the run's seed instead of using
            ``handoff_prefill_s`` / ``handoff_decode_s``. Empty by default.
        stall_s: a one-off pause of every worker process (:mod:`sim.stalls`: the
            first full garbage collection after start), seconds of work added to
            one of its batches; 0 (default) turns the stall model off.
        stall_encode_batches_min, stall_encode_batches_max: with ``stall_s``, the
            pause hits an encode worker's batch number k (its encode and local
            Prefill batches counted together from 0), k drawn uniformly from
            [min, max] with a generator derived from the run's seed.
        stall_prefill_batches_min, stall_prefill_batches_max: the same for a
            remote Prefill worker's batches.
        stall_decode_steps_min, stall_decode_steps_max: the same for a Decode
            worker's steps (the pause runs before step k).
        stall_encode_frac, stall_prefill_frac, stall_decode_frac: with ``stall_s``,
            the fraction of that stage's workers that pause at all (each worker
            draws it, seeded, before its batch number); 1 (default): every one.
        warmup_encode_s, warmup_local_prefill_s, warmup_prefill_s, warmup_decode_s:
            a fresh worker's warm-up (:mod:`sim.warmup`): extra seconds of work of
            its first batches of that lane, one value per batch from batch 0 (an
            encode worker's encode and local Prefill batches, a remote Prefill
            worker's batches, a Decode worker's steps); empty (default) is off.
    """

    dispatch: str = "round-robin"
    prefill_max_batch_tokens: int = 8192
    time_slice_overhead_frac: float = 0.1
    coalesce_waiting_batches: bool = True
    encode_only: bool = False
    record_utilization: bool = True
    record_queues: bool = True
    num_host_cores: float = 0.0
    host_background_cores: float = 0.0
    host_colocated_speed_frac: float = 1.0
    dispatch_latency_s: float = 0.0
    encode_intake_blocking: bool = False
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
        checks.one_of("sim.dispatch", self.dispatch, DISPATCH_POLICIES)
        checks.integer("sim.prefill_max_batch_tokens", self.prefill_max_batch_tokens, minimum=1)
        overhead = checks.fraction("sim.time_slice_overhead_frac", self.time_slice_overhead_frac)
        if overhead >= 1.0:
            raise ValueError(f"sim.time_slice_overhead_frac must be < 1, got {overhead!r}")
        for name in ("num_host_cores", "host_background_cores", "dispatch_latency_s", "decode_join_s",
                     "decode_leave_s", "decode_join_more_s", "handoff_prefill_s", "handoff_decode_s",
                     "handoff_busy_s", "stall_s"):
            checks.non_negative(f"sim.{name}", getattr(self, name))
        for stage, unit in STALL_COUNTERS:
            low = checks.integer(f"sim.stall_{stage}_{unit}_min", getattr(self, f"stall_{stage}_{unit}_min"),
                                 minimum=0)
            high = checks.integer(f"sim.stall_{stage}_{unit}_max", getattr(self, f"stall_{stage}_{unit}_max"),
                                  minimum=0)
            if high < low:
                raise ValueError(f"sim.stall_{stage}_{unit}_max must be >= sim.stall_{stage}_{unit}_min, "
                                 f"got {high!r} < {low!r}")
        for stage, _ in STALL_COUNTERS:
            checks.fraction(f"sim.stall_{stage}_frac", getattr(self, f"stall_{stage}_frac"))
        for name in SECONDS_LISTS:
            value = getattr(self, name)
            if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
                raise ValueError(f"sim.{name} must be a list of seconds, got {value!r}")
            object.__setattr__(self, name, tuple(checks.non_negative(f"sim.{name}", x) for x in value))
        colocated = checks.fraction("sim.host_colocated_speed_frac", self.host_colocated_speed_frac)
        if colocated <= 0.0:
            raise ValueError(f"sim.host_colocated_speed_frac must be > 0, got {colocated!r}")
        for name in ("coalesce_waiting_batches", "encode_only", "record_utilization", "record_queues",
                     "encode_intake_blocking"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"sim.{name} must be true or false, got {getattr(self, name)!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SimOptions:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown sim field(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
