"""The analytic (roofline) latency model: model spec x GPU spec -> stage latencies.

Each stage is a list of kernels (:mod:`calibration.work`). A kernel of F FLOPs
on a share s of the SMs takes ``F / (peak * efficiency * min(s, fill))``, where
``fill = min(1, F / (num_sms * fill_flops_per_sm))`` is the fraction of the GPU
the kernel has enough work to occupy. A small kernel (small encode batch) runs
one short wave whatever its share, so giving it fewer SMs costs nothing; a big
one slows as 1/s. The stage time is then the largest of the summed kernel
times, the bytes it must stream over ``mem_bw_efficiency_frac`` of the HBM
bandwidth, and a host floor of ``layer_launch_s`` per layer (eager PyTorch
cannot launch a layer faster); plus a fixed ``step_overhead_s`` and, under
tensor parallelism, two ring all-reduces per layer. Decode is the same
roofline at share 1 (it is never co-located, DESIGN.md §1) with its own
per-step overhead. The reasons behind every number: docs/profiles.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from calibration import memory, work
from calibration._fields import fraction, validate
from calibration.specs import GPUSpec, ModelSpec

#: decode steps remembered per TP profile before the memo starts over
_DECODE_MEMO_MAX = 1 << 17


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    """Achieved fractions of peak and fixed overheads (all named, all documented)."""

    gemm_efficiency_frac: float = 0.65
    attention_efficiency_frac: float = 0.50
    mem_bw_efficiency_frac: float = 0.80
    fill_flops_per_sm: float = 6.7e7
    layer_launch_s: float = 100e-6
    step_overhead_s: float = 1e-3
    decode_step_overhead_s: float = 2e-3
    host_preprocess_s_per_item: float = 0.0
    encode_call_overhead_s: float = 0.0

    def __post_init__(self) -> None:
        validate(self, positive=frozenset({"fill_flops_per_sm"}))
        for name in ("gemm_efficiency_frac", "attention_efficiency_frac", "mem_bw_efficiency_frac"):
            fraction("Efficiency", name, getattr(self, name))


def _validate_items(name: str, values: Sequence[int]) -> list[int]:
    out = list(values)
    if not out:
        raise ValueError(f"{name} must hold at least one entry")
    for i, v in enumerate(out):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}[{i}] must be an integer >= 1, got {v!r}")
    return out


class TPStageProfile:
    """The :class:`~easerve_core.profile.StageProfile` of one worker of ``tp`` GPUs."""

    def __init__(self, parent: AnalyticProfile, tp: int) -> None:
        self.parent = parent
        self.tp = tp
        # decode steps by (batch, context): a simulated decode worker asks for the same step
        # again and again (about 2 of 3 calls in bench/sim_speed.py); the profile is immutable
        self._decode_memo: dict[tuple[int, int], float] = {}

    def __repr__(self) -> str:
        return f"TPStageProfile({self.parent.model.name!r}, {self.parent.gpu.name!r}, tp={self.tp})"

    # -- the roofline --------------------------------------------------------------
    def _kernel_s(self, kernel: work.Kernel, share: float) -> float:
        gpu, eff = self.parent.gpu, self.parent.efficiency
        if kernel.flops <= 0:
            return 0.0
        fill = min(1.0, kernel.flops / (gpu.num_sms * eff.fill_flops_per_sm))
        frac = eff.attention_efficiency_frac if kernel.attention else eff.gemm_efficiency_frac
        return kernel.count * kernel.flops / (gpu.dense_bf16_flops * frac * min(share, fill))

    def _allreduce_s(self, nbytes: float) -> float:
        if self.tp == 1 or nbytes <= 0:
            return 0.0
        gpu = self.parent.gpu
        steps = 2 * (self.tp - 1)
        return steps * gpu.link_latency_s + steps / self.tp * nbytes / gpu.link_bytes_per_s

    def _stage_s(self, stage: work.StageWork, share: float, *, overhead_s: float,
                 launch: bool = True) -> float:
        eff, gpu = self.parent.efficiency, self.parent.gpu
        compute = sum(self._kernel_s(k, share) for k in stage.kernels)
        memory_s = stage.bytes_read / (gpu.mem_bandwidth_bytes_per_s * eff.mem_bw_efficiency_frac)
        host = stage.num_layers * eff.layer_launch_s if launch else 0.0
        comm = 2 * stage.num_layers * self._allreduce_s(stage.allreduce_bytes)
        return overhead_s + max(compute, memory_s, host) + comm

    def _share(self, sm_share: float) -> float:
        if isinstance(sm_share, bool) or not isinstance(sm_share, int | float):
            raise ValueError(f"sm_share must be a number, got {sm_share!r}")
        return self.parent.gpu.partition_share(float(sm_share))

    # -- StageProfile --------------------------------------------------------------
    def encode_s(self, mm_tokens_per_item: Sequence[int], sm_share: float = 1.0) -> float:
        items = _validate_items("mm_tokens_per_item", mm_tokens_per_item)
        share = self._share(sm_share)
        per_gpu = [items[i:: self.tp] for i in range(min(self.tp, len(items)))]
        model, eff = self.parent.model, self.parent.efficiency
        # Host preprocessing (resize, normalise, feature extraction) is serial per item and
        # does not depend on the SM share; the roofline leaves it at 0 until measured.
        # A per-call encoder cost (request handling, transfer set-up, an under-filled
        # forward) is paid once per micro-batch: the cost batching amortises. 0 in the
        # roofline; docs/profiles.md says how the report anchors it to the paper.
        overhead_s = eff.step_overhead_s + eff.encode_call_overhead_s
        return max(self._stage_s(work.encoder_work(model, chunk), share, overhead_s=overhead_s)
                   + eff.host_preprocess_s_per_item * len(chunk) for chunk in per_gpu)

    def prefill_s(self, seq_lens: Sequence[int], sm_share: float = 1.0) -> float:
        lens = _validate_items("seq_lens", seq_lens)
        stage = work.prefill_work(self.parent.model.lm, lens, tp=self.tp)
        return self._stage_s(stage, self._share(sm_share),
                             overhead_s=self.parent.efficiency.step_overhead_s)

    def decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if isinstance(context_tokens, bool) or not isinstance(context_tokens, int) or context_tokens < 0:
            raise ValueError(f"context_tokens must be an integer >= 0, got {context_tokens!r}")
        key = (batch_size, context_tokens)
        seconds = self._decode_memo.get(key)
        if seconds is None:
            if len(self._decode_memo) >= _DECODE_MEMO_MAX:
                self._decode_memo.clear()
            stage = work.decode_work(self.parent.model.lm, batch_size, context_tokens, tp=self.tp)
            seconds = self._decode_memo[key] = self._stage_s(
                stage, 1.0, launch=False, overhead_s=self.parent.efficiency.decode_step_overhead_s)
        return seconds

    def embed_bytes(self, mm_tokens: int) -> int:
        lm = self.parent.model.lm
        return int(mm_tokens) * lm.hidden_size * lm.dtype_bytes

    def kv_bytes(self, num_tokens: int) -> int:
        return self.parent.model.lm.kv_bytes(int(num_tokens))

    # -- extras --------------------------------------------------------------------
    def transfer_s(self, num_bytes: int) -> float:
        """One point-to-point transfer over the GPU's link (embeddings, KV cache)."""
        gpu = self.parent.gpu
        return gpu.link_latency_s + num_bytes / gpu.link_bytes_per_s

    def weight_bound_decode_s(self) -> float:
        """LM weights per GPU / peak bandwidth: the floor under a batch-1 decode step."""
        return memory.weight_bytes_per_gpu(self.parent.model, self.tp) / (
            self.parent.gpu.mem_bandwidth_bytes_per_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalyticProfile:
    """A :class:`~easerve_core.profile.ParallelProfile` from specs (any TP)."""

    model: ModelSpec
    gpu: GPUSpec
    efficiency: Efficiency = field(default_factory=Efficiency)
    budget: memory.MemoryBudget = field(default_factory=memory.MemoryBudget)

    def for_tp(self, tp: int) -> TPStageProfile:
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise ValueError(f"tp must be an integer >= 1, got {tp!r}")
        return TPStageProfile(self, tp)

    def lm_fits(self, tp: int) -> bool:
        return memory.lm_fits(self.model, self.gpu, self.budget, tp)

    def kv_capacity_tokens(self, tp: int, *, with_encoder: bool = False) -> int:
        return memory.kv_capacity_tokens(self.model, self.gpu, self.budget, tp,
                                         with_encoder=with_encoder)

    def to_params(self) -> dict[str, Any]:
        return {"model_spec": self.model.to_dict(), "gpu_spec": self.gpu.to_dict(),
                "efficiency": asdict(self.efficiency), "memory_budget": asdict(self.budget)}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> AnalyticProfile:
        for key in ("model_spec", "gpu_spec", "efficiency", "memory_budget"):
            if not isinstance(params.get(key), dict):
                raise ValueError(f"analytic profile params: missing object {key!r}")
        try:
            return cls(model=ModelSpec.from_dict(params["model_spec"]),
                       gpu=GPUSpec.from_dict(params["gpu_spec"]),
                       efficiency=Efficiency(**params["efficiency"]),
                       budget=memory.MemoryBudget(**params["memory_budget"]))
        except TypeError as exc:
            raise ValueError(f"analytic profile params are malformed: {exc}") from None

