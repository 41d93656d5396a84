"""The price of one operator on a GPU: the roofline's, or a measured database's with the roofline under it.

Public API for scripts outside the project (docs/profiles.md, "One op's
price"); every profile of a GPU answers the same questions through
``profile.ops()``:

* ``gemm_s(m, n, k)``: an (m x k) @ (k x n) BF16 GEMM;
* ``attention_s(phase, batch, tokens, num_heads, num_kv_heads, head_dim)``:
  one layer's attention, ``phase`` one of :data:`PHASES` (``tokens`` is the
  sequence length, or for ``generation`` each sequence's context);
* ``allreduce_s(nbytes, tp)``: one all-reduce of ``nbytes`` over ``tp`` GPUs;
* ``elementwise_s(nbytes)``: a memory-bound pass (norm, activation, rope).

:class:`RooflineOps` prices an op as the largest of its FLOPs over the achieved
peak (the ``fill`` rule of :mod:`calibration.analytic` for small kernels), its
bytes over the achieved bandwidth, and ``Efficiency.kernel_floor_s``. Context and
encoder attention of sequences of L tokens run at the length-dependent efficiency
``attention_efficiency_frac * L / (L + attention_half_len_tokens)``: priced as
``(L + half) / L`` times their FLOPs at the top efficiency (:func:`calibration.work.length_factor`).
:class:`MeasuredOps` asks its :class:`~calibration.optables.OpTables` first and
falls back to the roofline per op; :meth:`MeasuredOps.op_s` also says which
answered. On a share s of the SMs a measured op is slowed by the roofline's own
ratio t(s) / t(1), so a small kernel keeps its time and a big one slows as 1/s.
"""

from __future__ import annotations

from calibration.efficiency import Efficiency
from calibration.ops import Op
from calibration.optables import OpTables
from calibration.specs import GPUSpec
from calibration.work import length_factor

PHASES = ("context", "generation", "encoder")
ROOFLINE = "roofline"


def _attention_work(phase: str, batch: float, tokens: float, heads: float, kv_heads: float,
                    head_dim: float, dtype_bytes: int = 2) -> tuple[float, float]:
    """(FLOPs, bytes) of one layer's attention (the counts of :mod:`calibration.work`)."""
    if phase == "context":
        pairs = tokens * (tokens + 1) / 2
        nbytes = tokens * (2 * heads + 2 * kv_heads) * head_dim
    elif phase == "generation":
        pairs = tokens
        nbytes = tokens * 2 * kv_heads * head_dim + 2 * heads * head_dim
    elif phase == "encoder":
        pairs = tokens * tokens
        nbytes = tokens * 4 * heads * head_dim
    else:
        raise ValueError(f"unknown attention phase {phase!r}; known: {', '.join(PHASES)}")
    return 4.0 * batch * pairs * heads * head_dim, batch * nbytes * dtype_bytes


class RooflineOps:
    """Per-op prices from a GPU spec and the roofline's :class:`Efficiency`."""

    def __init__(self, gpu: GPUSpec, efficiency: Efficiency) -> None:
        self.gpu, self.efficiency = gpu, efficiency
        self._fill_flops = gpu.num_sms * efficiency.fill_flops_per_sm
        self._peak = {True: gpu.dense_bf16_flops * efficiency.attention_efficiency_frac,
                      False: gpu.dense_bf16_flops * efficiency.gemm_efficiency_frac}
        self._bw = gpu.mem_bandwidth_bytes_per_s * efficiency.mem_bw_efficiency_frac

    def kernel_s(self, flops: float, nbytes: float, *, attention: bool = False, share: float = 1.0) -> float:
        """A kernel of ``flops`` FLOPs streaming ``nbytes`` on ``share`` of the SMs."""
        compute = 0.0
        if flops > 0:
            fill = min(1.0, flops / self._fill_flops)
            compute = flops / (self._peak[attention] * min(share, fill))
        return max(compute, nbytes / self._bw, self.efficiency.kernel_floor_s)

    def gemm_s(self, m: float, n: float, k: float, share: float = 1.0) -> float:
        return self.kernel_s(2.0 * m * n * k, 2.0 * (m * k + k * n + m * n), share=share)

    def attention_s(self, phase: str, batch: float, tokens: float, num_heads: float, num_kv_heads: float,
                    head_dim: float, share: float = 1.0) -> float:
        flops, nbytes = _attention_work(phase, batch, tokens, num_heads, num_kv_heads, head_dim)
        if phase != "generation":  # the length-dependent efficiency (Efficiency.attention_half_len_tokens)
            flops *= length_factor(tokens, self.efficiency.attention_half_len_tokens)
        return self.kernel_s(flops, nbytes, attention=True, share=share)

    def allreduce_s(self, nbytes: float, tp: int) -> float:
        """A ring all-reduce over the GPU's link (:meth:`TPStageProfile._allreduce_s`)."""
        if tp <= 1 or nbytes <= 0:
            return 0.0
        steps = 2 * (tp - 1)
        return steps * self.gpu.link_latency_s + steps / tp * nbytes / self.gpu.link_bytes_per_s

    def elementwise_s(self, nbytes: float, share: float = 1.0) -> float:
        return self.kernel_s(0.0, nbytes, share=share)

    def op_s(self, op: Op, share: float = 1.0) -> tuple[float, str]:
        """(seconds of one launch of ``op``, ``"roofline"``)."""
        kind, s = op.kind, op.shape
        if kind == "gemm":
            return self.gemm_s(*s, share=share), ROOFLINE
        if kind.endswith("attention"):
            return self.attention_s(kind.split("_")[0], *s, share=share), ROOFLINE
        if kind == "allreduce":
            return self.allreduce_s(s[0], s[1]), ROOFLINE
        if kind == "elementwise":
            return self.elementwise_s(s[0], share=share), ROOFLINE
        if kind == "conv":
            return self.kernel_s(s[0], s[1], share=share), ROOFLINE
        raise ValueError(f"unknown op kind {kind!r}")


class MeasuredOps:
    """Per-op prices from measured tables, the roofline where they have no answer."""

    def __init__(self, tables: OpTables, roofline: RooflineOps) -> None:
        self.tables, self.roofline = tables, roofline
        self._attention = {"context": tables.context_attention, "generation": tables.generation_attention,
                           "encoder": tables.encoder_attention}

    def _measured(self, op: Op) -> tuple[float, str] | None:
        kind, s = op.kind, op.shape
        if kind == "gemm":
            seconds = self.tables.gemm(*s)
            return None if seconds is None else (seconds, "measured")
        if kind.endswith("attention"):
            batch, tokens, heads, kv, dim = s
            found = self._attention[kind.split("_")[0]](batch, tokens, (heads, kv, dim))
            if found is None:
                return None
            seconds, held = found
            if held == (heads, kv, dim):
                return seconds, "measured"
            return seconds, f"measured, scaled from heads {held[0]}/{held[1]}"
        if kind == "allreduce":
            seconds = self.tables.allreduce(s[0], s[1])
            return None if seconds is None else (seconds, "measured")
        return None  # element-wise passes and the patch embedding: the roofline

    def op_s(self, op: Op, share: float = 1.0) -> tuple[float, str]:
        """(seconds of one launch of ``op`` on ``share`` of the SMs, where the price came from)."""
        if op.kind == "allreduce" and op.shape[1] <= 1:
            return 0.0, ROOFLINE
        found = self._measured(op)
        if found is None:
            return self.roofline.op_s(op, share)
        seconds, source = found
        if share < 1.0 and op.kind != "allreduce":
            full, _ = self.roofline.op_s(op, 1.0)
            seconds *= self.roofline.op_s(op, share)[0] / full
        return seconds, source

    def gemm_s(self, m: float, n: float, k: float, share: float = 1.0) -> float:
        return self.op_s(Op("gemm", "gemm", (m, n, k)), share)[0]  # type: ignore[arg-type]

    def attention_s(self, phase: str, batch: float, tokens: float, num_heads: float, num_kv_heads: float,
                    head_dim: float, share: float = 1.0) -> float:
        if phase not in PHASES:
            raise ValueError(f"unknown attention phase {phase!r}; known: {', '.join(PHASES)}")
        shape = (batch, tokens, num_heads, num_kv_heads, head_dim)
        return self.op_s(Op(f"{phase}_attention", "attention", shape), share)[0]  # type: ignore[arg-type]

    def allreduce_s(self, nbytes: float, tp: int) -> float:
        return self.op_s(Op("allreduce", "allreduce", (nbytes, tp)))[0]  # type: ignore[arg-type]

    def elementwise_s(self, nbytes: float, share: float = 1.0) -> float:
        return self.roofline.elementwise_s(nbytes, share)
