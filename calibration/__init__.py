"""Calibration: model and GPU specs, the analytic roofline profile, fitting.

Start here: :func:`analytic_profile` (model x GPU -> a ParallelProfile),
:func:`load_profile` (a committed profile JSON -> the object that evaluates
it, through :data:`PROFILE_KINDS`), :func:`fit_samples` (measured samples ->
a fitted profile), :func:`sm_share_table` and :func:`cluster_for`. Specs live
as JSON under ``specs/``; committed profiles under ``profiles/``. Background:
docs/profiles.md.
"""

from calibration.analytic import AnalyticProfile, Efficiency, TPStageProfile
from calibration.fit import FitResult, FittedProfile, fit_samples, load_samples
from calibration.measured import MeasuredProfile
from calibration.memory import MemoryBudget, max_decode_batch
from calibration.registry import (
    PROFILE_KINDS,
    SM_SHARE_LEVELS,
    analytic_doc,
    analytic_profile,
    cluster_for,
    fitted_doc,
    load_profile,
    measured_doc,
    profile_from_doc,
    sm_share_table,
)
from calibration.specs import GPUSpec, ModelSpec, gpu_names, gpu_spec, model_names, model_spec

__all__ = [
    "PROFILE_KINDS",
    "SM_SHARE_LEVELS",
    "AnalyticProfile",
    "Efficiency",
    "FitResult",
    "FittedProfile",
    "GPUSpec",
    "MeasuredProfile",
    "MemoryBudget",
    "ModelSpec",
    "TPStageProfile",
    "analytic_doc",
    "analytic_profile",
    "cluster_for",
    "fit_samples",
    "fitted_doc",
    "gpu_names",
    "gpu_spec",
    "load_profile",
    "load_samples",
    "max_decode_batch",
    "measured_doc",
    "model_names",
    "model_spec",
    "profile_from_doc",
    "sm_share_table",
]
