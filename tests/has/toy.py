"""A toy profile with a memory model and a cheap analytic evaluator for HAS tests.

The toy LM needs TP >= 2; local prefill fits beside the encoder only on a
TP-2 encode worker. :class:`AnalyticEvaluator` is a smooth function of
(allocation, B, s) whose optimum is known: allocation ``best_label``, B = 8,
s = 0.75 where s is free.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from easerve_core.deployment import Deployment
from easerve_core.has.ladder import Verdict


@dataclass(frozen=True)
class ToyStage:
    tp: int

    def encode_s(self, mm_tokens_per_item: Sequence[int], sm_share: float = 1.0) -> float:
        return (0.02 + 2e-5 * sum(mm_tokens_per_item)) / sm_share

    def prefill_s(self, seq_lens: Sequence[int], sm_share: float = 1.0) -> float:
        return (0.01 + 1e-4 * sum(seq_lens) / self.tp) / sm_share

    def decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        return 0.02 / self.tp + 2e-4 * batch_size

    def embed_bytes(self, mm_tokens: int) -> int:
        return mm_tokens * 1000

    def kv_bytes(self, num_tokens: int) -> int:
        return num_tokens * 1000


@dataclass(frozen=True)
class ToyProfile:
    lm_min_tp: int = 2
    local_min_tp: int = 2
    kv_tokens_per_gpu: int = 100_000

    def for_tp(self, tp: int) -> ToyStage:
        return ToyStage(tp)

    def lm_fits(self, tp: int) -> bool:
        return tp >= self.lm_min_tp

    def kv_capacity_tokens(self, tp: int, *, with_encoder: bool = False) -> int:
        if not self.lm_fits(tp) or (with_encoder and tp < self.local_min_tp):
            return 0
        return self.kv_tokens_per_gpu * tp


@dataclass(frozen=True)
class AnalyticEvaluator:
    """goodput = weight(alloc) * bell(log2 B - 3) * bell(s - 0.75)."""

    best_label: str
    fail_after: int | None = None
    calls: list[str] = field(default_factory=list, compare=False)

    def __call__(self, dep: Deployment) -> float:
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise RuntimeError("evaluator interrupted")
        self.calls.append(dep.label())
        e, p, d = dep.encode, dep.prefill, dep.decode
        label = f"E{e.num_workers}x{e.tp} P{p.num_workers}x{p.tp} D{d.num_workers}x{d.tp}"
        weight = 2.0 if label == self.best_label else 1.0 + 0.1 * d.num_workers
        b = math.exp(-((math.log2(dep.max_encode_batch) - 3.0) ** 2) / 4.0)
        s = 1.0 - 0.8 * (dep.remote_fraction - 0.75) ** 2
        return weight * b * s


def alloc_label(dep: Deployment) -> str:
    e, p, d = dep.encode, dep.prefill, dep.decode
    return f"E{e.num_workers}x{e.tp} P{p.num_workers}x{p.tp} D{d.num_workers}x{d.tp}"


@dataclass(frozen=True)
class LadderToy:
    """:class:`AnalyticEvaluator` on a ladder: a verdict per stream fraction, and long rechecks.

    ``unstable_label``'s (an allocation's) queue grows: it is unstable on every stream. The
    deployments labelled in ``fragile`` are stable on the trials' streams but unstable on
    the long rechecks (the failure HAS's recheck exists for). ``calls`` records (kind,
    label, fraction or index).
    """

    analytic: AnalyticEvaluator
    unstable_label: str | None = None
    fragile: frozenset[str] = frozenset()
    calls: list[tuple[str, str, float]] = field(default_factory=list, compare=False)

    def _verdict(self, dep: Deployment, *, unstable: bool, jitter: float) -> Verdict:
        goodput = self.analytic(dep) + jitter
        return Verdict(goodput_rps=goodput, attainment=0.6 if unstable else 1.0, unstable=unstable,
                       offered_rps=3.0, num_requests=100, reason="trend" if unstable else "")

    def verdict(self, deployment: Deployment, *, fraction: float = 1.0) -> Verdict:
        self.calls.append(("verdict", deployment.label(), fraction))
        return self._verdict(deployment, unstable=alloc_label(deployment) == self.unstable_label,
                             jitter=0.01 * fraction)

    distinct_long_streams: int | None = None

    def recheck(self, deployment: Deployment, *, factor: float, index: int) -> Verdict:
        self.calls.append(("recheck", deployment.label(), index))
        unstable = alloc_label(deployment) == self.unstable_label or deployment.label() in self.fragile
        return self._verdict(deployment, unstable=unstable, jitter=0.001 * index)
