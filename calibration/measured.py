"""The ``measured`` profile kind: stage latencies summed from measured operators.

A :class:`MeasuredProfile` prices every stage as the sum of its operators
(:mod:`calibration.ops`), each from a measured table (:mod:`calibration.optables`,
read by an adapter such as :mod:`calibration.aiconfigurator`) or, where the
table has no answer, from the roofline (:class:`~calibration.op_prices.RooflineOps`),
plus the fixed per-step overheads of :class:`~calibration.efficiency.Efficiency`.
Memory (what fits, how many KV tokens) is the analytic model's. The profile
embeds only its model's shapes, so loading it needs no database; which op came
from where is :meth:`MeasuredProfile.op_sources`. Background: docs/profiles.md,
"Measured profiles".

Unlike the roofline, a stage is not the largest of compute, bytes and a host
floor: each measured kernel already holds its own memory traffic and launch,
and an engine with CUDA graphs has no per-layer host floor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from calibration import memory
from calibration.efficiency import Efficiency, efficiency_dict
from calibration.op_prices import MeasuredOps, RooflineOps
from calibration.ops import Op, decode_attention_ops, decode_ops, encoder_ops, prefill_ops
from calibration.optables import OpTables
from calibration.specs import GPUSpec, ModelSpec
from calibration.stage_memo import DecodeMemo, SpecMemory, check_tp, remembered, validate_items

#: TP sizes whose LM shapes a built profile keeps
PROFILE_TPS = (1, 2, 4, 8)


class MeasuredStageProfile(DecodeMemo):
    """The :class:`~easerve_core.profile.StageProfile` of one worker of ``tp`` GPUs."""

    def __init__(self, parent: MeasuredProfile, tp: int) -> None:
        self.parent, self.tp = parent, tp
        self._ops = parent.ops()
        self._prices: dict[tuple[str, tuple[int, ...], float], float] = {}
        self._encode_memo: dict[tuple[tuple[int, ...], float], float] = {}
        self._prefill_memo: dict[tuple[tuple[int, ...], float], float] = {}
        # a decode step is its batch size's context-free ops (remembered per batch size) plus
        # attention, whose shape only knows the mean context per sequence (remembered per shape)
        self._decode_fixed: dict[int, float] = {}
        self._forget_decode_steps()  # batch size -> context -> seconds (DecodeMemo)
        self._decode_attention: dict[tuple[int, int], float] = {}

    def __repr__(self) -> str:
        return f"MeasuredStageProfile({self.parent.model.name!r}, {self.parent.gpu.name!r}, tp={self.tp})"

    def _price(self, op: Op, share: float) -> float:
        key = (op.kind, op.shape, share)
        seconds = self._prices.get(key)
        if seconds is None:
            seconds = self._prices[key] = self._ops.op_s(op, share)[0]
        return seconds

    def _stage_s(self, ops: Sequence[Op], share: float, overhead_s: float) -> float:
        return overhead_s + sum(op.count * self._price(op, share) for op in ops)

    def encode_s(self, mm_tokens_per_item: Sequence[int], sm_share: float = 1.0) -> float:
        items = validate_items("mm_tokens_per_item", mm_tokens_per_item)
        share = self.parent.gpu.partition_share(float(sm_share))
        return remembered(self._encode_memo, (tuple(items), share), self._encode_s, items, share)

    def _encode_s(self, items: list[int], share: float) -> float:
        eff = self.parent.efficiency
        per_gpu = [items[i:: self.tp] for i in range(min(self.tp, len(items)))]
        overhead = eff.step_overhead_s + eff.encode_call_residual_s
        return max(self._stage_s(encoder_ops(self.parent.model, chunk), share, overhead) for chunk in per_gpu)

    def host_preprocess_s(self, mm_tokens_per_item: Sequence[int]) -> float:
        eff = self.parent.efficiency
        return sum(eff.host_preprocess_s_per_item + eff.host_preprocess_s_per_mm_token * t
                   for t in mm_tokens_per_item)

    def prefill_s(self, seq_lens: Sequence[int], sm_share: float = 1.0) -> float:
        lens = validate_items("seq_lens", seq_lens)
        share = self.parent.gpu.partition_share(float(sm_share))
        return remembered(self._prefill_memo, (tuple(lens), share), self._prefill_s, lens, share)

    def _prefill_s(self, lens: list[int], share: float) -> float:
        ops = prefill_ops(self.parent.model.lm, lens, tp=self.tp)
        return self._stage_s(ops, share, self.parent.efficiency.step_overhead_s)

    def _decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        fixed = self._decode_fixed.get(batch_size)
        if fixed is None:
            fixed = self._decode_fixed[batch_size] = self._decode_fixed_s(batch_size)
        # the attention shape knows only the mean context per sequence (calibration.ops)
        key = (batch_size, max(1, round(context_tokens / batch_size)))
        seconds = self._decode_attention.get(key)
        if seconds is None:
            attention = decode_attention_ops(self.parent.model.lm, batch_size, context_tokens, tp=self.tp)
            seconds = remembered(self._decode_attention, key, self._stage_s, attention, 1.0, 0.0)
        return fixed + seconds

    def _decode_fixed_s(self, batch_size: int) -> float:
        ops = [op for op in decode_ops(self.parent.model.lm, batch_size, batch_size, tp=self.tp)
               if op.kind != "generation_attention"]
        return self._stage_s(ops, 1.0, self.parent.efficiency.decode_step_overhead_s)

    def mixed_step_s(self, chunk_lens: Sequence[int], batch_size: int, context_tokens: int) -> float:
        """Prefill chunks beside ``batch_size`` decodes in one forward: the GEMMs over all their
        tokens, each attention kernel on its own, one step overhead."""
        if not batch_size:
            return self.prefill_s(chunk_lens)
        if not chunk_lens:
            return self.decode_step_s(batch_size, context_tokens)
        lens = validate_items("chunk_lens", chunk_lens)
        lm = self.parent.model.lm
        prefill = prefill_ops(lm, [*lens, *([1] * batch_size)], tp=self.tp)
        decode = decode_ops(lm, batch_size, context_tokens, tp=self.tp)
        ops = [op for op in prefill if op.kind != "context_attention"]
        ops += [op for op in prefill_ops(lm, lens, tp=self.tp) if op.kind == "context_attention"]
        ops += [op for op in decode if op.kind == "generation_attention"]
        return self._stage_s(ops, 1.0, self.parent.efficiency.step_overhead_s)

    def embed_bytes(self, mm_tokens: int) -> int:
        lm = self.parent.model.lm
        return int(mm_tokens) * lm.hidden_size * lm.dtype_bytes

    def kv_bytes(self, num_tokens: int) -> int:
        return self.parent.model.lm.kv_bytes(int(num_tokens))

    def transfer_s(self, num_bytes: int) -> float:
        gpu = self.parent.gpu
        return gpu.link_latency_s + num_bytes / gpu.link_bytes_per_s


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuredProfile(SpecMemory):
    """A :class:`~easerve_core.profile.ParallelProfile` from measured op tables (any TP)."""

    model: ModelSpec
    gpu: GPUSpec
    tables: OpTables
    #: where the tables came from: system, engine, version, the package and its pin
    database: Mapping[str, str] = field(default_factory=dict)
    efficiency: Efficiency = field(default_factory=Efficiency)
    budget: memory.MemoryBudget = field(default_factory=memory.MemoryBudget)

    def for_tp(self, tp: int) -> MeasuredStageProfile:
        return MeasuredStageProfile(self, check_tp(tp))

    def ops(self) -> MeasuredOps:
        """The price of one op on this GPU (:mod:`calibration.op_prices`)."""
        return MeasuredOps(self.tables, RooflineOps(self.gpu, self.efficiency))

    def op_sources(self, lm_tp: int) -> list[tuple[str, str, str]]:
        """(label, kind, source) of every op of the typical request's stages: encode at TP 1,
        prefill and a decode step at ``lm_tp``."""
        typical, lm, prices = self.model.typical_request, self.model.lm, self.ops()
        seq = typical.prompt_tokens + sum(typical.mm_tokens_per_item)
        ops = [*(encoder_ops(self.model, typical.encode_items) if typical.mm_tokens_per_item else []),
               *prefill_ops(lm, [seq], tp=lm_tp), *decode_ops(lm, 32, 32 * seq, tp=lm_tp)]
        seen: dict[tuple[str, str], str] = {}
        for op in ops:
            source = prices.op_s(op)[1]
            key = (op.label, op.kind)
            if key not in seen or (seen[key] != source and source not in seen[key]):
                seen[key] = source if key not in seen else f"{seen[key]}; {source}"
        return [(label, kind, source) for (label, kind), source in seen.items()]

    def to_params(self) -> dict[str, Any]:
        return {"model_spec": self.model.to_dict(), "gpu_spec": self.gpu.to_dict(),
                "efficiency": efficiency_dict(self.efficiency), "memory_budget": asdict(self.budget),
                "database": dict(self.database), "tables": self.tables.to_dict()}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> MeasuredProfile:
        for key in ("model_spec", "gpu_spec", "efficiency", "memory_budget", "tables"):
            if not isinstance(params.get(key), dict):
                raise ValueError(f"measured profile params: missing object {key!r}")
        try:
            return cls(model=ModelSpec.from_dict(params["model_spec"]),
                       gpu=GPUSpec.from_dict(params["gpu_spec"]),
                       tables=OpTables.from_dict(params["tables"]),
                       database={str(k): str(v) for k, v in dict(params.get("database", {})).items()},
                       efficiency=Efficiency(**params["efficiency"]),
                       budget=memory.MemoryBudget(**params["memory_budget"]))
        except TypeError as exc:
            raise ValueError(f"measured profile params are malformed: {exc}") from None


def model_tables(tables: OpTables, model: ModelSpec, tps: Sequence[int] = PROFILE_TPS) -> OpTables:
    """Only what ``model`` asks at the ``tps`` sizes: its GEMM shapes, head shapes, all-reduces."""
    lm, gemm_shapes = model.lm, set()
    ctx, gen = set(), set()
    probe = [(ops, tp) for tp in tps for ops in (prefill_ops(lm, [64], tp=tp), decode_ops(lm, 8, 512, tp=tp))]
    probe.append((encoder_ops(model, list(model.typical_request.encode_items) or [64]), 1))
    enc = set()
    for ops, _ in probe:
        for op in ops:
            if op.kind == "gemm":
                gemm_shapes.add(op.shape[1:])
            elif op.kind == "context_attention":
                ctx.add(op.shape[2:])
            elif op.kind == "generation_attention":
                gen.add(op.shape[2:])
            elif op.kind == "encoder_attention":
                enc.add(op.shape[2:])
    grid = tables.gemm.m_grid()
    return OpTables(source=tables.source,
                    gemm=tables.gemm.subset(sorted(gemm_shapes), [int(m) for m in grid]),
                    context_attention=tables.context_attention.subset(sorted(ctx)),
                    generation_attention=tables.generation_attention.subset(sorted(gen)),
                    encoder_attention=tables.encoder_attention.subset(sorted(enc)),
                    allreduce=tables.allreduce)
