"""The live executor's own knobs: the config file's ``[live]`` table, validated.

Every knob has its unit in its name (STYLE.md habit 7); an unknown key fails
with the key named. Defaults suit the tiny models on a small CPU box.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

DEVICES = ("cpu", "cuda")
START_METHODS = ("forkserver", "spawn")


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveOptions:
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
            when it is resolved (``calibration.plans.plan_for``), so the
            simulator runs the same items as the live run; the record holds
            the tokens the model actually got.
        start_method: ``forkserver`` (fast: torch imported once) or ``spawn``.
        startup_timeout_s: the longest workers may take to load and warm up.
        trial_timeout_s: the longest a trial may run after its start; requests
            still open then end ``failed``.
        shutdown_timeout_s: grace before a worker that will not stop is terminated.
        poll_interval_s: the longest any loop sleeps before checking for stop.
    """

    device: str = "cpu"
    num_threads: int = 1
    encode_threads: int = 2
    partition_backend: str = "cpu-threads"
    init_std: float = 0.02
    model_seed: int = 0
    weights_dir: str = ""
    mm_token_scale: float = 1.0
    start_method: str = "forkserver"
    startup_timeout_s: float = 180.0
    trial_timeout_s: float = 120.0
    shutdown_timeout_s: float = 5.0
    poll_interval_s: float = 0.02

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"live.device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.start_method not in START_METHODS:
            raise ValueError(
                f"live.start_method must be one of {', '.join(START_METHODS)}, got {self.start_method!r}"
            )
        for name in ("num_threads", "encode_threads", "model_seed"):
            value, least = getattr(self, name), 0 if name == "model_seed" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"live.{name} must be an integer >= {least}, got {value!r}")
        for name in ("init_std", "mm_token_scale", "startup_timeout_s", "trial_timeout_s",
                     "shutdown_timeout_s", "poll_interval_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not (
                    math.isfinite(value) and value > 0):
                raise ValueError(f"live.{name} must be a number > 0, got {value!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> LiveOptions:
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            hint = " (the SM-share table is the plan's: [profile] sm_share_table)" if (
                "sm_share_table" in unknown) else ""
            raise ValueError(
                f"unknown live field(s): {', '.join(unknown)}{hint}; known: {', '.join(sorted(known))}"
            )
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
