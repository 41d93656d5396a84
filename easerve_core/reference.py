"""Reference (unloaded) latencies that SLO tiers scale.

A tier's limits must not depend on the deployment being judged, or a bad
deployment would earn a looser SLO. So the reference is fixed per model,
profile and request mix: one typical request (the mix's median sizes) alone
on the smallest LM worker that fits, its encoder alone at TP 1:

* unloaded TTFT = host preprocessing of its items (when the profile knows
  it) + encode (one request's items, batch of one, exclusive) + embedding
  transfer + prefill (its input tokens);
* unloaded TPOT = one decode step of a batch of one at the request's
  context (input tokens + half the output).
"""

from __future__ import annotations

from dataclasses import dataclass

from easerve_core.cluster import Cluster
from easerve_core.profile import ParallelProfile, StageProfile, host_preprocess_s, profile_for_tp
from easerve_core.slo import SLO, SLOSpec
from easerve_core.workload.mixes import RequestMix

_TP_LADDER = (1, 2, 4, 8)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReferenceLatency:
    ttft_s: float
    tpot_s: float
    lm_tp: int


def smallest_lm_tp(profile: StageProfile | ParallelProfile, max_tp: int = 8) -> int:
    """The smallest power-of-two TP at which the LM fits (1 without a memory model)."""
    if not isinstance(profile, ParallelProfile):
        return 1
    for tp in _TP_LADDER:
        if tp <= max_tp and profile.lm_fits(tp):
            return tp
    raise ValueError(f"the model's LM does not fit at any TP up to {max_tp}")


def _median(lo_hi: tuple[int, int]) -> int:
    return (lo_hi[0] + lo_hi[1]) // 2


def reference_latency(
    profile: StageProfile | ParallelProfile, mix: RequestMix, cluster: Cluster | None = None
) -> ReferenceLatency:
    """Unloaded TTFT and TPOT of one typical request (see the module docstring)."""
    tp = smallest_lm_tp(profile, cluster.num_gpus if cluster else 8)
    lm = profile_for_tp(profile, tp)
    enc = profile_for_tp(profile, 1)
    items: list[int] = []
    tower: list[int] = []  # the encoder's work: the items before any pooling
    if mix.item_tokens:
        count = max(1, _median(mix.items_per_request))
        pairs = sorted(zip(mix.item_tokens, mix.item_encode_tokens or mix.item_tokens, strict=True))
        median = pairs[len(pairs) // 2]
        items, tower = [median[0]] * count, [median[1]] * count
    prompt = _median(mix.prompt_tokens)
    output = max(2, _median(mix.output_tokens))
    seq = prompt + sum(items)
    ttft = lm.prefill_s([seq])
    if items:
        ttft += host_preprocess_s(enc, tower) + enc.encode_s(tower)
        if cluster is not None:
            ttft += cluster.link_latency_s + enc.embed_bytes(sum(items)) / cluster.link_bytes_per_s
    tpot = lm.decode_step_s(1, seq + output // 2)
    return ReferenceLatency(ttft_s=ttft, tpot_s=tpot, lm_tp=tp)


def slo_for(
    tier: str | SLOSpec,
    profile: StageProfile | ParallelProfile | None,
    mix: RequestMix,
    cluster: Cluster | None = None,
) -> SLO:
    """The absolute SLO of ``tier`` (a tier's name, or a ``[slo]`` spec) for this model, profile and mix.

    A spec with both absolute limits needs no profile (``profile`` may be None).
    """
    spec = SLOSpec(tier=tier) if isinstance(tier, str) else tier
    if spec.absolute:
        return spec.resolve()
    if profile is None:
        raise ValueError(f"slo tier {spec.tier!r} needs a latency profile (or set slo.ttft_s and slo.tpot_s)")
    ref = reference_latency(profile, mix, cluster)
    return spec.resolve(unloaded_ttft_s=ref.ttft_s, unloaded_tpot_s=ref.tpot_s)
