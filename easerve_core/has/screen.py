"""HAS stage 1: screen allocations by per-stage capacity (requests/s).

Each stage's capacity comes from the profile at the workload's typical
request (the mix's mean sizes), at the most favourable knob settings, so the
screen only drops allocations that no choice of B or s can rescue:

* Encode: each worker at its best batch up to ``max_encode_batch``
  (local prefill is not charged here: it only runs in the encoder's slack).
* Prefill: the remote workers, plus, where local prefill fits, what the
  encode workers have left once they encode the target rate.
* Decode: each worker at the largest batch its KV memory holds (and, given
  an SLO, whose step still meets the TPOT limit), one request needing
  ``output_tokens`` steps.
* Network (several nodes only): the rate at which the busiest NIC carries
  the allocation's cross-node embeddings and KV caches, at the best s
  (:mod:`easerve_core.has.network`); inf on one node.

Per-worker numbers come from :mod:`easerve_core.capacity`; this module adds
the allocation-level view (worker counts, local prefill, the best batch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from easerve_core import capacity, checks
from easerve_core.capacity import RequestShape
from easerve_core.cluster import Cluster
from easerve_core.has.network import network_rps
from easerve_core.has.space import Allocation, MemoryNeed, enumerate_allocations
from easerve_core.profile import ParallelProfile, StageProfile, kv_capacity_tokens, profile_for_tp
from easerve_core.slo import SLO
from easerve_core.workload.mixes import RequestMix

_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def typical_shape(mix: RequestMix) -> RequestShape:
    """The mix's mean request: mean prompt, output, item count and (weighted) item size."""
    items: tuple[int, ...] = ()
    tower: tuple[int, ...] = ()
    if mix.item_tokens:
        probs = np.array(mix.item_weights or [1.0] * len(mix.item_tokens), dtype=float)
        count = max(1, round(sum(mix.items_per_request) / 2))
        items = (max(1, round(float(np.dot(probs / probs.sum(), mix.item_tokens)))),) * count
        if mix.item_encode_tokens:  # the mean encoder's work, before pooling
            tower = (max(1, round(float(np.dot(probs / probs.sum(), mix.item_encode_tokens)))),) * count
    return RequestShape(
        prompt_tokens=round(sum(mix.prompt_tokens) / 2),
        output_tokens=max(1, round(sum(mix.output_tokens) / 2)),
        mm_tokens_per_item=items,
        encode_tokens_per_item=tower,
    )


def memory_need(shape: RequestShape) -> MemoryNeed:
    """KV tokens one typical request holds in prefill and through decode."""
    return MemoryNeed(prefill_tokens=shape.seq_len, decode_tokens=shape.tokens_per_seq)


def best_encode_rps(stage: StageProfile, shape: RequestShape, max_batch: int) -> float:
    """Requests/s one encode worker carries at its best batch <= ``max_batch``."""
    return max(capacity.encode_rps(stage, shape, batch_size=b) for b in _BATCHES if b <= max_batch)


def best_decode_rps(stage: StageProfile, shape: RequestShape, *, max_seqs: int,
                    kv_tokens: int | None, tpot_limit_s: float | None) -> float:
    """Requests/s one decode worker carries at its best batch that fits (and meets the TPOT limit)."""
    cap = capacity.max_decode_batch(shape, kv_tokens, max_num_seqs=max_seqs)
    best = 0.0
    for b in sorted({*(b for b in _BATCHES if b <= cap), cap} - {0}):
        step = stage.decode_step_s(b, b * shape.mean_decode_context)
        if tpot_limit_s is not None and step > tpot_limit_s:
            break
        best = max(best, capacity.decode_rps(stage, shape, batch_size=b))
    return best


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocationCapacity:
    """Capacity of each stage of one allocation, requests/s."""

    encode_rps: float
    prefill_rps: float
    decode_rps: float
    network_rps: float = math.inf

    @property
    def bottleneck(self) -> str:
        caps = {"encode": self.encode_rps, "prefill": self.prefill_rps, "decode": self.decode_rps,
                "network": self.network_rps}
        return min(caps, key=lambda k: caps[k])

    @property
    def min_rps(self) -> float:
        return min(self.encode_rps, self.prefill_rps, self.decode_rps, self.network_rps)


def allocation_capacity(
    alloc: Allocation, profile: StageProfile | ParallelProfile, shape: RequestShape, *,
    rate_hz: float, max_encode_batch: int = 32, max_num_decode_seqs: int = 256,
    slo: SLO | None = None, cluster: Cluster | None = None,
) -> AllocationCapacity:
    """Per-stage capacity of ``alloc`` at target ``rate_hz`` (see the module docstring);
    the network's only given a ``cluster`` of several nodes."""
    e, p, d = alloc.encode, alloc.prefill, alloc.decode
    enc_stage = profile_for_tp(profile, e.tp)
    enc = capacity.pool_rps(best_encode_rps(enc_stage, shape, max_encode_batch), e.num_workers)
    pre = 0.0
    if p.num_workers:
        pre = capacity.pool_rps(capacity.prefill_rps(profile_for_tp(profile, p.tp), shape),
                                p.num_workers)
    if alloc.local_prefill_fits:
        busy = min(1.0, rate_hz / enc) if math.isfinite(enc) else 0.0
        pre += e.num_workers * (1.0 - busy) * capacity.prefill_rps(enc_stage, shape)
    dec = d.num_workers * best_decode_rps(
        profile_for_tp(profile, d.tp), shape, max_seqs=max_num_decode_seqs,
        kv_tokens=kv_capacity_tokens(profile, d.tp),
        tpot_limit_s=None if slo is None else slo.tpot_s,
    )
    net = math.inf
    if cluster is not None and cluster.num_nodes > 1:
        embed = enc_stage.embed_bytes(sum(shape.mm_tokens_per_item)) if shape.mm_tokens_per_item else 0
        kv = profile_for_tp(profile, d.tp).kv_bytes(shape.seq_len)
        net = network_rps(alloc.stages, alloc.placement, cluster, s_bounds=alloc.s_bounds,
                          embed_bytes=embed, kv_bytes=kv)
    return AllocationCapacity(encode_rps=enc, prefill_rps=pre, decode_rps=dec, network_rps=net)


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    allocation: Allocation
    capacity: AllocationCapacity


@dataclass(frozen=True, slots=True, kw_only=True)
class ScreenReport:
    """Every enumerated allocation with its capacity, and which survive."""

    rate_hz: float
    candidates: tuple[Candidate, ...]
    survivors: tuple[Candidate, ...]

    @property
    def survivor_allocations(self) -> tuple[Allocation, ...]:
        return tuple(c.allocation for c in self.survivors)


def screen(
    profile: StageProfile | ParallelProfile, cluster: Cluster, mix: RequestMix, *,
    rate_hz: float, slo: SLO | None = None, max_encode_batch: int = 32,
    max_num_decode_seqs: int = 256, headroom_frac: float = 0.0,
    allocations: Sequence[Allocation] | None = None,
) -> ScreenReport:
    """Enumerate (unless ``allocations`` is given) and drop allocations below ``rate_hz``.

    An allocation survives when its weakest stage carries
    ``rate_hz * (1 + headroom_frac)``. Raises ``ValueError`` when none does,
    naming the best allocation's bottleneck stage and its capacity.
    """
    rate_hz = checks.positive("rate_hz", rate_hz)
    checks.non_negative("headroom_frac", headroom_frac)
    shape = typical_shape(mix)
    if allocations is None:
        allocations = enumerate_allocations(profile, cluster, need=memory_need(shape))
    if not allocations:
        raise ValueError(f"no allocation of {cluster.num_gpus} x {cluster.gpu} fits in memory")
    cands = tuple(
        Candidate(allocation=a, capacity=allocation_capacity(
            a, profile, shape, rate_hz=rate_hz, max_encode_batch=max_encode_batch,
            max_num_decode_seqs=max_num_decode_seqs, slo=slo, cluster=cluster))
        for a in allocations
    )
    need = rate_hz * (1.0 + headroom_frac)
    survivors = tuple(c for c in cands if c.capacity.min_rps >= need)
    if not survivors:
        best = max(cands, key=lambda c: c.capacity.min_rps)
        cap = best.capacity
        raise ValueError(
            f"rate: no allocation carries {rate_hz:g} req/s; the best, {best.allocation.label}, "
            f"is limited by its {cap.bottleneck} stage at {cap.min_rps:.3g} req/s "
            f"(encode {cap.encode_rps:.3g}, prefill {cap.prefill_rps:.3g}, "
            f"decode {cap.decode_rps:.3g}{_network(cap)})"
        )
    return ScreenReport(rate_hz=rate_hz, candidates=cands, survivors=survivors)


def _network(cap: AllocationCapacity) -> str:
    return "" if math.isinf(cap.network_rps) else f", network {cap.network_rps:.3g}"
