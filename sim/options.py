"""Simulator knobs that are not part of a deployment: the ``[sim]`` config table, in groups.

A :class:`SimOptions` holds the mechanism choices the paper leaves open and
the simulator has to pick (docs/simulator.md): how the front dispatcher picks
an encode worker, how many tokens one prefill batch may hold, how much a
time-sliced GPU loses to context switches, whether closed encode batches
that wait for a busy encoder are merged, whether to stop at Encode,
whether an encode worker takes requests while it encodes and how many host
threads preprocess requests ahead of each encoder. Two named groups
hold the rest: :class:`Recording` (what time series a run keeps, ``[sim.record]``)
and :class:`~sim.host_effects.HostEffects` (what a real host adds,
``[sim.host]``; the type the calibration loop fits). Every knob carries its
unit in its name; the defaults are documented there.

:func:`options_for` is the one place a plan's ``[sim]`` table becomes
options (over a base, e.g. a calibrated profile's host effects).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from easerve_core import checks
from easerve_core.settings import Settings, refuse_unknown, rule
from sim.host_effects import SECONDS_LISTS, STALL_COUNTERS, WARMUP_LANES, HostEffects

if TYPE_CHECKING:
    from easerve_core.plan import RunPlan

__all__ = ["DISPATCH_POLICIES", "KV_ADMISSIONS", "SECONDS_LISTS", "STALL_COUNTERS", "WARMUP_LANES",
           "HostEffects", "Recording", "Scheduling", "SimOptions", "options_for"]

DISPATCH_POLICIES = ("round-robin", "least-loaded")
_FLAG = rule(checks.flag)


@dataclass(frozen=True, slots=True, kw_only=True)
class Recording(Settings):
    """What a run keeps besides its records (``[sim.record]``).

    Args:
        utilization: the per-GPU busy-fraction time series.
        queues: the per-stage queue-length time series.
    """

    section = "sim.record"
    prefix = "sim.record."
    utilization: bool = field(default=True, metadata=_FLAG)
    queues: bool = field(default=True, metadata=_FLAG)


KV_ADMISSIONS = ("reserve", "grow")


@dataclass(frozen=True, slots=True, kw_only=True)
class Scheduling(Settings):
    """How an engine's steps are scheduled (``[sim.scheduler]``; :mod:`sim.chunked`).

    Args:
        chunked_prefill: the aggregated (vLLM-like) engine schedules each step as
            vLLM's V1 scheduler does: decodes first, then prefill chunks within
            ``step_token_budget``, multimodal items encoded within the encoder
            budget, KV that grows and preemption by recompute. False: the older
            prefill-first engine (a whole prefill phase pauses every decode; KV
            reserved for the whole sequence; the live executor's aggregated worker).
        step_token_budget: tokens one step may process (vLLM's ``max_num_batched_tokens``;
            2048 is its API server's default on GPUs under 70 GiB, as the RTX 6000 Ada).
        encoder_budget_tokens: multimodal tokens one step may encode (vLLM's
            ``max_num_encoder_input_tokens``); 0: the step budget, vLLM's default.
        decode_kv: how a disaggregated Decode worker holds KV: ``reserve`` (the
            whole sequence at admission, never preempted; the live executor's) or
            ``grow`` (paged, preempting the newest sequence by recompute when full).
        prefill_chunked: remote Prefill workers run batches of exactly
            ``step_token_budget`` tokens, a request cut at the edge finishing in the
            next (vLLM's chunked prefill on a prefill-only engine); False: token-budget
            batches of whole requests (``prefill_max_batch_tokens``).
    """

    section = "sim.scheduler"
    prefix = "sim.scheduler."
    chunked_prefill: bool = field(default=True, metadata=_FLAG)
    step_token_budget: int = field(default=2048, metadata=rule(checks.integer, minimum=1))
    encoder_budget_tokens: int = field(default=0, metadata=rule(checks.integer, minimum=0))
    decode_kv: str = field(default="reserve", metadata=rule(checks.one_of, known=KV_ADMISSIONS))
    prefill_chunked: bool = field(default=False, metadata=_FLAG)

    @property
    def encoder_budget(self) -> int:
        return self.encoder_budget_tokens or self.step_token_budget


def _overhead(name: str, value: Any) -> float:
    overhead = checks.fraction(name, value)
    if overhead >= 1.0:
        raise ValueError(f"{name} must be < 1, got {overhead!r}")
    return overhead


#: a run that keeps no time series (HAS trials, sweeps)
NO_RECORDING = Recording(utilization=False, queues=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimOptions(Settings):
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
        encode_intake_blocking: an encode worker takes no request while it
            encodes (the live worker's one receive loop runs the batch):
            requests that reach it meanwhile are offered when the batch ends,
            one by one until a batch closes, and its batcher is not polled
            while it encodes. False by default.
        num_preprocess_threads: host threads of each encode worker and each
            aggregated instance that preprocess requests (media decode and the
            model's processor) ahead of its encoder, FIFO (:mod:`sim.preprocess`);
            only where the profile knows host preprocessing. 1 by default: vLLM's
            one API-server process, our live encode worker's one receive loop.
        record: what time series the run keeps (:class:`Recording`).
        scheduler: how engines schedule their steps (:class:`Scheduling`).
        host: what a real host adds (:class:`~sim.host_effects.HostEffects`); off by default.
    """

    prefix = "sim."
    dispatch: str = field(default="round-robin", metadata=rule(checks.one_of, known=DISPATCH_POLICIES))
    prefill_max_batch_tokens: int = field(default=8192, metadata=rule(checks.integer, minimum=1))
    time_slice_overhead_frac: float = field(default=0.1, metadata=rule(_overhead))
    coalesce_waiting_batches: bool = field(default=True, metadata=_FLAG)
    encode_only: bool = field(default=False, metadata=_FLAG)
    encode_intake_blocking: bool = field(default=False, metadata=_FLAG)
    num_preprocess_threads: int = field(default=1, metadata=rule(checks.integer, minimum=1, store=True))
    record: Recording = field(default_factory=Recording, metadata=rule(checks.instance, kind=Recording))
    scheduler: Scheduling = field(default_factory=Scheduling, metadata=rule(checks.instance, kind=Scheduling))
    host: HostEffects = field(default_factory=HostEffects, metadata=rule(checks.instance, kind=HostEffects))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, base: SimOptions | None = None) -> SimOptions:
        """Options from a ``[sim]`` table: its keys over ``base`` (default: the defaults).

        The groups are sub-tables (``record = {...}``, ``host = {...}``) whose
        keys replace the base group's one by one.
        """
        base = base or cls()
        known = {f.name for f in fields(cls)}
        host_keys = {f.name for f in fields(HostEffects)}
        hint = " (host effects live in [sim.host])" if any(
            k not in known and (k in host_keys or k.startswith("host_")) for k in data) else ""
        refuse_unknown(data, sorted(known), "sim", hint=hint)
        changes: dict[str, Any] = {k: v for k, v in data.items() if k not in dict(_GROUPS)}
        for name, kind in _GROUPS:
            if name not in data:
                continue
            table = data[name]
            if not isinstance(table, Mapping):
                raise ValueError(f"sim.{name} must be a table, got {table!r}")
            refuse_unknown(table, sorted(f.name for f in fields(kind)), f"sim.{name}")
            changes[name] = replace(getattr(base, name), **dict(table))
        return replace(base, **changes)


_GROUPS: tuple[tuple[str, type], ...] = (("record", Recording), ("scheduler", Scheduling),
                                         ("host", HostEffects))


def options_for(plan: RunPlan, *, base: SimOptions | None = None) -> SimOptions:
    """The simulator options of ``plan``: its ``[sim]`` table over ``base``."""
    return SimOptions.from_dict(plan.engine("sim"), base=base)
