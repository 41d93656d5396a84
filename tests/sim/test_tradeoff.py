"""The paper's fixed-batch trade-off on LLaVA-v1.6-34B, with the analytic profile.

Paper (8x RTX 6000 Ada): request-at-a-time EPD -> fixed encode batch of 8 moves
throughput 0.75 -> 1.09 req/s, mean TTFT 367.4 -> 112.1 s, mean TPOT 179 -> 411 ms.

The roofline alone puts one LLaVA image through the encoder in about 11 ms, so
Encode is never the bottleneck and batching changes nothing (checked below). The
paper's request-at-a-time encoder carried only 0.75 req/s: most of its time is a
per-call cost that batching amortises (eager preprocessing, launches). The test
adds that as one named per-call overhead, sized so that request-at-a-time Encode
on the two TP-1 encode workers carries the paper's 0.75 req/s, and checks the
directions: throughput up, mean TTFT down, mean TPOT up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from easerve_core import Deployment, StageGroup
from easerve_core.plan import assemble
from easerve_core.presets import apply_preset
from easerve_core.workload import WorkloadSpec, generate
from sim import simulate

calibration = pytest.importorskip("calibration")

MODEL, GPU = "llava-v1.6-34b", "rtx6000ada"
NUM_ENCODE_WORKERS = 2
PAPER_DYNAMO_RPS = 0.75
#: per-call encoder cost: two workers at one request per call carry the paper's 0.75 req/s
ENCODE_CALL_OVERHEAD_S = NUM_ENCODE_WORKERS / PAPER_DYNAMO_RPS
RATE_HZ = 2.0
NUM_REQUESTS = 1000
FIXED_TIMEOUT_S = 0.05


@dataclass(frozen=True, slots=True)
class _CallOverhead:
    """A stage profile whose encoder pays ``overhead_s`` once per batch."""

    inner: Any
    overhead_s: float

    def encode_s(self, mm_tokens_per_item: Sequence[int], sm_share: float = 1.0) -> float:
        return self.overhead_s + self.inner.encode_s(mm_tokens_per_item, sm_share)

    def prefill_s(self, seq_lens: Sequence[int], sm_share: float = 1.0) -> float:
        return self.inner.prefill_s(seq_lens, sm_share)

    def decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        return self.inner.decode_step_s(batch_size, context_tokens)

    def embed_bytes(self, mm_tokens: int) -> int:
        return self.inner.embed_bytes(mm_tokens)

    def kv_bytes(self, num_tokens: int) -> int:
        return self.inner.kv_bytes(num_tokens)


@dataclass(frozen=True, slots=True)
class _WithOverhead:
    inner: Any
    overhead_s: float

    def for_tp(self, tp: int) -> _CallOverhead:
        return _CallOverhead(self.inner.for_tp(tp), self.overhead_s)

    def lm_fits(self, tp: int) -> bool:
        return bool(self.inner.lm_fits(tp))

    def kv_capacity_tokens(self, tp: int, *, with_encoder: bool = False) -> int:
        return int(self.inner.kv_capacity_tokens(tp, with_encoder=with_encoder))


def _run(profile: Any) -> dict[str, tuple[float, float, float]]:
    cluster = calibration.cluster_for(GPU, 8)
    dep = Deployment(encode=StageGroup(num_workers=NUM_ENCODE_WORKERS, tp=1),
                     prefill=StageGroup(num_workers=1, tp=2), decode=StageGroup(num_workers=2, tp=2),
                     batch_timeout_s=FIXED_TIMEOUT_S)
    spec = WorkloadSpec.from_dict({"mix": "llava-image", "rate_hz": RATE_HZ,
                                   "num_requests": NUM_REQUESTS})
    requests = generate(spec, np.random.default_rng(0))
    out = {}
    for preset in ("dynamo", "fixed-batch"):
        s = simulate(assemble(apply_preset(preset, dep, cluster), requests, cluster=cluster, profile=profile),
                     profile).summary()
        out[preset] = (s.throughput_rps, s.ttft_mean_s, s.tpot_mean_s)
    return out


def _report(label: str, out: dict[str, tuple[float, float, float]]) -> None:
    (t1, f1, p1), (t8, f8, p8) = out["dynamo"], out["fixed-batch"]
    print(f"\n{label}: throughput {t1:.2f} -> {t8:.2f} req/s (paper 0.75 -> 1.09), "
          f"mean TTFT {f1:.1f} -> {f8:.1f} s (paper 367.4 -> 112.1), "
          f"mean TPOT {p1 * 1e3:.0f} -> {p8 * 1e3:.0f} ms (paper 179 -> 411)")


def test_fixed_batch_tradeoff_on_llava() -> None:
    analytic = calibration.analytic_profile(MODEL, GPU)
    pure = _run(analytic)
    _report("analytic roofline alone", pure)
    out = _run(_WithOverhead(analytic, ENCODE_CALL_OVERHEAD_S))
    _report(f"with a {ENCODE_CALL_OVERHEAD_S:.2f} s per-call encoder overhead", out)
    (t1, f1, p1), (t8, f8, p8) = out["dynamo"], out["fixed-batch"]
    assert t1 == pytest.approx(PAPER_DYNAMO_RPS, rel=0.05)
    assert t8 > t1
    assert f8 < f1
    assert p8 > p1
