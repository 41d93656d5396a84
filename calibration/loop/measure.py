"""The profiling run behind ``easerve calibrate``: every stage in isolation, plus the host.

:func:`measure` builds the model once and drives :mod:`live.profiling` and
:mod:`live.profiling_host` over a :class:`CalibrationPlan`:

* fit points: encode per batch size and item size, prefill per length,
  decode per batch size and context, all on one thread (a CPU worker of the
  live executor runs ``num_threads = 1``) or on the whole GPU;
* share points: encode per batch size at the five share levels, for the
  SM-share table. On the CPU a share is what the live ``cpu-threads`` backend
  makes of it with ``encode_threads`` threads: on 2 threads the levels 0.2,
  0.4 and 0.6 run on 1 thread and 0.8 and 1.0 on 2, so only two levels are
  real (docs/calibration.md). With ``--device cuda`` each level is a real
  green-context SM partition (live.gpu.green) and the share points are also
  fitted (the fit's share term), and so are prefill points on the levels'
  prefill lanes (:func:`share_prefill_points`: local Prefill shares the GPU);
* host: transfer per byte, core contention, Encode + Prefill co-located in
  one process, the decode loop's per-step overhead and a request's join. On
  CUDA the transfer moves device tensors (CUDA IPC, as the live workers do),
  the dispatch CPU tensors (the front end's inputs), and instead of core
  contention the **device sharing**: k processes each running the model's
  stages on the one GPU (:func:`device_stage_work`), whose speeds fit
  ``num_host_cores`` as the GPU's capacity in processes at full speed (the
  host model's processor sharing then stands for the shared GPU;
  bench/gpu/RESULTS.md §6 fitted 1.2 from live trials). No co-location
  (a GPU host gives each worker process a core of its own).
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from calibration.loop.host import HostModel, fit_transfer
from calibration.registry import SM_SHARE_LEVELS
from live import profiling as lp
from live import profiling_host as hp
from live.device import use_device
from live.gpu.green import green_context_backend
from live.partition import Backend, CpuThreadBackend
from live.stages import DecodeBatch, KVState, encode_batch, prefill
from live.zoo import ModelSpec, build_model
from sim.host_effects import HostEffects

#: bytes of one float32 element (CPU tensors in the live executor)
_FLOAT_BYTES = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationPlan:
    """What to measure; the defaults suit the ``small`` models on a 2-core CPU (about 2 minutes)."""

    encode_batches: tuple[int, ...] = (1, 2, 3, 4, 6, 8)
    encode_item_tokens: tuple[int, ...] = (24, 48, 94)
    table_batches: tuple[int, ...] = (1, 2, 4, 8)
    share_levels: tuple[float, ...] = SM_SHARE_LEVELS
    encode_threads: int = 2
    prefill_lengths: tuple[int, ...] = (40, 56, 72, 88, 104, 128, 152, 184, 216)
    decode_batches: tuple[int, ...] = (1, 2, 3, 4, 6, 8)
    decode_contexts: tuple[int, ...] = (48, 96, 160)
    transfer_bytes: tuple[int, ...] = (1 << 10, 1 << 16, 1 << 18, 1 << 20, 1 << 22)
    contention_procs: int = 4
    contention_duration_s: float = 0.4
    device_sharing_duration_s: float = 1.0
    colocation_duration_s: float = 1.0
    reps: int = 7
    warmup: int = 2

    def __post_init__(self) -> None:
        for name in ("encode_batches", "encode_item_tokens", "table_batches", "prefill_lengths",
                     "decode_batches", "decode_contexts", "transfer_bytes"):
            values = getattr(self, name)
            if not values or any(not isinstance(v, int) or v < 1 for v in values):
                raise ValueError(f"plan.{name} must be a non-empty tuple of integers >= 1, got {values!r}")
        if 1.0 not in self.share_levels or any(not 0 < s <= 1 for s in self.share_levels):
            raise ValueError(f"plan.share_levels must lie in (0, 1] and hold 1.0, got {self.share_levels!r}")
        for name in ("encode_threads", "contention_procs", "reps"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"plan.{name} must be an integer >= 1, got {getattr(self, name)!r}")

    @classmethod
    def quick(cls) -> CalibrationPlan:
        """A few points per stage, for tests and the tiny models (seconds)."""
        return cls(encode_batches=(1, 2, 3, 4, 5, 6), encode_item_tokens=(8,), table_batches=(1, 2),
                   prefill_lengths=(16, 24, 32, 40, 48, 56), decode_batches=(1, 2, 3, 4, 5, 6),
                   decode_contexts=(16,), transfer_bytes=(1 << 10, 1 << 16), contention_procs=2,
                   contention_duration_s=0.1, colocation_duration_s=0.2, reps=3, warmup=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Measured:
    """What :func:`measure` returns: points, share points, host model and the raw host rows."""

    points: list[dict[str, Any]]
    share_points: list[dict[str, Any]]
    host: HostModel
    raw: dict[str, Any]
    embed_bytes_per_token: int
    kv_bytes_per_token: int


def byte_sizes(model: Any) -> tuple[int, int]:
    """(embedding, KV) bytes per token of the LM at float32."""
    tc = model.config.text_config
    head_dim = getattr(tc, "head_dim", None) or tc.hidden_size // tc.num_attention_heads
    kv = tc.num_hidden_layers * 2 * tc.num_key_value_heads * head_dim * _FLOAT_BYTES
    return tc.hidden_size * _FLOAT_BYTES, kv


def measure(spec: ModelSpec, plan: CalibrationPlan, *, device: str = "cpu",
            progress: Callable[[str], None] = lambda _: None) -> Measured:
    """Run every measurement of ``plan`` on ``spec``'s model (see the module docstring)."""
    torch.set_num_threads(1)
    use_device(device)  # inputs, caches and transfers are made on the device
    model = build_model(spec).to(device)
    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    kw = {"reps": plan.reps, "warmup": plan.warmup, "sync": sync}
    share_backend = _share_backend(cuda, plan.encode_threads)
    one = CpuThreadBackend(1)
    progress("encode")
    points = lp.measure_encode(model, spec, batch_sizes=plan.encode_batches,
                               item_tokens=plan.encode_item_tokens, backend=one, **kw)
    mid = sorted(plan.encode_item_tokens)[len(plan.encode_item_tokens) // 2]
    progress("encode at share levels")
    share_points = lp.measure_encode(model, spec, batch_sizes=plan.table_batches, item_tokens=[mid],
                                     shares=plan.share_levels, backend=share_backend, **kw)
    torch.set_num_threads(1)
    if cuda:
        torch.cuda.set_stream(torch.cuda.default_stream())  # the share backend left a lane's stream
        points += share_points
    progress("prefill")
    points += lp.measure_prefill(model, spec, lengths=plan.prefill_lengths, item_tokens=mid, backend=one,
                                 **kw)
    if cuda:  # local Prefill runs on a green lane beside Encode: its shares fit the prefill share term
        progress("prefill at share levels")
        points += share_prefill_points(model, spec, plan, share_backend, mid, kw)
        torch.cuda.set_stream(torch.cuda.default_stream())
    progress("decode")
    points += lp.measure_decode(model, spec, batch_sizes=plan.decode_batches, contexts=plan.decode_contexts,
                                **kw)
    embed, kv = byte_sizes(model)
    host, raw = _measure_host(model, spec, plan, mid, progress, with_contention=not cuda)
    return Measured(points=points, share_points=share_points, host=host, raw=raw,
                    embed_bytes_per_token=embed, kv_bytes_per_token=kv)


def share_prefill_points(model: Any, spec: ModelSpec, plan: CalibrationPlan, backend: Backend,
                         item_tokens: int, kw: dict[str, Any]) -> list[dict[str, Any]]:
    """Prefill at every share below 1.0, at the shortest, middle and longest planned lengths.

    Without them the fitted prefill model meets a share only in the live
    trials: its ``fill_tokens`` is then unidentified, and the simulator slows a
    local prefill on 108 of 132 SMs by the full 1/share even where a small
    prefill cannot fill the device.
    """
    lengths = sorted(plan.prefill_lengths)
    picked = sorted({lengths[0], lengths[len(lengths) // 2], lengths[-1]})
    shares = [s for s in plan.share_levels if s < 1.0]
    return lp.measure_prefill(model, spec, lengths=picked, item_tokens=item_tokens, shares=shares,
                              backend=backend, **kw)


def device_stage_work(name: str, size: str, item_tokens: int, prompt: int,
                      device: str = "cuda") -> Callable[[], None]:
    """In a contention child on the GPU: one call = an encode batch of one, a prefill, a decode step.

    The model is built on the device in the child (module-level, so the
    forkserver can pickle a ``functools.partial`` of it); the speeds of k such
    processes at once, relative to one, measure how the worker processes of a
    one-GPU deployment share the device (``num_host_cores`` on CUDA).
    """
    use_device(device)
    spec = ModelSpec(name=name, size=size)
    model = build_model(spec).to(device)
    mm = lp.make_items(model, spec, item_tokens, 1)[0]
    modality = lp.modality_of(spec)
    text = [1, *range(5, 5 + max(1, prompt - item_tokens))]
    batch = DecodeBatch(model, mrope=spec.family.mrope)
    for i in range(4):
        batch.join(i, _kv_state(model, prompt), steps=10**9)

    @torch.no_grad()
    def call() -> None:
        feats = encode_batch(model, spec.family, [mm])[0]
        prefill(model, spec.family.prefill_inputs(model, text, modality, mm.meta, feats))
        batch.step()
        batch.rewind()

    call()  # warm-up
    return call


def _share_backend(cuda: bool, encode_threads: int) -> Backend:
    # the green-context pool imports the CUDA driver bindings only when it is built
    return green_context_backend() if cuda else CpuThreadBackend(encode_threads)


def _kv_state(model: Any, context: int) -> KVState:
    tc = model.config.text_config
    head_dim = getattr(tc, "head_dim", None) or tc.hidden_size // tc.num_attention_heads
    shape = (tc.num_hidden_layers, 2, 1, tc.num_key_value_heads, context, head_dim)
    return KVState(kv=torch.randn(shape), first_token=5, length=context)


def _decode_batch(model: Any, spec: ModelSpec, plan: CalibrationPlan) -> DecodeBatch:
    """A decode batch at the plan's middle batch size and context per row."""
    context = sorted(plan.decode_contexts)[len(plan.decode_contexts) // 2]
    batch = DecodeBatch(model, mrope=spec.family.mrope)
    for i in range(sorted(plan.decode_batches)[len(plan.decode_batches) // 2]):
        batch.join(i, _kv_state(model, context), steps=10**6)
    return batch


def _decode_step(model: Any, spec: ModelSpec, plan: CalibrationPlan) -> Callable[[], None]:
    """One decode step of :func:`_decode_batch`, rewound so the context stays put."""
    batch = _decode_batch(model, spec, plan)

    def step() -> None:
        batch.step()
        batch.rewind()

    return step


@torch.no_grad()
def _measure_host(model: Any, spec: ModelSpec, plan: CalibrationPlan, mid: int,
                  progress: Callable[[str], None], *,
                  with_contention: bool = True) -> tuple[HostModel, dict[str, Any]]:
    progress("transfers")
    transfer = hp.measure_transfer(plan.transfer_bytes, reps=plan.reps)  # tensors on the device
    latency, bandwidth = fit_transfer(transfer)
    dispatch_rows = transfer
    if not with_contention:  # CUDA: the hand-offs move device tensors, the front end's inputs are CPU ones
        with torch.device("cpu"):
            dispatch_rows = hp.measure_transfer(plan.transfer_bytes, reps=plan.reps)
    dispatch_latency, dispatch_bandwidth = fit_transfer(dispatch_rows)
    mm = lp.make_items(model, spec, mid, 1)[0]
    input_bytes = sum(int(t.numel()) * t.element_size() for t in mm.items)
    dispatch_s = dispatch_latency + input_bytes / dispatch_bandwidth
    step = hp.measure_step_overhead(_decode_step(model, spec, plan))
    prompt = sorted(plan.prefill_lengths)[len(plan.prefill_lengths) // 2]
    join = hp.measure_join(lambda: _kv_state(model, prompt), lambda: _decode_batch(model, spec, plan))
    raw: dict[str, Any] = {"transfer": transfer, "decode_step_overhead_s": step, "decode_join_s": join,
                           "dispatch_input_bytes": input_bytes}
    if not with_contention:
        raw["dispatch_transfer"] = dispatch_rows
        progress("device sharing")
        work = functools.partial(device_stage_work, spec.name, spec.size, mid, prompt)
        sharing = hp.measure_contention(plan.contention_procs, duration_s=plan.device_sharing_duration_s,
                                        make_work=work)
        raw["device_sharing"] = sharing
        effects = HostEffects(num_host_cores=hp.fit_cores(sharing), dispatch_latency_s=dispatch_s,
                              decode_join_s=join)
        host = HostModel(effects=effects, transfer_latency_s=latency, transfer_bytes_per_s=bandwidth,
                         decode_step_overhead_s=step)
        return host, raw
    progress("core contention")
    contention = hp.measure_contention(plan.contention_procs, duration_s=plan.contention_duration_s)
    cores = hp.fit_cores(contention)
    progress("co-location")
    feats = encode_batch(model, spec.family, [mm])[0]
    text = [1, *range(5, 5 + mid)]
    modality = lp.modality_of(spec)
    coloc = hp.measure_colocation(
        lambda: encode_batch(model, spec.family, [mm]),
        lambda: prefill(model, spec.family.prefill_inputs(model, text, modality, mm.meta, feats)),
        duration_s=plan.colocation_duration_s)
    # the pair also shared the cores: keep what is beyond two separate processes at once
    two = next(r["speed_frac"] for r in contention if r["procs"] == min(2, plan.contention_procs))
    colocated = min(1.0, coloc["speed_frac"] / two)
    effects = HostEffects(num_host_cores=cores, colocated_speed_frac=colocated, dispatch_latency_s=dispatch_s,
                          decode_join_s=join)
    host = HostModel(effects=effects, transfer_latency_s=latency, transfer_bytes_per_s=bandwidth,
                     decode_step_overhead_s=step)
    raw.update(contention=contention, colocation=coloc,
               contention_median_speed=statistics.median(r["speed_frac"] for r in contention))
    return host, raw
