"""The live executor's own knobs: the config file's ``[live]`` table, validated.

Every knob has its unit in its name (STYLE.md habit 7); an unknown key fails
with the key named. Defaults suit the tiny models on a small CPU box.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from easerve_core.settings import Settings, refuse_unknown, rule

DEVICES = ("cpu", "cuda")
START_METHODS = ("forkserver", "spawn")


def _choice(name: str, value: Any, *, known: tuple[str, ...]) -> Any:
    if value not in known:
        raise ValueError(f"{name} must be one of {', '.join(known)}, got {value!r}")
    return value


def _count(name: str, value: Any, *, least: int) -> Any:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    return value


def _amount(name: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a number > 0, got {value!r}")
    return value


def _positive(default: float) -> Any:
    return field(default=default, metadata=rule(_amount))


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveOptions(Settings):
    """Knobs of one live trial.

    Args:
        device: where the models run (``cuda``: one device per process, live/device.py;
            run on an H200, bench/gpu/RESULTS.md §6).
        num_threads: torch intra-op threads of prefill and decode workers.
        encode_threads: threads an encode worker's partitioner divides between
            Encode and local Prefill.
        partition_backend: ``cpu-threads`` (or ``green-context`` on a CUDA device, live/gpu).
        init_std: weight-init scale of the random model (0.5 makes positions matter).
        model_seed: seed of the random weights.
        weights_dir: where the weights are saved once and loaded by every
            worker; empty means a temporary folder removed after the trial.
        mm_token_scale: factor applied to each item's LM tokens, so the presets'
            full-size token counts fit a tiny model. It is applied to the plan
            when it is resolved (``calibration.session.compose``), so the
            simulator runs the same items as the live run; the record holds
            the tokens the model actually got.
        start_method: ``forkserver`` (fast: torch imported once) or ``spawn``.
        startup_timeout_s: the longest workers may take to load and warm up.
        trial_timeout_s: the longest a trial may run after its start; requests
            still open then end ``failed``.
        shutdown_timeout_s: grace before a worker that will not stop is terminated.
        poll_interval_s: the longest any loop sleeps before checking for stop.
    """

    prefix = "live."
    device: str = field(default="cpu", metadata=rule(_choice, known=DEVICES))
    num_threads: int = field(default=1, metadata=rule(_count, least=1))
    encode_threads: int = field(default=2, metadata=rule(_count, least=1))
    partition_backend: str = "cpu-threads"
    init_std: float = _positive(0.02)
    model_seed: int = field(default=0, metadata=rule(_count, least=0))
    weights_dir: str = ""
    mm_token_scale: float = _positive(1.0)
    start_method: str = field(default="forkserver", metadata=rule(_choice, known=START_METHODS))
    startup_timeout_s: float = _positive(180.0)
    trial_timeout_s: float = _positive(120.0)
    shutdown_timeout_s: float = _positive(5.0)
    poll_interval_s: float = _positive(0.02)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> LiveOptions:
        data = dict(data or {})
        hint = " (the SM-share table is the plan's: [profile] sm_share_table)" if (
            "sm_share_table" in data) else ""
        refuse_unknown(data, sorted(f.name for f in fields(cls)), "live", hint=hint)
        return cls(**data)
