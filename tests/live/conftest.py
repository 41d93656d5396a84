"""Shared helpers for the live executor's tests: small configs and a no-orphans check."""

from __future__ import annotations

import os
from typing import Any

from calibration.session import Overrides, compose
from easerve_core.config import ExperimentConfig
from easerve_core.plan import RunPlan

FAMILY_MIX = {
    "llava-next": ("llava-image", 0.03),
    "qwen2.5-vl": ("qwen-image", 0.02),
    "qwen2-audio": ("ultravox-audio", 0.25),
}
#: the encode share per batch size of the tiny models (they have no profile to derive one from)
SHARE_TABLE = {"1": 0.25, "2": 0.5, "4": 0.75, "8": 1.0}


def live_config(model: str, *, num_requests: int = 8, rate_hz: float = 20.0,
                deployment: dict[str, Any] | None = None, live: dict[str, Any] | None = None,
                workload: dict[str, Any] | None = None) -> ExperimentConfig:
    """A tiny live experiment: one worker per stage unless ``deployment`` says otherwise."""
    mix, scale = FAMILY_MIX[model]
    dep = {"encode": {"num_workers": 1}, "prefill": {"num_workers": 1},
           "decode": {"num_workers": 1}, "max_encode_batch": 4, "remote_fraction": 0.5,
           "sm_sharing": "dynamic", "max_num_decode_seqs": 16}
    dep.update(deployment or {})
    wl = {"mix": mix, "arrival": "poisson", "rate_hz": rate_hz, "num_requests": num_requests,
          "prompt_tokens": [8, 24], "output_tokens": [3, 8]}
    wl.update(workload or {})
    opts = {"mm_token_scale": scale, "trial_timeout_s": 60.0, "shutdown_timeout_s": 2.0}
    opts.update(live or {})
    return ExperimentConfig.from_dict({
        "seed": 0, "model": {"name": model, "size": "tiny"}, "cluster": {"gpu": "cpu"},
        "deployment": dep, "workload": wl, "live": opts, "profile": {"sm_share_table": SHARE_TABLE},
    })


def live_plan(config: ExperimentConfig) -> RunPlan:
    """The plan a live run of ``config`` executes (what ``easerve live`` resolves)."""
    return compose(config, Overrides(need_profile=False)).plan


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it has exited all the same.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
