"""The run plan: resolved once from a config (presets, rate, SLO, SM-share table), derived again by replan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from easerve_core import Cluster, Modality, Request, SMShareTable
from easerve_core.config import ExperimentConfig
from easerve_core.plan import assemble, derived_table, replan, resolve
from tests.profiles import ConstantStages


class Encoder(ConstantStages):
    """Encode latency that drops below exclusive only at shares >= 0.6 for small batches."""

    def encode_s(self, items: Sequence[int], sm_share: float = 1.0) -> float:
        fill = min(1.0, 0.3 * len(items))  # a batch of b items fills 0.3 b of the GPU
        return 0.01 * len(items) / min(1.0, sm_share / fill)


class TokenEncoder(ConstantStages):
    """Encode latency in proportion to the items' LM tokens."""

    def encode_s(self, items: Sequence[int], sm_share: float = 1.0) -> float:
        return 1e-3 * sum(items) / sm_share


PROFILE = Encoder()
BASE = Cluster(gpu="cpu", num_gpus=8, link_bytes_per_s=1e12, link_latency_s=0.0, num_links=4)


def _config(**tables: Any) -> ExperimentConfig:
    data: dict[str, Any] = {
        "seed": 3, "model": {"name": "m"}, "cluster": {"gpu": "cpu", "num_gpus": 6},
        "deployment": {"encode": {"num_workers": 1}, "prefill": {"num_workers": 1, "tp": 1},
                       "decode": {"num_workers": 2, "tp": 1}, "max_encode_batch": 4,
                       "remote_fraction": 0.5, "rate_hint_hz": 2.0},
        "workload": {"mix": "ultravox-audio", "rate_hz": 2.0, "num_requests": 30},
        "sim": {"dispatch": "least-loaded"},
    }
    data.update(tables)
    return ExperimentConfig.from_dict(data)


def test_resolve_applies_preset_cluster_rate_and_tier_once() -> None:
    plan = resolve(_config(), PROFILE, base_cluster=BASE, preset="dynamo", rate_hz=4.0, tier="tight")
    assert plan.preset == "dynamo" and plan.deployment.max_encode_batch == 1
    assert plan.deployment.remote_fraction == 1.0 and plan.deployment.rate_hint_hz == 4.0
    assert plan.cluster == Cluster(gpu="cpu", num_gpus=6, link_bytes_per_s=1e12, link_latency_s=0.0,
                                   num_links=4)  # the config's keys over the hardware's defaults
    assert plan.workload is not None and plan.workload.mean_rate_hz == 4.0
    assert len(plan.requests) == 30 and plan.seed == 3
    assert plan.slo is not None and plan.slo.tier == "tight"
    assert plan.engine("sim") == {"dispatch": "least-loaded"} and plan.engine("live") == {}
    # the resolved config reads back as a config that resolves to the same plan
    again = resolve(ExperimentConfig.from_dict(dict(plan.config)), PROFILE, base_cluster=BASE)
    assert again.deployment == plan.deployment and again.requests == plan.requests
    assert again.slo == plan.slo and again.cluster == plan.cluster


def test_the_stream_is_drawn_with_the_seed_or_given() -> None:
    a, b = (resolve(_config(), PROFILE, base_cluster=BASE) for _ in range(2))
    assert a.requests == b.requests
    mine = [Request(request_id=i, arrival_s=1.0 - 0.1 * i, modality=Modality.AUDIO, prompt_tokens=4,
                    output_tokens=2, mm_tokens_per_item=(50,)) for i in range(3)]
    given = resolve(_config(), PROFILE, base_cluster=BASE, requests=mine)
    assert [r.request_id for r in given.requests] == [2, 1, 0]  # arrival order, once for both engines
    with pytest.raises(ValueError, match="request_id values must be unique"):
        resolve(_config(), PROFILE, base_cluster=BASE, requests=[mine[0], mine[0]])
    with pytest.raises(ValueError, match="--rate must be a positive number"):
        resolve(_config(), PROFILE, base_cluster=BASE, rate_hz=-1.0)


def test_item_scale_shrinks_the_drawn_items_and_the_slo_s_mix_once() -> None:
    full = resolve(_config(), PROFILE, base_cluster=BASE)
    half = resolve(_config(), PROFILE, base_cluster=BASE, item_scale=0.5)
    assert [r.arrival_s for r in half.requests] == [r.arrival_s for r in full.requests]  # same draw
    assert [r.mm_tokens_per_item for r in half.requests] == [
        tuple(max(1, round(t * 0.5)) for t in r.mm_tokens_per_item) for r in full.requests]
    assert half.workload is not None and full.workload is not None
    mix = full.workload.mix
    assert half.workload.mix.item_tokens == tuple(max(1, round(t * 0.5)) for t in mix.item_tokens)
    by_tokens = TokenEncoder()
    small, big = (resolve(_config(), by_tokens, base_cluster=BASE, item_scale=k) for k in (0.5, 1.0))
    assert small.slo is not None and big.slo is not None and small.slo.ttft_s < big.slo.ttft_s  # small items
    mine = [Request(request_id=0, arrival_s=0.0, modality=Modality.AUDIO, prompt_tokens=4,
                    output_tokens=2, mm_tokens_per_item=(50,))]
    given = resolve(_config(), PROFILE, base_cluster=BASE, requests=mine, item_scale=0.5)
    assert given.requests[0].mm_tokens_per_item == (50,)  # a given stream runs as given
    with pytest.raises(ValueError, match="item_scale"):
        resolve(_config(), PROFILE, base_cluster=BASE, item_scale=0.0)


def test_sm_share_table_sources_in_order() -> None:
    given, config, doc = SMShareTable({1: 0.2}), {"1": 0.4}, SMShareTable({1: 0.6})
    cases = [
        (dict(sm_table=given, profile_table=doc), {"profile": {"sm_share_table": config}}, "given", given),
        (dict(profile_table=doc), {"profile": {"sm_share_table": config}}, "config", SMShareTable({1: 0.4})),
        (dict(profile_table=doc), {}, "profile", doc),
    ]
    for kwargs, tables, source, table in cases:
        plan = resolve(_config(**tables), PROFILE, base_cluster=BASE, **kwargs)
        assert (plan.sm_table_source, plan.sm_table) == (source, table)
    derived = resolve(_config(), PROFILE, base_cluster=BASE)
    assert derived.sm_table_source == "derived"
    assert derived.sm_table == derived_table(derived.deployment, derived.requests, PROFILE)
    assert derived.sm_table.batch_sizes == (1, 2, 3, 4)  # 1..B
    assert derived.describe()["sm_share_table"] == derived.sm_table.to_dict()


def test_no_profile_and_no_table() -> None:
    with pytest.raises(ValueError, match=r"deployment.sm_sharing: 'dynamic' needs an SM-share table"):
        resolve(_config(), None, base_cluster=BASE)
    remote = _config(deployment={"encode": {"num_workers": 1}, "prefill": {"num_workers": 1},
                                 "decode": {"num_workers": 1}, "sm_sharing": "none"})
    plan = resolve(remote, None, base_cluster=BASE)
    assert (plan.sm_table_source, plan.sm_table, plan.slo) == ("none", SMShareTable({1: 1.0}), None)


def test_replan_derives_a_derived_table_again_and_keeps_any_other() -> None:
    plan = resolve(_config(), PROFILE, base_cluster=BASE)
    bigger = replan(plan, PROFILE, deployment=plan.deployment.with_(max_encode_batch=8))
    assert bigger.sm_table.batch_sizes == tuple(range(1, 9)) and bigger.preset == "easerve"
    assert bigger.config["deployment"]["max_encode_batch"] == 8
    with pytest.raises(ValueError, match="needs the profile"):
        replan(plan, deployment=plan.deployment.with_(max_encode_batch=8))
    fixed = resolve(_config(), PROFILE, base_cluster=BASE, sm_table=SMShareTable({1: 0.2}))
    assert replan(fixed,
                  deployment=fixed.deployment.with_(max_encode_batch=8)).sm_table == SMShareTable({1: 0.2})
    vllm = replan(plan, PROFILE, deployment=plan.deployment, preset="vllm", seed=9)
    assert vllm.deployment.architecture == "aggregated" and vllm.seed == 9 and vllm.config["seed"] == 9
    with pytest.raises(ValueError, match="a preset applies to a deployment"):
        replan(plan, preset="vllm")


def test_assemble_checks_the_fit() -> None:
    plan = resolve(_config(), PROFILE, base_cluster=BASE)
    with pytest.raises(ValueError, match="needs 4 GPUs but the cluster has 2"):
        assemble(plan.deployment, plan.requests, cluster=Cluster(gpu="cpu", num_gpus=2), profile=PROFILE)


def test_absolute_slo_limits_and_attainment_in_the_config_reach_the_plan_and_its_resolved_config() -> None:
    table = {"tier": "s2", "ttft_s": 12.5, "tpot_s": 0.08, "attainment": 0.9}
    plan = resolve(_config(slo=table), PROFILE, base_cluster=BASE)
    assert plan.slo is not None
    slo = plan.slo
    assert (slo.ttft_s, slo.tpot_s, slo.tier, slo.attainment) == (12.5, 0.08, "custom", 0.9)
    assert plan.config["slo"] == table
    again = resolve(ExperimentConfig.from_dict(dict(plan.config)), PROFILE, base_cluster=BASE)
    assert again.slo == plan.slo
    # both limits absolute: no profile needed; a tier override does not touch them
    bare = resolve(_config(slo=table, profile={"sm_share_table": {"1": 0.5}}), None, base_cluster=BASE,
                   tier="loose")
    assert bare.slo == plan.slo and bare.config["slo"]["tier"] == "loose"
    # one limit absolute: the other is the tier's
    tight = resolve(_config(), PROFILE, base_cluster=BASE, tier="tight")
    half = resolve(_config(slo={"tier": "tight", "ttft_s": 99.0}), PROFILE, base_cluster=BASE)
    assert half.slo is not None and tight.slo is not None
    assert (half.slo.ttft_s, half.slo.tpot_s) == (99.0, tight.slo.tpot_s)
    # the default config writes [slo] as before
    assert resolve(_config(), PROFILE, base_cluster=BASE).config["slo"] == {"tier": "moderate"}


def test_check_modalities_takes_text_always_and_names_the_field():
    from easerve_core.request import Modality, Request, check_modalities

    def req(i, modality, items=(576,)):
        return Request(request_id=i, arrival_s=float(i), modality=modality, prompt_tokens=8,
                       output_tokens=4, mm_tokens_per_item=items)

    stream = [req(0, Modality.IMAGE), req(1, Modality.TEXT, ())]
    check_modalities(stream, ["image"], model="m")  # text rides along with any model
    with pytest.raises(ValueError, match=r"^workload.trace: audio requests, but model m takes image, "
                                         r"video input$"):
        check_modalities([*stream, req(2, Modality.AUDIO)], ["video", "image"], model="m",
                         field_name="workload.trace")


def test_outputs_end_where_the_model_context_does():
    from easerve_core.plan import within_context
    from easerve_core.request import Modality, Request

    def req(i, prompt, output):
        return Request(request_id=i, arrival_s=float(i), modality=Modality.IMAGE, prompt_tokens=prompt,
                       output_tokens=output, mm_tokens_per_item=(2928,))

    stream = (req(0, 100, 50), req(1, 100, 2000), req(2, 1167, 5))
    assert within_context(stream, None) == stream  # no context known: as given
    capped = within_context(stream, 4096)
    assert [r.output_tokens for r in capped] == [50, 4096 - 3028, 1]  # vLLM's max_model_len
    with pytest.raises(ValueError, match=r"^workload.trace: 2 request\(s\) have an input .* context of "
                                         r"4,096 tokens \(request 2: 4,096\); an engine refuses them$"):
        within_context((req(2, 1168, 5), req(3, 2000, 5)), 4096, field_name="workload.trace")


def test_a_run_reports_the_outputs_that_end_at_the_context_and_keeps_the_count_on_replan() -> None:
    from dataclasses import replace as with_fields

    plan = resolve(_config(), PROFILE, base_cluster=BASE)
    assert plan.outputs_at_context == 0 and "outputs_at_context" not in plan.describe()
    longest = max(r.input_tokens + r.output_tokens for r in plan.requests)
    context = longest - 1  # the longest request loses one output token, any as long with it
    capped = with_fields(plan, max_context_tokens=context)
    expected = sum(r.input_tokens + r.output_tokens >= context for r in plan.requests)
    assert capped.outputs_at_context == expected >= 1
    assert capped.describe()["outputs_at_context"] == expected
    assert capped.describe()["max_context_tokens"] == context
    moved = replan(capped, deployment=capped.deployment, profile=PROFILE)  # already capped: still counted
    assert moved.outputs_at_context == expected


def test_a_spec_file_model_is_titled_by_its_stem() -> None:
    from easerve_core.config import model_label

    assert model_label("/work/configs/specs/models/qwen2-vl-7b.json") == "qwen2-vl-7b"
    assert model_label("llava-v1.6-34b") == "llava-v1.6-34b"
