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

The module stays past 300 lines because :class:`TPStageProfile` is one roofline
(kernels, bytes, the per-layer host floor, all-reduces) applied to every stage with its
per-stage memos, and :class:`AnalyticProfile` is its thin front indexed by TP; a split
would cut the roofline in two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from calibration import memory, ops, work
from calibration.efficiency import Efficiency, efficiency_dict
from calibration.op_prices import RooflineOps
from calibration.specs import GPUSpec, ModelSpec
from calibration.stage_memo import DecodeMemo, SpecMemory, check_tp, make_room, remembered, validate_items

__all__ = ["AnalyticProfile", "Efficiency", "TPStageProfile"]

class TPStageProfile(DecodeMemo):
    """The :class:`~easerve_core.profile.StageProfile` of one worker of ``tp`` GPUs."""

    def __init__(self, parent: AnalyticProfile, tp: int) -> None:
        self.parent = parent
        self.tp = tp
        gpu, eff = parent.gpu, parent.efficiency
        # products _flops_s and _combine_s would otherwise form on every call (same values)
        self._fill_flops = gpu.num_sms * eff.fill_flops_per_sm
        self._floor_s = eff.kernel_floor_s
        self._roofline = RooflineOps(gpu, eff)
        self._peak_flops = {True: gpu.dense_bf16_flops * eff.attention_efficiency_frac,
                            False: gpu.dense_bf16_flops * eff.gemm_efficiency_frac}
        self._mem_bytes_per_s = gpu.mem_bandwidth_bytes_per_s * eff.mem_bw_efficiency_frac
        self._shares: dict[float, float] = {}  # requested SM share -> the partition's share
        self._kv_bytes: dict[int, int] = {}  # tokens -> their KV cache bytes
        # Every stage latency by its validated arguments: a simulated worker asks for the same
        # ones again and again (in bench/sim_speed.py about 99% of encode calls, 85% of prefill
        # calls and 2 in 3 decode steps); the profile is immutable, so a memo returns exactly
        # what the roofline computes.
        self._encode_memo: dict[tuple[tuple[int, ...], float], float] = {}
        self._prefill_memo: dict[tuple[tuple[int, ...], float], float] = {}
        self._forget_decode_steps()  # batch size -> context -> seconds (DecodeMemo)
        # per batch size: weight bytes, the context-free kernels' times before and after
        # attention, and the all-reduce time of a decode step
        self._decode_fixed: dict[int, tuple[float, tuple[float, ...], tuple[float, ...], float]] = {}

    def __repr__(self) -> str:
        return f"TPStageProfile({self.parent.model.name!r}, {self.parent.gpu.name!r}, tp={self.tp})"

    # -- the roofline --------------------------------------------------------------
    def _flops_s(self, flops: float, count: int, attention: bool, share: float) -> float:
        """A kernel (``work.Kernel``: ``flops`` FLOPs, run ``count`` times) at ``share`` of the SMs."""
        if flops <= 0:
            return 0.0
        fill = min(1.0, flops / self._fill_flops)
        if self._floor_s:
            return count * max(self._floor_s, flops / (self._peak_flops[attention] * min(share, fill)))
        return count * flops / (self._peak_flops[attention] * min(share, fill))

    def _elementwise_s(self, stage_ops: Callable[[], list[ops.Op]], share: float) -> float:
        """The memory-bound passes of a stage, when ``Efficiency.price_elementwise_ops`` is on."""
        if not self.parent.efficiency.price_elementwise_ops:
            return 0.0
        return sum(op.count * self._roofline.elementwise_s(op.shape[0], share)
                   for op in stage_ops() if op.kind == "elementwise")

    def _allreduce_s(self, nbytes: float) -> float:
        if self.tp == 1 or nbytes <= 0:
            return 0.0
        gpu = self.parent.gpu
        steps = 2 * (self.tp - 1)
        return steps * gpu.link_latency_s + steps / self.tp * nbytes / gpu.link_bytes_per_s

    def _stage_s(self, stage: work.StageWork, share: float, *, overhead_s: float,
                 launch: bool = True, elementwise_s: float = 0.0) -> float:
        compute = sum(self._flops_s(*kernel, share) for kernel in stage.kernels)
        host = stage.num_layers * self.parent.efficiency.layer_launch_s if launch else 0.0
        return self._combine_s(compute, stage.bytes_read, host, self._comm_s(stage) + elementwise_s,
                               overhead_s=overhead_s)

    def _comm_s(self, stage: work.StageWork | work.DecodeShape) -> float:
        """The two ring all-reduces per layer under TP."""
        return 2 * stage.num_layers * self._allreduce_s(stage.allreduce_bytes)

    def _combine_s(self, compute: float, bytes_read: float, host: float, comm: float, *,
                   overhead_s: float) -> float:
        """A stage's time from its summed kernel time (the roofline's last step)."""
        return overhead_s + max(compute, bytes_read / self._mem_bytes_per_s, host) + comm

    def _share(self, sm_share: float) -> float:
        if type(sm_share) is float:  # the shares a simulation uses repeat: remember them
            share = self._shares.get(sm_share)
            if share is None:
                make_room(self._shares)
                share = self._shares[sm_share] = self.parent.gpu.partition_share(sm_share)
            return share
        if isinstance(sm_share, bool) or not isinstance(sm_share, int | float):
            raise ValueError(f"sm_share must be a number, got {sm_share!r}")
        return self.parent.gpu.partition_share(float(sm_share))

    # -- StageProfile --------------------------------------------------------------
    def encode_s(self, mm_tokens_per_item: Sequence[int], sm_share: float = 1.0) -> float:
        items = validate_items("mm_tokens_per_item", mm_tokens_per_item)
        share = self._share(sm_share)
        return remembered(self._encode_memo, (tuple(items), share), self._encode_s, items, share)

    def _encode_s(self, items: list[int], share: float) -> float:
        per_gpu = [items[i:: self.tp] for i in range(min(self.tp, len(items)))]
        model, eff = self.parent.model, self.parent.efficiency
        # The residual per-call cost (what the paper's request-at-a-time rate implies beyond
        # the kernels and the measured host work) is paid once per micro-batch, on the SMs:
        # the cost batching amortises. 0 in the roofline; docs/profiles.md says how the report
        # anchors it. Host preprocessing is not here: it is host_preprocess_s, its own stage.
        overhead_s = eff.step_overhead_s + eff.encode_call_residual_s
        return max(self._stage_s(work.encoder_work(
            model, chunk, attention_half_len=eff.attention_half_len_tokens), share, overhead_s=overhead_s,
                                 elementwise_s=self._elementwise_s(
                                     lambda c=chunk: ops.encoder_ops(model, c), share))
                   for chunk in per_gpu)

    def host_preprocess_s(self, mm_tokens_per_item: Sequence[int]) -> float:
        """Host CPU seconds to preprocess one request's items (decode + processor), serially.

        Independent of the SM share and of the worker's TP: one host thread runs it
        (:mod:`sim.preprocess` queues requests for the worker's threads).
        """
        eff = self.parent.efficiency
        per_item, per_token = eff.host_preprocess_s_per_item, eff.host_preprocess_s_per_mm_token
        if not per_item and not per_token:
            return 0.0
        return sum(per_item + per_token * t for t in mm_tokens_per_item)

    def prefill_s(self, seq_lens: Sequence[int], sm_share: float = 1.0) -> float:
        lens = validate_items("seq_lens", seq_lens)
        share = self._share(sm_share)
        return remembered(self._prefill_memo, (tuple(lens), share), self._prefill_s, lens, share)

    def _prefill_s(self, lens: list[int], share: float) -> float:
        lm = self.parent.model.lm
        stage = work.prefill_work(lm, lens, tp=self.tp,
                                   attention_half_len=self.parent.efficiency.attention_half_len_tokens)
        extra = self._elementwise_s(lambda: ops.prefill_ops(lm, lens, tp=self.tp), share)
        return self._stage_s(stage, share, overhead_s=self.parent.efficiency.step_overhead_s,
                             elementwise_s=extra)

    def _decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        """The roofline of ``work.decode_work``, its context-free kernels timed once per batch size.

        Same operations in the same order as ``_stage_s(decode_work(...))``: the same kernel
        times summed by ``sum`` in kernel order, so the result is the same float.
        """
        lm, tp = self.parent.model.lm, self.tp
        fixed = self._decode_fixed.get(batch_size)
        if fixed is None:
            shape = work.decode_shape(lm, batch_size, tp=tp)
            fixed = self._decode_fixed[batch_size] = (
                shape.weight_bytes, tuple(self._flops_s(*k, 1.0) for k in shape.before),
                tuple(self._flops_s(*k, 1.0) for k in shape.after),
                self._comm_s(shape) + self._elementwise_s(
                    lambda: ops.decode_ops(lm, batch_size, batch_size, tp=tp), 1.0))
        weight_bytes, before_s, after_s, comm = fixed
        attention_flops, kv_read = work.decode_attention(lm, batch_size, context_tokens, tp=tp)
        compute = sum((*before_s, self._flops_s(attention_flops, 1, True, 1.0), *after_s))
        return self._combine_s(compute, (weight_bytes + kv_read) / tp, 0.0, comm,
                               overhead_s=self.parent.efficiency.decode_step_overhead_s)

    def mixed_step_s(self, chunk_lens: Sequence[int], batch_size: int, context_tokens: int) -> float:
        """One forward pass of prefill chunks beside ``batch_size`` decodes (chunked prefill, sim.chunked).

        The roofline of the whole step: the chunks' and the decodes' kernels summed, the
        weights read once beside the decodes' KV, and one all-reduce per layer of both
        token counts. Each chunk is priced as a sequence of its own length.
        """
        if not batch_size:
            return self.prefill_s(chunk_lens)
        if not chunk_lens:
            return self.decode_step_s(batch_size, context_tokens)
        lens = validate_items("chunk_lens", chunk_lens)
        lm, tp = self.parent.model.lm, self.tp
        stage = work.prefill_work(lm, lens, tp=tp,
                                  attention_half_len=self.parent.efficiency.attention_half_len_tokens)
        shape = work.decode_shape(lm, batch_size, tp=tp)
        attention_flops, kv_read = work.decode_attention(lm, batch_size, context_tokens, tp=tp)
        compute = (sum(self._flops_s(*kernel, 1.0) for kernel in stage.kernels)
                   + sum(self._flops_s(*k, 1.0) for k in (*shape.before, *shape.after))
                   + self._flops_s(attention_flops, 1, True, 1.0))
        host = stage.num_layers * self.parent.efficiency.layer_launch_s
        comm = 2 * stage.num_layers * self._allreduce_s(stage.allreduce_bytes + shape.allreduce_bytes)
        return self._combine_s(compute, stage.bytes_read + kv_read / tp, host, comm,
                               overhead_s=self.parent.efficiency.step_overhead_s)

    def embed_bytes(self, mm_tokens: int) -> int:
        lm = self.parent.model.lm
        return int(mm_tokens) * lm.hidden_size * lm.dtype_bytes

    def kv_bytes(self, num_tokens: int) -> int:
        tokens = int(num_tokens)
        nbytes = self._kv_bytes.get(tokens)
        if nbytes is None:  # asked once per request handed to Decode, for few distinct sizes
            make_room(self._kv_bytes)
            nbytes = self._kv_bytes[tokens] = self.parent.model.lm.kv_bytes(tokens)
        return nbytes

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
class AnalyticProfile(SpecMemory):
    """A :class:`~easerve_core.profile.ParallelProfile` from specs (any TP)."""

    model: ModelSpec
    gpu: GPUSpec
    efficiency: Efficiency = field(default_factory=Efficiency)
    budget: memory.MemoryBudget = field(default_factory=memory.MemoryBudget)

    def for_tp(self, tp: int) -> TPStageProfile:
        return TPStageProfile(self, check_tp(tp))

    def to_params(self) -> dict[str, Any]:
        return {"model_spec": self.model.to_dict(), "gpu_spec": self.gpu.to_dict(),
                "efficiency": efficiency_dict(self.efficiency), "memory_budget": asdict(self.budget)}

    def ops(self) -> RooflineOps:
        """The price of one op on this GPU (:mod:`calibration.op_prices`)."""
        return RooflineOps(self.gpu, self.efficiency)

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

