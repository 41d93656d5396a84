"""The HAS search space: GPU allocations, encode batch B, remote fraction s (and a timeout).

An :class:`Allocation` splits the cluster's GPUs into Encode, Prefill and
Decode workers. :func:`enumerate_allocations` lists every allocation that
uses the cluster's GPUs and fits in memory (docs/has.md §1):

* encode workers have TP in ``encode_tps`` (1 or 2), at least one of them;
* prefill and decode workers have a power-of-two TP in ``lm_tps`` at which
  the LM fits and a typical request's KV fits; at least one decode worker;
* local prefill on an encode worker needs the LM and a typical request's KV
  beside the encoder (``kv_capacity_tokens(tp, with_encoder=True)``); where
  it does not fit, s is forced to 1;
* zero prefill workers means every request prefills locally (s = 0), so it
  is offered only where local prefill fits.

A profile without a memory model (a plain :class:`StageProfile`, e.g. one
fitted from live runs at one device per worker) admits every allocation of
TP 1 workers: it has no TP model, so a larger TP would look as fast as one
device, and the live executor runs one device per worker. On a CPU host the
cluster's "GPUs" are the worker slots the live executor places.
:class:`SearchSpace` turns an allocation, B and s into a
:class:`~easerve_core.deployment.Deployment`, clamping s to what the
allocation allows, and lists the exhaustive grid baseline's points. A
restricted space tunes a baseline (docs/has.md §8): ``max_encode_batch=1``
fixes B, ``remote_fraction`` fixes s, and ``timeout_range_s`` adds the
fixed batcher's timeout as a dimension. :func:`aggregated_tps` lists the
instance TPs an aggregated (vLLM-like) engine fits at.

The module stays a little past 300 lines because the memory-fit rules of
:func:`enumerate_allocations` and the clamping of s in :class:`SearchSpace` read the
same per-TP facts (:class:`MemoryNeed`, :func:`local_prefill_fits`); apart, each would
restate them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from easerve_core import checks
from easerve_core.cluster import Cluster
from easerve_core.deployment import Deployment, SMSharing, StageGroup
from easerve_core.placement import Placement, place
from easerve_core.profile import ParallelProfile, StageProfile
from easerve_core.settings import Settings, rule

ENCODE_TPS = (1, 2)
LM_TPS = (1, 2, 4, 8)
GRID_BATCHES = (1, 2, 4, 8, 16, 32)
GRID_REMOTE_FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)
#: placement strategies HAS tries on a multi-node cluster (:data:`easerve_core.placement.PLACEMENTS`)
PLACEMENT_STRATEGIES = ("packed", "spread")


@dataclass(frozen=True, slots=True, kw_only=True)
class Allocation:
    """Workers per stage, and whether local prefill fits on an encode worker."""

    encode: StageGroup
    prefill: StageGroup
    decode: StageGroup
    local_prefill_fits: bool = True
    placement: Placement | None = None

    def __post_init__(self) -> None:
        if self.encode.num_workers < 1:
            raise ValueError("encode.num_workers must be >= 1")
        if self.decode.num_workers < 1:
            raise ValueError("decode.num_workers must be >= 1")
        if self.prefill.num_workers == 0 and not self.local_prefill_fits:
            raise ValueError("prefill.num_workers is 0 but local prefill does not fit")

    @property
    def num_gpus(self) -> int:
        return self.encode.num_gpus + self.prefill.num_gpus + self.decode.num_gpus

    @property
    def label(self) -> str:
        """``E2x1 P1x2 D2x2``: workers x TP per stage (`` @spread`` etc. when placed on nodes)."""
        e, p, d = self.encode, self.prefill, self.decode
        where = "" if self.placement is None else f" @{self.placement.name}"
        return f"E{e.num_workers}x{e.tp} P{p.num_workers}x{p.tp} D{d.num_workers}x{d.tp}{where}"

    @property
    def stages(self) -> dict[str, StageGroup]:
        return {"encode": self.encode, "prefill": self.prefill, "decode": self.decode}

    @property
    def s_bounds(self) -> tuple[float, float]:
        """The remote fractions this allocation allows, as [low, high]."""
        if self.prefill.num_workers == 0:
            return (0.0, 0.0)
        if not self.local_prefill_fits:
            return (1.0, 1.0)
        return (0.0, 1.0)

    def clamp_s(self, s: float) -> float:
        lo, hi = self.s_bounds
        return min(max(checks.fraction("remote_fraction", s), lo), hi)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryNeed(Settings):
    """Tokens one typical request holds: in the prefill stage and through decode."""

    prefill_tokens: int = field(metadata=rule(checks.integer, minimum=1))
    decode_tokens: int = field(metadata=rule(checks.integer, minimum=1))


def aggregated_tps(
    profile: StageProfile | ParallelProfile, cluster: Cluster, *, need: MemoryNeed | None = None,
    lm_tps: Sequence[int] = LM_TPS,
) -> list[int]:
    """Instance TPs in ``lm_tps`` at which an aggregated engine fits on ``cluster``.

    One instance holds the encoder, the LM and a typical request's KV
    (``kv_capacity_tokens(tp, with_encoder=True)``, the simulator's own
    memory check), inside one node. A profile without a memory model admits
    TP 1 only (it has no TP model; see the module docstring).
    """
    if not isinstance(profile, ParallelProfile):
        return [1]
    tokens = need.decode_tokens if need else 1
    return [tp for tp in lm_tps if tp <= cluster.gpus_per_node and profile.lm_fits(tp)
            and profile.kv_capacity_tokens(tp, with_encoder=True) >= tokens]


def _lm_tps_that_fit(
    profile: StageProfile | ParallelProfile, tps: Sequence[int], need: MemoryNeed | None
) -> list[int]:
    if not isinstance(profile, ParallelProfile):
        return list(tps)
    tokens = need.decode_tokens if need else 1
    return [tp for tp in tps if profile.lm_fits(tp) and profile.kv_capacity_tokens(tp) >= tokens]


def local_prefill_fits(
    profile: StageProfile | ParallelProfile, encode_tp: int, need: MemoryNeed | None = None
) -> bool:
    """Whether the LM and one typical prompt's KV fit beside the encoder."""
    if not isinstance(profile, ParallelProfile):
        return True
    if not profile.lm_fits(encode_tp):
        return False
    tokens = need.prefill_tokens if need else 1
    return profile.kv_capacity_tokens(encode_tp, with_encoder=True) >= tokens


def enumerate_allocations(
    profile: StageProfile | ParallelProfile,
    cluster: Cluster,
    *,
    need: MemoryNeed | None = None,
    encode_tps: Sequence[int] = ENCODE_TPS,
    lm_tps: Sequence[int] = LM_TPS,
    allow_idle_gpus: bool = False,
    placements: Sequence[str] = PLACEMENT_STRATEGIES,
) -> list[Allocation]:
    """Every allocation of ``cluster``'s GPUs that fits (see the module docstring).

    With ``allow_idle_gpus`` false (the default) allocations use every GPU:
    an idle GPU never raises goodput. Raises ``ValueError`` when the LM fits
    at no TP in ``lm_tps``. On several nodes each allocation comes once per
    strategy in ``placements`` that can place it (TP groups within a node),
    strategies that put every worker on the same nodes listed once.
    """
    n = cluster.num_gpus
    if not isinstance(profile, ParallelProfile):  # no TP model: every TP would cost the same as one
        encode_tps, lm_tps = (1,), (1,)
    fitting = [tp for tp in _lm_tps_that_fit(profile, lm_tps, need) if tp <= n]
    if not fitting:
        raise ValueError(
            f"the LM (with one typical request's KV) fits at no TP in {tuple(lm_tps)} "
            f"on {n} x {cluster.gpu}"
        )
    out: list[Allocation] = []
    for e_tp in encode_tps:
        local = local_prefill_fits(profile, e_tp, need)
        for p_tp, d_tp in itertools.product(fitting, fitting):
            for n_e in range(1, n // e_tp + 1):
                for n_p in range(0, (n - n_e * e_tp) // p_tp + 1):
                    if n_p == 0 and (not local or p_tp != fitting[0]):
                        continue  # all-local needs local prefill; list it once
                    left = n - n_e * e_tp - n_p * p_tp
                    for n_d in range(1, left // d_tp + 1):
                        if not allow_idle_gpus and n_e * e_tp + n_p * p_tp + n_d * d_tp != n:
                            continue
                        out.append(Allocation(
                            encode=StageGroup(num_workers=n_e, tp=e_tp),
                            prefill=StageGroup(num_workers=n_p, tp=p_tp),
                            decode=StageGroup(num_workers=n_d, tp=d_tp),
                            local_prefill_fits=local,
                        ))
    return out if cluster.num_nodes == 1 else placed(out, cluster, placements)


def placed(allocations: Sequence[Allocation], cluster: Cluster,
           strategies: Sequence[str]) -> list[Allocation]:
    """Each allocation under each strategy that can place it on ``cluster``'s nodes (distinct layouts)."""
    out: list[Allocation] = []
    for alloc in allocations:
        seen = set()
        for name in strategies:
            plc = Placement(strategy=name)
            try:
                lay = place(alloc.stages, plc, cluster)
            except ValueError:
                continue  # a TP group larger than a node, or a strategy that cannot pack it
            key = (lay.nodes("encode"), lay.nodes("prefill"), lay.nodes("decode"))
            if key not in seen:
                seen.add(key)
                out.append(Allocation(encode=alloc.encode, prefill=alloc.prefill, decode=alloc.decode,
                                      local_prefill_fits=alloc.local_prefill_fits, placement=plc))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """Survivor allocations, the B range and the runtime knobs of the base deployment.

    Args:
        allocations: the allocations to search (the screen's survivors).
        base: the deployment whose other fields (batching, router, SM sharing,
            ...) every candidate keeps.
        max_encode_batch: the largest B (B ranges over 1..max_encode_batch).
        grid_batches: B values of the exhaustive grid baseline.
        grid_remote_fractions: s values of the exhaustive grid baseline.
        remote_fraction: when given, s is fixed: every candidate takes it
            (clamped to what its allocation allows) and the search does not
            suggest s (the request-at-a-time and fixed-batch baselines: 1).
        timeout_range_s: when given, ``(low, high)`` seconds: the search also
            suggests the fixed batcher's ``batch_timeout_s``, log-uniform in
            it; else every candidate keeps the base's.
    """

    allocations: tuple[Allocation, ...]
    base: Deployment = field(default_factory=Deployment)
    max_encode_batch: int = 32
    grid_batches: tuple[int, ...] = GRID_BATCHES
    grid_remote_fractions: tuple[float, ...] = GRID_REMOTE_FRACTIONS
    remote_fraction: float | None = None
    timeout_range_s: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not self.allocations:
            raise ValueError("allocations must not be empty")
        labels = [a.label for a in self.allocations]
        if len(set(labels)) != len(labels):
            raise ValueError("allocations must be distinct")
        checks.integer("max_encode_batch", self.max_encode_batch, minimum=1)
        for b in self.grid_batches:
            checks.integer("grid_batches", b, minimum=1)
            if b > self.max_encode_batch:
                raise ValueError(f"grid_batches must be <= max_encode_batch, got {b!r}")
        for s in self.grid_remote_fractions:
            checks.fraction("grid_remote_fractions", s)
        if self.remote_fraction is not None:
            checks.fraction("remote_fraction", self.remote_fraction)
        if self.timeout_range_s is not None:
            low, high = (checks.positive("timeout_range_s", t) for t in self.timeout_range_s)
            if low > high:
                raise ValueError(f"timeout_range_s must be (low, high) with low <= high, "
                                 f"got {self.timeout_range_s!r}")

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(a.label for a in self.allocations)

    def allocation(self, label: str) -> Allocation:
        for a in self.allocations:
            if a.label == label:
                return a
        checks.one_of("allocation", label, self.labels)
        raise AssertionError("unreachable")

    def deployment(self, label: str, batch: int, s: float, *,
                   timeout_s: float | None = None) -> Deployment:
        """The deployment for allocation ``label``, B = ``batch`` and s clamped to what fits
        (``timeout_s``: the fixed batcher's timeout; default the base's)."""
        alloc = self.allocation(label)
        checks.integer("max_encode_batch", batch, minimum=1)
        if batch > self.max_encode_batch:
            raise ValueError(f"max_encode_batch must be <= {self.max_encode_batch}, got {batch!r}")
        s_eff = alloc.clamp_s(s)
        sharing = self.base.sm_sharing
        if s_eff < 1.0 and sharing is SMSharing.NONE:
            sharing = SMSharing.DYNAMIC
        return self.base.with_(
            encode=alloc.encode, prefill=alloc.prefill, decode=alloc.decode,
            max_encode_batch=int(batch), remote_fraction=s_eff, sm_sharing=sharing,
            placement=alloc.placement if alloc.placement is not None else self.base.placement,
            batch_timeout_s=self.base.batch_timeout_s if timeout_s is None else float(timeout_s),
        )

    def grid(self) -> list[tuple[str, int, float]]:
        """Distinct (allocation, B, s) points of the exhaustive grid, in a fixed order."""
        points: list[tuple[str, int, float]] = []
        for alloc in self.allocations:
            grid_s = (self.grid_remote_fractions if self.remote_fraction is None
                      else (self.remote_fraction,))
            fractions = sorted({alloc.clamp_s(s) for s in grid_s})
            for b in self.grid_batches:
                points.extend((alloc.label, b, s) for s in fractions)
        return points


def deployment_key(deployment: Deployment) -> str:
    """A string that is equal for equal deployments (the evaluation cache key)."""
    return repr(sorted(deployment.to_dict().items()))
