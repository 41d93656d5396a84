"""build_recipe / write_recipe: the engine table, validation first, determinism, the weighted split."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest

from easerve.recipes import ENGINES, build_recipe, write_recipe
from easerve.recipes.common import Instance, split_cycle
from easerve.resources import load_config
from easerve_core.deployment import Deployment, StageGroup
from tests.recipes.cases import CASES, ENGINE_NAMES


def test_engine_table_is_the_three_engines() -> None:
    assert sorted(ENGINES) == list(ENGINE_NAMES)


def test_unknown_engine_lists_the_known() -> None:
    config = load_config("llava34b_rtx6000ada.toml")
    with pytest.raises(ValueError) as err:
        build_recipe("trt", deployment=config.deployment, config=config, rate_hz=None)
    assert str(err.value) == "emit: unknown engine 'trt'; known: dynamo, sglang, vllm"


def test_aggregated_is_refused_naming_the_field() -> None:
    config = load_config("llava34b_rtx6000ada.toml")
    agg = Deployment(encode=StageGroup(num_workers=0), prefill=StageGroup(num_workers=0),
                     decode=StageGroup(num_workers=4, tp=2), architecture="aggregated")
    with pytest.raises(ValueError, match=r"deployment\.architecture"):
        build_recipe("vllm", deployment=agg, config=config, rate_hz=None)


def test_a_deployment_larger_than_the_cluster_is_refused() -> None:
    config = load_config("llava34b_rtx6000ada.toml")
    big = config.deployment.with_(decode=StageGroup(num_workers=8, tp=2))
    with pytest.raises(ValueError, match="GPUs"):
        build_recipe("sglang", deployment=big, config=config, rate_hz=None)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_recipes_are_deterministic_and_carry_the_version(engine: str) -> None:
    make, rate = CASES["llava34b"]
    config = make()
    one = build_recipe(engine, deployment=config.deployment, config=config, rate_hz=rate)
    two = build_recipe(engine, deployment=config.deployment, config=config, rate_hz=rate)
    assert one == two
    assert one.engine == engine and one.engine_version in one.files["RECIPE.md"]
    assert {"launch.sh", "RECIPE.md"} <= set(one.files)
    for text in one.files.values():
        assert str(Path.cwd()) not in text and "/work/" not in text


def test_hf_id_comes_from_the_spec_and_a_tiny_model_is_noted() -> None:
    config = load_config("llava34b_rtx6000ada.toml")
    recipe = build_recipe("vllm", deployment=config.deployment, config=config, rate_hz=None)
    assert "vllm serve llava-hf/llava-v1.6-34b-hf" in recipe.files["launch.sh"]
    tiny = load_config("tiny_llava_cpu.toml")
    recipe = build_recipe("vllm", deployment=tiny.deployment, config=tiny, rate_hz=None)
    assert any("no model spec" in n for n in recipe.notes)
    assert any("tiny" in n for n in recipe.notes)


def test_write_recipe_writes_every_file(tmp_path: Path) -> None:
    config = load_config("qwen25vl32b_rtx6000ada.toml")
    paths = write_recipe("dynamo", deployment=config.deployment, config=config, rate_hz=0.5, folder=tmp_path)
    assert sorted(p.name for p in paths) == ["RECIPE.md", "dgd.yaml", "launch.sh"]
    recipe = build_recipe("dynamo", deployment=config.deployment, config=config, rate_hz=0.5)
    assert all(p.read_text() == recipe.files[p.name] for p in paths)


def test_write_recipe_validates_before_writing(tmp_path: Path) -> None:
    config = load_config("qwen25vl32b_rtx6000ada.toml")
    with pytest.raises(ValueError, match="unknown engine"):
        write_recipe("x", deployment=config.deployment, config=config, rate_hz=None, folder=tmp_path)
    assert list(tmp_path.iterdir()) == []


def _instances(role: str, n: int) -> list[Instance]:
    return [Instance(role=role, index=i, gpus=(i,), node=0, gpus_per_node=8, port=i) for i in range(n)]


@pytest.mark.parametrize(("local", "remote", "s"), [(1, 1, 0.5), (1, 1, 0.3), (2, 2, 0.75), (3, 1, 0.55),
                                                   (1, 2, 0.1), (2, 1, 0.0), (1, 1, 1.0)])
def test_split_cycle_gives_the_remote_share_and_balances_instances(local: int, remote: int, s: float) -> None:
    cycle = split_cycle(_instances("local-prefill", local), _instances("prefill", remote), s)
    share = Fraction(sum(i.role == "prefill" for i in cycle), len(cycle))
    assert share == Fraction(s).limit_denominator(20)
    for role in ("local-prefill", "prefill"):
        counts = {i.index: 0 for i in cycle if i.role == role}
        for i in cycle:
            if i.role == role:
                counts[i.index] += 1
        assert len(set(counts.values())) <= 1


def test_s_zero_launches_no_prefill_workers() -> None:
    make, rate = CASES["s0_local_prefill"]
    config = make()
    dep = config.deployment.with_(prefill=StageGroup(num_workers=1, tp=2),
                                  decode=StageGroup(num_workers=1, tp=2))
    with_prefill = replace(config, deployment=dep)
    recipe = build_recipe("sglang", deployment=with_prefill.deployment, config=with_prefill, rate_hz=rate)
    assert "# prefill-0 on" not in recipe.files["launch.sh"]
    assert any("s = 0" in n for n in recipe.notes)
