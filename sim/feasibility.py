"""Questions the simulator asks a profile before a run: memory.

* :func:`check_memory` refuses a deployment whose weights do not fit its
  workers (``ValueError`` naming the stage's ``tp``), when the profile has a
  memory model (:class:`~easerve_core.ParallelProfile`).
* :func:`kv_capacities` gives the KV tokens each kind of worker holds
  (None: unbounded, for profiles without memory).
"""

from __future__ import annotations

from dataclasses import dataclass

from easerve_core import Architecture, Deployment, ParallelProfile, StageProfile
from easerve_core.profile import kv_capacity_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class Capacities:
    """KV tokens one worker of each kind holds (None: unbounded)."""

    decode: int | None
    remote_prefill: int | None
    local_prefill: int | None


def _fits(profile: StageProfile | ParallelProfile, tp: int, field: str, *,
          with_encoder: bool = False) -> None:
    if not isinstance(profile, ParallelProfile):
        return
    if not profile.lm_fits(tp) or profile.kv_capacity_tokens(tp, with_encoder=with_encoder) <= 0:
        extra = " with the encoder" if with_encoder else ""
        raise ValueError(f"{field}: the model's weights{extra} do not fit on {tp} GPU(s) "
                         "with room for a KV cache")


def check_memory(deployment: Deployment, profile: StageProfile | ParallelProfile) -> None:
    """Raise ``ValueError`` naming the stage whose workers cannot hold the weights."""
    if deployment.architecture is Architecture.AGGREGATED:
        _fits(profile, deployment.decode.tp, "decode.tp", with_encoder=True)
        return
    _fits(profile, deployment.decode.tp, "decode.tp")
    if deployment.prefill.num_workers and deployment.remote_fraction > 0:
        _fits(profile, deployment.prefill.tp, "prefill.tp")
    if deployment.has_local_prefill:
        _fits(profile, deployment.encode.tp, "encode.tp", with_encoder=True)


def kv_capacities(deployment: Deployment, profile: StageProfile | ParallelProfile) -> Capacities:
    if deployment.architecture is Architecture.AGGREGATED:
        cap = kv_capacity_tokens(profile, deployment.decode.tp, with_encoder=True)
        return Capacities(decode=cap, remote_prefill=None, local_prefill=cap)
    return Capacities(
        decode=kv_capacity_tokens(profile, deployment.decode.tp),
        remote_prefill=kv_capacity_tokens(profile, deployment.prefill.tp),
        local_prefill=kv_capacity_tokens(profile, deployment.encode.tp, with_encoder=True),
    )
