"""Memory limits, rejection and bad input: loud, named, never silent."""

from __future__ import annotations

from dataclasses import fields

import pytest

from easerve_core import Cluster, Deployment, Modality, Request, StageGroup
from easerve_core.plan import assemble
from easerve_core.presets import apply_preset
from sim import SimOptions, simulate
from tests.sim.conftest import AffineProfile, MemoryProfile


def _req(i: int, prompt: int, out: int, at: float = 0.0) -> Request:
    return Request(request_id=i, arrival_s=at, modality=Modality.IMAGE, prompt_tokens=prompt,
                   output_tokens=out, mm_tokens_per_item=(100,))


def test_a_request_that_can_never_fit_is_rejected(epd: Deployment, cluster: Cluster) -> None:
    profile = MemoryProfile(stage=AffineProfile(), kv_tokens_per_gpu=10_000)  # decode TP2: 20,000
    reqs = [_req(0, 500, 100), _req(1, 19_950, 100, 0.1), _req(2, 500, 100, 0.2)]
    rec = simulate(assemble(epd, reqs, cluster=cluster, profile=profile),
                   profile).records.set_index("request_id")
    assert list(rec["status"]) == ["ok", "rejected", "ok"]
    assert "20000" in rec.loc[1, "error"] and "KV tokens" in rec.loc[1, "error"]
    assert rec.loc[1, "finish_s"] != rec.loc[1, "finish_s"]  # NaN: never ran


def test_kv_capacity_limits_the_decode_batch(cluster: Cluster) -> None:
    """Two sequences of 6,000 KV tokens cannot share a 10,000-token decode worker."""
    profile = MemoryProfile(stage=AffineProfile(decode_base_s=0.01), kv_tokens_per_gpu=10_000)
    dep = Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                     decode=StageGroup(num_workers=1), remote_fraction=1.0, sm_sharing="none",
                     max_encode_batch=1)
    rec = simulate(assemble(dep, [_req(0, 5_800, 100), _req(1, 5_800, 100)], cluster=cluster,
                           profile=profile), profile).records
    first, second = rec.iloc[0], rec.iloc[1]
    assert second["finish_s"] - first["finish_s"] >= 99 * 0.01 - 1e-9  # second waited for room


def test_max_num_decode_seqs_caps_the_batch(cluster: Cluster) -> None:
    dep = Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                     decode=StageGroup(num_workers=1), remote_fraction=1.0, sm_sharing="none",
                     max_encode_batch=4, max_num_decode_seqs=2)
    reqs = [_req(i, 10, 50) for i in range(4)]
    result = simulate(assemble(dep, reqs, cluster=cluster, profile=AffineProfile()), AffineProfile())
    decode = result.stage_log[result.stage_log["stage"] == "decode"]
    assert decode["batch_size"].max() == 2


@pytest.mark.parametrize(("change", "field"), [
    ({"decode": StageGroup(num_workers=4, tp=4)}, "GPUs"),
])
def test_too_many_gpus(epd: Deployment, cluster: Cluster, change: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        simulate(assemble(epd.with_(**change), [_req(0, 10, 5)], cluster=cluster, profile=AffineProfile()),
                 AffineProfile())


def test_weights_that_do_not_fit(epd: Deployment, cluster: Cluster) -> None:
    profile = MemoryProfile(stage=AffineProfile(), min_tp=4)
    with pytest.raises(ValueError, match=r"decode\.tp"):
        simulate(assemble(epd, [_req(0, 10, 5)], cluster=cluster, profile=profile), profile)


def test_local_prefill_needs_the_lm_on_the_encode_worker(epd: Deployment, cluster: Cluster) -> None:
    profile = MemoryProfile(stage=AffineProfile(), min_tp=2)
    with pytest.raises(ValueError, match=r"encode\.tp"):
        simulate(assemble(epd, [_req(0, 10, 5)], cluster=cluster, profile=profile), profile)
    simulate(assemble(epd.with_(remote_fraction=1.0, sm_sharing="none"), [_req(0, 10, 5)], cluster=cluster,
                     profile=profile), profile)


def test_duplicate_ids_are_refused(epd: Deployment, cluster: Cluster) -> None:
    with pytest.raises(ValueError, match="request_id"):
        simulate(assemble(epd, [_req(0, 10, 5), _req(0, 10, 5)], cluster=cluster, profile=AffineProfile()),
                 AffineProfile())


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"dispatch": "fastest"}, "sim.dispatch"),
    ({"prefill_max_batch_tokens": 0}, "sim.prefill_max_batch_tokens"),
    ({"time_slice_overhead_frac": 1.0}, "sim.time_slice_overhead_frac"),
    ({"time_slice_overhead_frac": float("nan")}, "sim.time_slice_overhead_frac"),
])
def test_bad_options_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SimOptions(**kwargs)


def test_unknown_option_lists_the_known() -> None:
    with pytest.raises(ValueError, match=r"known: .*dispatch"):
        SimOptions.from_dict({"speed": 2})


def test_unknown_preset_lists_the_known(epd: Deployment, cluster: Cluster) -> None:
    with pytest.raises(ValueError, match="known: dynamo, easerve, fixed-batch, vllm"):
        apply_preset("sglang", epd, cluster)


def test_presets_map_the_deployment(epd: Deployment, cluster: Cluster) -> None:
    assert apply_preset("easerve", epd, cluster) == epd
    dynamo = apply_preset("dynamo", epd, cluster)
    assert (dynamo.max_encode_batch, dynamo.batching, dynamo.remote_fraction,
            dynamo.sm_sharing) == (1, "fixed", 1.0, "none")
    fixed = apply_preset("fixed-batch", epd, cluster)
    assert (fixed.max_encode_batch, fixed.batching, fixed.batch_timeout_s) == (8, "fixed", 0.05)
    vllm = apply_preset("vllm", epd, cluster)
    assert vllm.architecture == "aggregated"
    assert (vllm.decode.num_workers, vllm.decode.tp, vllm.num_gpus) == (4, 2, 8)
    with pytest.raises(ValueError, match=r"prefill\.num_workers"):
        apply_preset("dynamo", epd.with_(prefill=StageGroup(num_workers=0), remote_fraction=0.0),
                     cluster)


def test_options_come_in_groups_read_from_sub_tables() -> None:
    options = SimOptions.from_dict({"dispatch": "least-loaded", "record": {"queues": False},
                                    "host": {"num_host_cores": 2, "warmup_decode_s": [0.1]}})
    assert options.dispatch == "least-loaded"
    assert (options.record.utilization, options.record.queues) == (True, False)
    assert options.host.num_host_cores == 2.0 and options.host.warmup_decode_s == (0.1,)
    assert len(fields(SimOptions)) <= 10
    over = SimOptions.from_dict({"host": {"stall_s": 0.2}}, base=options)
    assert over.host.num_host_cores == 2.0 and over.host.stall_s == 0.2  # a group merges key by key
    assert SimOptions.from_dict(options.to_dict()) == options  # the resolved table reads back


@pytest.mark.parametrize(("table", "message"), [
    ({"num_host_cores": 2}, r"unknown sim field\(s\): num_host_cores \(host effects live in \[sim.host\]\)"),
    ({"host": {"cores": 2}}, r"unknown sim.host field\(s\): cores; known: .*num_host_cores"),
    ({"host": 2}, r"sim.host must be a table"),
    ({"record": {"utilization": "yes"}}, r"sim.record.utilization must be true or false"),
    ({"host": {"stall_s": -1}}, r"host.stall_s must be >= 0"),
])
def test_bad_groups_name_the_field(table: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SimOptions.from_dict(table)
