"""What a GPU pays to change role: the online controller's slow knob (docs/controller.md).

When the controller moves a GPU between Encode, Prefill and Decode, the
worker drains, then loads its new role's weights and warms up before it
serves again. :func:`reconfiguration_s` prices that from the specs:

* **weights**: the new role's bytes per GPU (the LM split over its TP, the
  encoder beside it for an encode worker that prefills locally), copied from
  host memory (the weights stay resident in pinned host memory or the page
  cache) over the GPU's host link. For PCIe GPUs that is the
  ``link_bytes_per_s`` of the GPU spec (the same x16 link the GPU-to-GPU
  figure is measured on); NVLink GPUs still load from the host over PCIe,
  :data:`PCIE_HOST_BYTES_PER_S`.
* **warm-up**: a serving engine's start-up after its weights are in place
  (compiling from a warm cache, capturing CUDA graphs, profiling memory):
  :data:`WARMUP_S`, vLLM's reported engine init with a warm torch.compile
  cache on one GPU (7.5 s of Dynamo transform plus 17 s of CUDA-graph
  capture, 34 s of engine init in all, vllm-project/vllm#20264; a Llama-70B
  TP-8 start-up took 60 s of graph capture and 10 s of weights from a hot
  page cache, vllm-project/vllm#19824). We take 25 s: the transform and the
  capture, without the first-boot compile.

**A standby engine** skips the warm-up. An engine that is put to sleep in
place of being stopped keeps its process, CUDA context, allocator, captured
graphs and compiled kernels, and drops its weights and KV cache (vLLM's sleep
mode). Waking it copies its weights back and re-warms in well under a second:
vLLM's blog (blog.vllm.ai, 2025-10-26, A100, level 1) woke Qwen3-Coder-30B
(TP 1, about 61 GB of weights) in 2.85-2.89 s against 47.3-47.5 s cold, and
Qwen3-235B-A22B-FP8 (TP 4) in 5.3-5.7 s against 97.4-97.9 s. The first is the
weights over a 25 GB/s link (2.4 s) and about 0.4 s more; the second is about
twice the per-GPU copy, four GPUs drawing on one host at once, which the link
model here does not price. :data:`STANDBY_WARMUP_S` (1 s) takes the place of
the warm-up for such an engine: the copy is priced as above. Standby assumes
every GPU keeps a sleeping engine for each role it takes (started, and warmed,
before the run) and that a sleeping engine's context and graphs fit in the
memory the serving engine leaves free (1 - ``memory_utilization_frac``:
calibration.memory).
"""

from __future__ import annotations

from dataclasses import dataclass

from calibration.specs import GPUSpec, ModelSpec, gpu_spec, model_spec

#: an engine's warm-up after its weights load (see the module docstring; G: from vLLM's logs)
WARMUP_S = 25.0
#: a standby engine's re-warm after its weights are back (see the module docstring; G: vLLM's blog)
STANDBY_WARMUP_S = 1.0
#: host-to-device bandwidth of a PCIe 4.0 x16 link, achieved (GPUs whose spec link is NVLink)
PCIE_HOST_BYTES_PER_S = 25e9
ROLES = ("encode", "encode+prefill", "prefill", "decode")


def host_link_bytes_per_s(gpu: GPUSpec) -> float:
    """Host-to-device bandwidth: the spec's link for PCIe GPUs, PCIe 4.0 x16 for the rest."""
    return gpu.link_bytes_per_s if gpu.link_kind.startswith("pcie") else PCIE_HOST_BYTES_PER_S


def role_weight_bytes(model: ModelSpec, role: str, tp: int) -> float:
    """Weights one GPU of a worker in ``role`` holds (``ROLES``)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; known: {', '.join(ROLES)}")
    encoder = model.encoder.params * model.lm.dtype_bytes / tp
    lm = model.lm.weight_bytes / tp
    return {"encode": encoder, "encode+prefill": encoder + lm, "prefill": lm, "decode": lm}[role]


def reconfiguration_s(model: str, gpu: str, *, role: str, tp: int, warmup_s: float = WARMUP_S) -> float:
    """Seconds a GPU spends between draining and serving in ``role`` (load + warm-up)."""
    spec, device = model_spec(model), gpu_spec(gpu)
    return role_weight_bytes(spec, role, tp) / host_link_bytes_per_s(device) + warmup_s


@dataclass(frozen=True, slots=True)
class ReconfigurationCost:
    """:func:`reconfiguration_s` of one model on one GPU as ``(role, tp) -> seconds``: what
    ``sim.simulate(..., reconfiguration_s=...)`` takes (a value, so it pickles to a worker)."""

    model: str
    gpu: str
    warmup_s: float = WARMUP_S

    def __call__(self, role: str, tp: int) -> float:
        return reconfiguration_s(self.model, self.gpu, role=role, tp=tp, warmup_s=self.warmup_s)
