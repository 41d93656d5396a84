"""How big the evaluation is: :class:`EvalSize`, its ``QUICK`` and ``FULL`` sizes, and :func:`cuts`.

``easerve reproduce`` (:mod:`easerve.experiments.reproduce`) runs at one of
these sizes; the headline, the measured headline and ``easerve
controller-eval`` read the same sizes. It sits below all of them so that
none imports another's runner for a type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from easerve.experiments import sweep
from easerve_core.has.space import GRID_BATCHES


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalSize:
    """How big the evaluation is."""

    scale: sweep.Scale
    has_trials: int
    has_requests: int
    convergence_seeds: tuple[int, ...]
    has_samples: int = 1
    nominal_rate_hz: float = 2.0
    ablation_rate_hz: float = 10.0
    ablation_remote_fraction: float = 0.55
    #: B values of the HAS-convergence study's exhaustive grid baseline
    grid_batches: tuple[int, ...] = GRID_BATCHES
    #: the headline's tuned sweep again without the residual encoder-call cost
    residual_variant: bool = True
    #: what-if: other video mixes than the headline's (our documented 5-20 s 720p clips) ...
    clip_mixes: tuple[str, ...] = ("qwen-video",)
    #: ... each at these multiples of its LM tokens
    clip_scales: tuple[float, ...] = (1.0, 0.5, 0.25)
    #: the free-in-step-encoder sensitivity tunes the vLLM-like engine on its own setups; False
    #: reuses the headline's vLLM-like choices (tuned with the encoder-call cost)
    free_encoder_own_choices: bool = True
    #: the controller study runs the GPU-frugal planner's oracle and controller too
    controller_frugal: bool = True
    #: the paper models the controller's traffic-shape study runs on
    shape_models: tuple[str, ...] = ("image", "audio", "video")
    #: HAS's regret over twelve scenarios (easerve.experiments.has_regret; about 6 min)
    has_regret: bool = True
    #: the controller on the three built-in shifts where the best deployment moves (mix_control;
    #: several minutes; the trace-rate shift needs a trace file: easerve controller-eval --trace)
    mix_shifts: bool = True
    #: the headline again on 8 x H100 and 8 x H200, measured (vLLM) and roofline profiles, at a
    #: smaller sweep and HAS budget (easerve.experiments.measured_study; needs easerve[measured])
    measured_headline: bool = True


#: the quick run's convergence study: one seed, and a grid of every other B (2, 8, 32: half the
#: grid's points; at the quick settings its best is within 0.03% of the full grid's for all three
#: models, measured 2026-12-01; docs/scaling.md)
QUICK = EvalSize(scale=sweep.QUICK, has_trials=12, has_requests=150, convergence_seeds=(0,),
             grid_batches=(2, 8, 32), clip_scales=(1.0,), residual_variant=False, shape_models=("image",),
             controller_frugal=False,
             free_encoder_own_choices=False, has_regret=False, mix_shifts=False, measured_headline=False)
FULL = EvalSize(scale=sweep.FULL, has_trials=30, has_requests=500, convergence_seeds=(0, 1, 2, 3, 4),
            has_samples=2)


#: the rate-shift studies' multiples of the mean rate, one segment each (1 and 3 req/s at 2)
SHIFT_SHAPE = (0.5, 1.5, 0.5, 1.5)


#: what :func:`cuts` compares, in its order: each line's label and how it counts one size
_CUT_LINES: tuple[tuple[str, Callable[[EvalSize], float]], ...] = (
    ("requests per simulation", lambda size: size.scale.num_requests),
    ("arrival rates swept", lambda size: len(size.scale.rates_hz)),
    ("refinement levels around each peak", lambda size: size.scale.refine_levels),
    ("seeds per point", lambda size: size.scale.num_seeds),
    ("rate-shift timeline (s)", lambda size: size.scale.timeline_s),
    ("HAS trials per choice (EAServe's and each tuned baseline's)", lambda size: size.has_trials),
    ("requests per HAS trial", lambda size: size.has_requests),
    ("request streams per HAS trial", lambda size: size.has_samples),
    ("HAS-convergence seeds (TPE and random)", lambda size: len(size.convergence_seeds)),
    ("B values of the convergence study's grid baseline", lambda size: len(size.grid_batches)),
    ("clip lengths in the video what-if", lambda size: len(size.clip_scales)),
    ("headline sweeps without the residual encoder-call cost", lambda size: int(size.residual_variant)),
    ("HAS searches of the free-in-step-encoder sensitivity (0: the headline's vLLM-like "
     "choices reused)", lambda size: int(size.free_encoder_own_choices)),
    ("models in the controller's traffic-shape study", lambda size: len(size.shape_models)),
    ("GPU-frugal planner in the controller study", lambda size: int(size.controller_frugal)),
    ("controller on the shifts where the optimum moves", lambda size: int(size.mix_shifts)),
    ("headline on 8 x H100 and 8 x H200 measured profiles", lambda size: int(size.measured_headline)),
)


def cuts(plan: EvalSize, full: EvalSize = FULL) -> list[str]:
    """What ``plan`` runs smaller than ``full``, one line each (the quick report lists them)."""
    return [f"{what}: {ours:g} (full run: {theirs:g})" for what, count in _CUT_LINES
            if (ours := count(plan)) != (theirs := count(full))]
