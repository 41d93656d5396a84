"""The fixed deployments the recipe tests emit: the shipped configs' own, and three more shapes."""

from __future__ import annotations

from dataclasses import replace

from easerve.recipes import Recipe, build_recipe
from easerve.resources import load_config
from easerve_core.config import ExperimentConfig
from easerve_core.deployment import Deployment, StageGroup

ENGINE_NAMES = ("dynamo", "sglang", "vllm")


def _shipped(name: str) -> ExperimentConfig:
    return load_config(name)


def _s0() -> ExperimentConfig:
    """All prefill local on two E+P workers (s = 0), LLaVA on 8 GPUs."""
    config = _shipped("llava34b_rtx6000ada.toml")
    dep = Deployment(encode=StageGroup(num_workers=2, tp=2), prefill=StageGroup(num_workers=0, tp=2),
                     decode=StageGroup(num_workers=2, tp=2), max_encode_batch=4, remote_fraction=0.0,
                     rate_hint_hz=1.5)
    return replace(config, deployment=dep)


def _two_nodes() -> ExperimentConfig:
    """E/P/D (s = 0.75) over two nodes of 8 GPUs: 2 E+P x TP 2, 2 P x TP 2, 4 D x TP 2, packed."""
    config = _shipped("qwen25vl32b_rtx6000ada.toml")
    dep = Deployment(encode=StageGroup(num_workers=2, tp=2), prefill=StageGroup(num_workers=2, tp=2),
                     decode=StageGroup(num_workers=4, tp=2), max_encode_batch=8, remote_fraction=0.75)
    return replace(config, deployment=dep, cluster={**config.cluster, "num_gpus": 16, "num_nodes": 2})


def _epd_wide() -> ExperimentConfig:
    """s = 1 with three TP-1 encoders and two Prefill workers (the proxy's lists and the router's)."""
    config = _shipped("ultravox27b_rtx6000ada.toml")
    dep = Deployment(encode=StageGroup(num_workers=3, tp=1), prefill=StageGroup(num_workers=2, tp=2),
                     decode=StageGroup(num_workers=1, tp=1), max_encode_batch=16, remote_fraction=1.0,
                     sm_sharing="none")
    return replace(config, deployment=dep)


#: case name -> (config, the target rate passed to the recipe)
CASES = {
    "llava34b": (lambda: _shipped("llava34b_rtx6000ada.toml"), 2.0),
    "qwen25vl32b": (lambda: _shipped("qwen25vl32b_rtx6000ada.toml"), 0.5),
    "ultravox27b": (lambda: _shipped("ultravox27b_rtx6000ada.toml"), 4.0),
    "s0_local_prefill": (_s0, None),
    "two_nodes": (_two_nodes, 1.0),
    "epd_wide": (_epd_wide, 3.0),
}


def case_recipe(engine: str, case: str) -> Recipe:
    """``engine``'s recipe of ``case``: the case's deployment and config, at its target rate."""
    make, rate = CASES[case]
    config = make()
    return build_recipe(engine, deployment=config.deployment, config=config, rate_hz=rate)
