"""``calibration.session``: one way from a config, or from parts, to a run."""

from __future__ import annotations

import pytest

from calibration.session import Overrides, Parts, compose
from easerve.resources import load_config
from easerve_core.plan import resolve
from sim import simulate

CONFIG = "llava15_7b_rtx6000ada.toml"


def test_a_session_simulates_what_its_plan_and_profile_simulate() -> None:
    session = compose(load_config(CONFIG), Overrides(rate_hz=1.5))
    direct = simulate(session.plan, session.sim_profile(), options=session.sim_options())
    ran = session.sim().run()
    assert ran.records.equals(direct.records)
    assert ran.config == direct.config and ran.config["workload"]["rate_hz"] == 1.5
    assert ran.config["sim"] == session.sim_options().to_dict()


def test_compose_resolves_the_config_once_with_its_overrides() -> None:
    config = load_config(CONFIG)
    session = compose(config, Overrides(preset="vllm", tier="strict"))
    assert session.plan.preset == "vllm"
    assert session.plan.slo is not None and session.plan.slo.tier == "strict"
    plain = resolve(config, session.profile, base_cluster=session.plan.cluster, preset="vllm", tier="strict")
    assert plain.deployment == session.plan.deployment and plain.requests == session.plan.requests


def test_recompose_keeps_the_profile_and_changes_only_what_it_is_told() -> None:
    base = compose(load_config(CONFIG), Overrides(preset="vllm"))
    faster = base.recompose(rate_hz=3.0)
    assert faster.profile is base.profile
    assert faster.plan.preset == "vllm" and faster.plan.config["workload"]["rate_hz"] == 3.0
    assert faster.plan.requests[-1].arrival_s < base.plan.requests[-1].arrival_s


def test_replan_moves_the_session_to_another_deployment() -> None:
    base = compose(load_config(CONFIG))
    other = base.plan.deployment.with_(max_encode_batch=1)
    moved = base.replan(deployment=other)
    assert moved.plan.deployment.max_encode_batch == 1 and moved.profile is base.profile
    assert moved.plan.config["deployment"]["max_encode_batch"] == 1


def test_parts_compose_a_plan_and_refuse_overrides() -> None:
    base = compose(load_config(CONFIG))
    plan = base.plan
    parts = Parts(deployment=plan.deployment, requests=plan.requests[:20], cluster=plan.cluster,
                  profile=base.profile, slo=plan.slo)
    session = compose(parts)
    assert session.plan.sm_table_source == "derived" and len(session.plan.requests) == 20
    assert session.sim().run().summary(session.plan.slo).num_requests == 20
    with pytest.raises(ValueError, match="overrides apply to a config"):
        compose(parts, Overrides(rate_hz=1.0))
    with pytest.raises(ValueError, match="not composed from a config"):
        session.recompose(rate_hz=1.0)


def test_a_live_model_without_a_profile_has_a_session_but_no_simulator() -> None:
    session = compose(load_config("tiny_qwen25vl_cpu.toml"), Overrides(need_profile=False))
    assert session.profile is None and session.plan.sm_table_source == "config"
    assert session.live().options.device == session.live_options().device
    with pytest.raises(ValueError, match="has no profile to simulate with"):
        session.sim().run()
