"""The paper's models on other servers: a modality's setup on 8 x H100 SXM or 8 x H200.

:func:`measured_setup` builds a modality's setup (its example config's model,
mix, deployment and number of GPUs) on another GPU, priced by a measured
profile built in memory from aiconfigurator-core's vLLM kernel tables for that
system (:mod:`calibration.aiconfigurator`, :class:`calibration.MeasuredProfile`:
each op from the tables, the roofline with the GPU's fitted constants for the
ops they lack, as ``easerve profile build`` does). :func:`roofline_setup` is the
same server priced by the analytic roofline with today's hand-set constants, so
a change of GPU and a change of profile kind can be told apart.

Both keep the paper-anchored per-call costs of the RTX 6000 Ada setups
(:func:`~easerve.experiments.anchor.paper_anchored_efficiency`): the measured
host preprocessing (CPU work, not the GPU's) and the residual per-call cost,
which one measurement on the RTX 6000 Ada implies and nothing on these GPUs
re-measures (docs/results/README.md, "The headline on measured hardware").
"""

from __future__ import annotations

from dataclasses import replace

from calibration import Efficiency, MeasuredProfile, analytic_profile, gpu_spec, model_spec
from calibration import aiconfigurator as aic
from calibration.measured import model_tables
from calibration.optables import OpTables
from calibration.roofline_fit import fitted_efficiency
from easerve.experiments.anchor import paper_anchored_efficiency
from easerve.experiments.paper import MODALITIES
from easerve.experiments.setup import Setup, setup_on

#: the servers of the measured headline: aiconfigurator-core's system names (8 GPUs each)
MEASURED_SYSTEMS = ("h100_sxm", "h200_sxm")
#: the engine whose measured kernels price them
ENGINE = "vllm"
#: the profile kinds :func:`setup_for` builds
PROFILE_KINDS = ("measured", "roofline")


def gpu_of(system: str) -> str:
    """easerve's GPU spec for an aiconfigurator system, refusing one it does not map."""
    if system not in aic.GPU_OF_SYSTEM:
        raise ValueError(f"unknown system {system!r}; known: {', '.join(aic.GPU_OF_SYSTEM)}")
    return aic.GPU_OF_SYSTEM[system]


def _anchored_parts(modality: str, base: Efficiency, residual: bool) -> Efficiency:
    """``base`` with the paper-anchored host preprocessing and residual of ``modality``."""
    anchored = paper_anchored_efficiency(modality=modality, residual=residual)
    return replace(base, host_preprocess_s_per_item=anchored.host_preprocess_s_per_item,
                   host_preprocess_s_per_mm_token=anchored.host_preprocess_s_per_mm_token,
                   encode_call_residual_s=anchored.encode_call_residual_s)


def measured_efficiency(modality: str, gpu: str, *, residual: bool = True) -> Efficiency:
    """The measured profile's roofline (for the ops the tables lack): ``gpu``'s committed fitted
    constants (hand-set where none are committed), with the anchored per-call costs."""
    return _anchored_parts(modality, fitted_efficiency(gpu) or Efficiency(), residual)


def measured_setup(modality: str, system: str, *, tables: OpTables | None = None,
                   residual: bool = True) -> Setup:
    """``modality``'s setup on 8 GPUs of ``system``, priced from measured vLLM kernels.

    ``tables`` are the system's measured tables (:func:`load_tables`; read from the
    installed database when not given, the ``easerve[measured]`` extra).
    """
    if modality not in MODALITIES:
        raise ValueError(f"unknown modality {modality!r}; known: {', '.join(MODALITIES)}")
    gpu = gpu_of(system)
    tables = load_tables(system) if tables is None else tables
    spec = model_spec(MODALITIES[modality][0])
    eff = measured_efficiency(modality, gpu, residual=residual)
    profile = MeasuredProfile(model=spec, gpu=gpu_spec(gpu), tables=model_tables(tables, spec),
                              database={"source": "aiconfigurator", "package": aic.PINNED,
                                        "system": system, "engine": ENGINE},
                              efficiency=eff)
    return setup_on(modality, profile, efficiency=eff, gpu=gpu)


def roofline_setup(modality: str, system: str, *, residual: bool = True) -> Setup:
    """``modality``'s setup on 8 GPUs of ``system``, priced by the roofline with the hand-set
    constants every RTX 6000 Ada result uses (the paper-anchored efficiency)."""
    if modality not in MODALITIES:
        raise ValueError(f"unknown modality {modality!r}; known: {', '.join(MODALITIES)}")
    gpu = gpu_of(system)
    eff = paper_anchored_efficiency(modality=modality, residual=residual)
    profile = analytic_profile(MODALITIES[modality][0], gpu, efficiency=eff)
    return setup_on(modality, profile, efficiency=eff, gpu=gpu)


def have_database() -> bool:
    """Whether the measured kernel database is installed (the ``easerve[measured]`` extra)."""
    try:
        aic.check_db(None)
    except ValueError:
        return False
    return True


def load_tables(system: str) -> OpTables:
    """``system``'s measured tables of :data:`ENGINE` (the newest version the database holds)."""
    return aic.load_tables(system, ENGINE)


def setup_for(modality: str, system: str, kind: str, *, tables: OpTables | None = None) -> Setup:
    """:func:`measured_setup` or :func:`roofline_setup` by ``kind`` (:data:`PROFILE_KINDS`)."""
    if kind == "measured":
        return measured_setup(modality, system, tables=tables)
    if kind == "roofline":
        return roofline_setup(modality, system)
    raise ValueError(f"unknown profile kind {kind!r}; known: {', '.join(PROFILE_KINDS)}")
