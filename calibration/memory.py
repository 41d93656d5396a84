"""Memory feasibility: weights per GPU, KV capacity per worker, decode batch bound.

A worker of ``tp`` GPUs holds the LM sharded over its GPUs (and, on an encode
worker with local prefill, one encoder replica per GPU). Of each GPU's memory
only ``memory_utilization_frac`` is given to the engine (like vLLM's
``gpu_memory_utilization``) and ``activation_reserve_frac`` of the total is kept
for activations, CUDA graphs and the allocator's slack; what remains after the
weights holds the KV cache. Numbers and the reasons for them: docs/profiles.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from calibration._fields import fraction, validate
from calibration.specs import GPUSpec, ModelSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBudget:
    """How much of a GPU's memory weights and KV may use."""

    memory_utilization_frac: float = 0.90
    activation_reserve_frac: float = 0.05

    def __post_init__(self) -> None:
        validate(self)
        fraction("MemoryBudget", "memory_utilization_frac", self.memory_utilization_frac)
        fraction("MemoryBudget", "activation_reserve_frac", self.activation_reserve_frac,
                 allow_zero=True)
        if self.activation_reserve_frac >= self.memory_utilization_frac:
            raise ValueError("MemoryBudget.activation_reserve_frac must be < memory_utilization_frac, "
                             f"got {self.activation_reserve_frac!r}")

    def usable_bytes(self, gpu: GPUSpec) -> float:
        """Bytes per GPU for weights plus KV cache."""
        return gpu.memory_bytes * (self.memory_utilization_frac - self.activation_reserve_frac)


def weight_bytes_per_gpu(model: ModelSpec, tp: int, *, with_lm: bool = True,
                         with_encoder: bool = False) -> float:
    """Weight bytes one GPU of a ``tp``-GPU worker holds."""
    total = 0.0
    if with_lm:
        total += model.lm.weight_bytes / tp
    if with_encoder:
        total += model.encoder.params * model.lm.dtype_bytes
    return total


def kv_bytes_per_token_per_gpu(model: ModelSpec, tp: int) -> float:
    """KV bytes a token costs on each GPU (every layer holds it: short sequences)."""
    return model.lm.num_layers * model.lm.kv_bytes_per_token_layer / tp


def lm_fits(model: ModelSpec, gpu: GPUSpec, budget: MemoryBudget, tp: int, *,
            with_encoder: bool = False) -> bool:
    """True when the (sharded) weights leave room for at least one KV token."""
    free = budget.usable_bytes(gpu) - weight_bytes_per_gpu(model, tp, with_encoder=with_encoder)
    return free >= kv_bytes_per_token_per_gpu(model, tp)


def kv_capacity_tokens(model: ModelSpec, gpu: GPUSpec, budget: MemoryBudget, tp: int, *,
                       with_encoder: bool = False) -> int:
    """KV tokens a worker of ``tp`` GPUs holds after its weights (0 if the LM does not fit).

    A token is charged in every layer, so for a sliding-window model the count
    is exact for sequences within the window and conservative beyond it.
    """
    free = budget.usable_bytes(gpu) - weight_bytes_per_gpu(model, tp, with_encoder=with_encoder)
    if free <= 0:
        return 0
    return int(free // kv_bytes_per_token_per_gpu(model, tp))


def max_decode_batch(kv_capacity: int, tokens_per_seq: int, *, max_num_seqs: int) -> int:
    """Sequences of ``tokens_per_seq`` (prompt + multimodal + output) that fit at once."""
    if tokens_per_seq < 1:
        raise ValueError(f"tokens_per_seq must be >= 1, got {tokens_per_seq!r}")
    if max_num_seqs < 1:
        raise ValueError(f"max_num_seqs must be >= 1, got {max_num_seqs!r}")
    return max(0, min(max_num_seqs, kv_capacity // tokens_per_seq))
