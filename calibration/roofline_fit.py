"""The roofline fitted to a measured kernel database, per GPU, and the error that is left.

:func:`fidelity` compares the roofline (:class:`~calibration.op_prices.RooflineOps`
and the analytic stages) with measured tables op by op, over the operators of
easerve's models (:func:`probe_ops`: their LM GEMMs at TP 1, 2 and 4 over token
counts 1 to 8,192, ViT GEMMs, context, generation and ViT attention), and over
whole prefills and decode steps (the measured profile's sums, fixed per-step
overheads left out on both sides). Each class gets the median and P90 of
|roofline / measured - 1|.

:func:`fit_roofline` fits six constants of :class:`~calibration.efficiency.Efficiency`
(GEMM and top attention efficiency, bandwidth efficiency, ``fill_flops_per_sm``,
the per-kernel floor ``kernel_floor_s`` and the half-efficiency length of
attention ``attention_half_len_tokens``) and turns on the pricing of
element-wise passes, minimising the mean |log ratio| of every class but ViT
attention (which no single efficiency explains; it is reported, not fitted).
The committed results live in ``specs/fitted/<gpu>.json`` with their
provenance; :func:`fitted_efficiency` reads them. Background: docs/profiles.md,
"The roofline fitted".
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize

from calibration.analytic import AnalyticProfile
from calibration.efficiency import Efficiency
from calibration.measured import MeasuredProfile
from calibration.op_prices import MeasuredOps, RooflineOps
from calibration.ops import Op, encoder_ops
from calibration.optables import OpTables
from calibration.specs import SPEC_DIR, gpu_spec, model_spec
from runtime.files import write_text_atomic

FITTED_DIR = SPEC_DIR / "fitted"
#: the models whose operators the fit and the fidelity table are judged on
MODELS = ("qwen2.5-vl-32b", "llava-v1.6-34b", "ultravox-v0.6-gemma3-27b")
CLASSES = ("LM GEMM", "vision GEMM", "context attention", "generation attention", "vision attention",
           "whole prefill", "whole decode step")
#: classes the fit minimises (ViT attention is reported only)
FITTED_CLASSES = tuple(c for c in CLASSES if c != "vision attention")
_LM_TOKENS = (1, 8, 64, 512, 2048, 8192)
_PREFILLS = ((512,), (2048,), (8192,), (1024,) * 4)
_DECODES = ((1, 1024), (16, 2048), (64, 2048), (128, 1024))
_CONTEXT = ((1, 512), (1, 2048), (1, 8192), (4, 1024), (16, 1024))
_GENERATION = ((1, 1024), (8, 2048), (32, 4096), (64, 1024), (128, 2048))
_NO_OVERHEAD = {"step_overhead_s": 0.0, "decode_step_overhead_s": 0.0, "encode_call_residual_s": 0.0}


def probe_ops() -> list[tuple[str, Op]]:
    """(class, op) for every operator the fit and fidelity table judge (see the module docstring)."""
    out: list[tuple[str, Op]] = []
    for name in MODELS:
        spec = model_spec(name)
        lm = spec.lm
        for tp in (1, 2, 4):
            kv, ffn = lm.num_kv_heads * lm.head_dim, round(lm.active_intermediate_size)
            for m in _LM_TOKENS:
                for label, n, k in (("qkv", (lm.q_width + 2 * kv) // tp, lm.hidden_size),
                                    ("o", lm.hidden_size, lm.q_width // tp),
                                    ("gate_up", (lm.mlp_num_matrices - 1) * ffn // tp, lm.hidden_size),
                                    ("down", lm.hidden_size, ffn // tp)):
                    out.append(("LM GEMM", Op("gemm", f"lm.{label}", (m, n, k))))
            heads = (max(1, lm.num_heads // tp), max(1, lm.num_kv_heads // tp), lm.head_dim)
            if tp <= 2:
                out += [("context attention", Op("context_attention", "lm.attention", (b, s, *heads)))
                        for b, s in _CONTEXT]
                out += [("generation attention", Op("generation_attention", "lm.attention", (b, c, *heads)))
                        for b, c in _GENERATION]
        for items in ([256], [1024], [4096], [1024] * 4):
            for op in encoder_ops(spec, items):
                if op.kind == "gemm" and op.label != "vit.projector":
                    out.append(("vision GEMM", op))
                elif op.kind == "encoder_attention":
                    out.append(("vision attention", op))
    return out


def _stats(ratios: Sequence[float]) -> tuple[float, float, int]:
    errors = np.abs(np.asarray(ratios) - 1.0)
    return float(np.median(errors)), float(np.percentile(errors, 90)), len(errors)


@dataclass(frozen=True, slots=True)
class Fidelity:
    """Per class: the ratios roofline / measured (the source of the median and P90)."""

    ratios: Mapping[str, tuple[float, ...]]

    def stats(self) -> dict[str, tuple[float, float, int]]:
        """class -> (median, P90 of |ratio - 1|, count)."""
        return {c: _stats(r) for c, r in self.ratios.items() if r}

    def loss(self, classes: Sequence[str] = FITTED_CLASSES) -> float:
        return sum(float(np.mean(np.abs(np.log(self.ratios[c])))) for c in classes if self.ratios.get(c))


def _exact(prices: MeasuredOps, op: Op) -> float | None:
    seconds, source = prices.op_s(op)
    return seconds if source == "measured" else None


@dataclass(frozen=True, slots=True)
class _Measured:
    """The measured side, computed once: op prices and whole-stage times per model."""

    ops: tuple[tuple[str, Op, float], ...]
    stages: tuple[tuple[str, str, int, tuple[int, ...], float], ...]  # class, model, tp, args, seconds


def _measured_side(gpu: str, tables: OpTables) -> _Measured:
    prices = MeasuredOps(tables, RooflineOps(gpu_spec(gpu), Efficiency()))
    ops = tuple((c, op, s) for c, op in probe_ops() if (s := _exact(prices, op)) is not None)
    stages = []
    base = Efficiency(price_elementwise_ops=True, **_NO_OVERHEAD)
    for name in MODELS:
        profile = MeasuredProfile(model=model_spec(name), gpu=gpu_spec(gpu), tables=tables, efficiency=base)
        for tp in (1, 2):
            worker = profile.for_tp(tp)
            stages += [("whole prefill", name, tp, lens, worker.prefill_s(list(lens))) for lens in _PREFILLS]
            stages += [("whole decode step", name, tp, (b, b * c), worker.decode_step_s(b, b * c))
                       for b, c in _DECODES]
    return _Measured(ops, tuple(stages))


def _fidelity(gpu: str, efficiency: Efficiency, measured: _Measured) -> Fidelity:
    roofline = RooflineOps(gpu_spec(gpu), efficiency)
    ratios: dict[str, list[float]] = {c: [] for c in CLASSES}
    for cls, op, seconds in measured.ops:
        ratios[cls].append(roofline.op_s(op)[0] / seconds)
    eff = replace(efficiency, **_NO_OVERHEAD)
    for name in MODELS:
        analytic = AnalyticProfile(model=model_spec(name), gpu=gpu_spec(gpu), efficiency=eff)
        workers = {tp: analytic.for_tp(tp) for tp in (1, 2)}
        for cls, model, tp, args, seconds in measured.stages:
            if model != name:
                continue
            worker = workers[tp]
            mine = worker.prefill_s(list(args)) if cls == "whole prefill" else worker.decode_step_s(*args)
            ratios[cls].append(mine / seconds)
    return Fidelity({c: tuple(r) for c, r in ratios.items()})


def fidelity(gpu: str, tables: OpTables, efficiency: Efficiency | None = None) -> Fidelity:
    """The roofline of ``gpu`` (``efficiency``, default the hand-set constants) against ``tables``."""
    return _fidelity(gpu, efficiency or Efficiency(), _measured_side(gpu, tables))


#: the fitted fields, their bounds, and how the optimiser sees them (log scale for the last two)
_FIELDS: tuple[tuple[str, float, float], ...] = (
    ("gemm_efficiency_frac", 0.3, 1.0), ("attention_efficiency_frac", 0.1, 1.0),
    ("mem_bw_efficiency_frac", 0.5, 1.0), ("fill_flops_per_sm", 1e5, 1e9), ("kernel_floor_s", 1e-7, 5e-5),
    ("attention_half_len_tokens", 1.0, 1e5))
_LOG = {"fill_flops_per_sm", "kernel_floor_s", "attention_half_len_tokens"}


def _to_x(eff: Efficiency) -> list[float]:
    return [math.log(getattr(eff, n)) if n in _LOG else getattr(eff, n) for n, _, _ in _FIELDS]


def _from_x(x: Sequence[float], base: Efficiency) -> Efficiency:
    values = {}
    for (name, lo, hi), v in zip(_FIELDS, x, strict=True):
        value = math.exp(v) if name in _LOG else v
        values[name] = min(hi, max(lo, value))
    return replace(base, price_elementwise_ops=True, **values)


@dataclass(frozen=True, slots=True)
class RooflineFit:
    gpu: str
    before: Fidelity
    after: Fidelity
    efficiency: Efficiency

    def report_lines(self) -> list[str]:
        lines = [f"{'op class':<22}{'n':>5}{'median before':>15}{'P90 before':>12}"
                 f"{'median after':>14}{'P90 after':>11}"]
        before, after = self.before.stats(), self.after.stats()
        for cls in CLASSES:
            if cls in before:
                b, a = before[cls], after[cls]
                lines.append(f"{cls:<22}{b[2]:>5}{b[0]:>15.1%}{b[1]:>12.1%}{a[0]:>14.1%}{a[1]:>11.1%}")
        fitted = {n: getattr(self.efficiency, n) for n, _, _ in _FIELDS}
        lines.append("fitted   " + ", ".join(f"{k}={v:.4g}" for k, v in fitted.items()))
        return lines


def fit_roofline(gpu: str, tables: OpTables, start: Efficiency | None = None) -> RooflineFit:
    """Fit the roofline's constants of ``gpu`` to ``tables`` (see the module docstring)."""
    base = start or Efficiency()
    measured = _measured_side(gpu, tables)
    before = _fidelity(gpu, base, measured)

    def loss(x: Sequence[float]) -> float:
        return _fidelity(gpu, _from_x(x, base), measured).loss()

    x0 = _to_x(replace(base, kernel_floor_s=base.kernel_floor_s or 5e-6,
                       attention_half_len_tokens=base.attention_half_len_tokens or 1000.0))
    best = minimize(loss, x0, method="Nelder-Mead", options={"maxiter": 400, "xatol": 1e-3, "fatol": 1e-5})
    efficiency = _from_x(best.x, base)
    return RooflineFit(gpu, before, _fidelity(gpu, efficiency, measured), efficiency)


def fitted_constants_doc(gpu: str, fit: RooflineFit, source: str) -> dict[str, Any]:
    """The file ``fit-roofline --out`` writes and ``specs/fitted/`` commits."""
    fields = {n: getattr(fit.efficiency, n) for n, _, _ in _FIELDS}
    fields["price_elementwise_ops"] = True
    stats = {"before": fit.before.stats(), "after": fit.after.stats()}
    return {"format": "easerve.fitted-roofline", "version": 1, "gpu": gpu, "efficiency": fields,
            "provenance": {"source": source,
                           "command": f"easerve profile fit-roofline --gpu {gpu} --from aiconfigurator",
                           "judged_on": list(MODELS)},
            "error": {side: {c: {"median": round(m, 4), "p90": round(p, 4), "n": n}
                             for c, (m, p, n) in s.items()} for side, s in stats.items()}}


def write_fitted(doc: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    write_text_atomic(Path(path), json.dumps(doc, indent=2) + "\n")


def fitted_efficiency(gpu: str, folder: Path = FITTED_DIR) -> Efficiency | None:
    """The committed fitted constants of ``gpu`` over the hand-set overheads, or None."""
    path = folder / f"{gpu}.json"
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    return replace(Efficiency(), **doc["efficiency"])


def fitted_gpus(folder: Path = FITTED_DIR) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.json"))

