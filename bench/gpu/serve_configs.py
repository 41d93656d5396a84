"""The configs the serving check writes for its steps, and the rate it serves at.

Each config is a committed one (``configs/small_qwen2audio_h200.toml`` on the
device, the tiny CPU one in the dry run) with a few tables changed: the live
side's partition backend (green contexts on the device, so local Prefill
shares SMs), the workload's rate, size and seed, and the profile. Written as
TOML next to the step's outputs, so every step is a plain ``easerve`` command
that a reader can rerun.

:func:`capacity_rate` picks the serving rate "near capacity" without spending
device time on a probe: the simulator, on the profile just calibrated (its
device sharing included), runs the deployment at an overload and reports the
throughput it sustains; the live trial runs at a fraction of that. The
simulator has run optimistic on this GPU (bench/gpu/RESULTS.md §6), hence a
fraction, and the summary records both numbers.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.gpu.serve_plan import ServePlan

#: top-level tables a change replaces whole rather than merges into
REPLACED = ("profile",)


def merged(base: Mapping[str, Any], changes: Mapping[str, Any], *,
           replaced: tuple[str, ...] = ()) -> dict[str, Any]:
    """``base`` with ``changes`` laid over it table by table (a None value drops the key).

    A table named in ``replaced`` is replaced whole: a new ``[profile] path``
    must not keep the base's ``[profile] sm_share_table``.
    """
    out = dict(base)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        elif key not in replaced and isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def write_config(base: str | Path, dest: Path, changes: Mapping[str, Any], *, note: str) -> Path:
    """Write ``base`` (a TOML config) with ``changes`` to ``dest``; ``note`` heads the file."""
    from easerve.cli.search_cmd import dump_toml  # the one TOML writer (best.toml's)

    with open(base, "rb") as fh:
        data = tomllib.load(fh)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(f"# {note}\n# written by bench/gpu/serve_check.py from {base}\n"
                    + dump_toml(merged(data, changes, replaced=REPLACED)))
    return dest


def live_changes(plan: ServePlan, profile: Path | None) -> dict[str, Any]:
    """What every step's config changes: the backend, and the profile (its SM-share table too)."""
    changes: dict[str, Any] = {"live": {"partition_backend": plan.partition_backend, "device": plan.device},
                               "model": {"size": plan.size}}
    # the [profile] table names the calibrated profile, or goes: a config table would win over the
    # measured SM-share table (easerve_core.plan: the plan's table sources)
    changes["profile"] = {"path": str(profile.resolve())} if profile is not None else None
    return changes


def capacity_rate(plan: ServePlan, config: Path, profile: Path) -> dict[str, float]:
    """The simulated capacity of the serving deployment and the live rate picked from it.

    The first serving mode's deployment (``dynamic``) stands for all three:
    the modes share everything but the split.
    """
    from calibration.loop.runner import requests_for, run_sim, setup
    from easerve.cli.validate_cmd import parse_spec
    from easerve.resources import load_config
    from runtime.profiles import load_profile_doc

    cfg = load_config(config)
    doc = load_profile_doc(profile)
    session = setup(cfg, doc)
    dep = parse_spec(cfg.deployment, plan.serve_spec(plan.serve_modes[0]))
    probe = session.recompose(rate_hz=plan.capacity_probe_rate_hz).replan(deployment=dep)
    result = run_sim(probe, requests_for(probe))
    records = result.records[result.records["status"] == "ok"]
    span = float(records["finish_s"].max() - records["arrival_s"].min()) if len(records) else 0.0
    capacity = len(records) / span if span > 0 else float("nan")
    lo, hi = plan.serve_rate_bounds_hz
    rate = min(hi, max(lo, plan.capacity_frac * capacity)) if capacity == capacity else lo
    rlo, rhi = plan.serve_requests_bounds
    requests = int(min(rhi, max(rlo, round(rate * plan.serve_arrivals_s))))
    return {"sim_capacity_rps": capacity, "probe_rate_hz": plan.capacity_probe_rate_hz,
            "capacity_frac": plan.capacity_frac, "rate_hz": round(rate, 1), "num_requests": requests}
