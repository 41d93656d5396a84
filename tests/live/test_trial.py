"""100-request trials on each shipped tiny config: every request accounted for."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pandas as pd
import pytest

from calibration.session import Overrides, compose
from easerve_core.plan import replan
from easerve_core.request import RECORD_COLUMNS
from easerve_core.result import STAGE_LOG_COLUMNS, UTILIZATION_COLUMNS
from live import run_trial
from live.trial import Trial
from runtime.configs import load_experiment

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
STAMPS = ["arrival_s", "encode_start_s", "encode_end_s", "prefill_start_s", "first_token_s", "finish_s"]


def _check_routes(records: pd.DataFrame, s: float) -> None:
    """Per encode worker, in routing order, remote count stays within one of s * n."""
    for _, mine in records.groupby("encode_worker"):
        ordered = mine.sort_values(["encode_end_s", "arrival_s", "request_id"])
        remote = (ordered["route"] == "remote").to_numpy(dtype=int).cumsum()
        n = range(1, len(ordered) + 1)
        assert all(abs(r - s * k) < 1 for r, k in zip(remote, n, strict=True))


@pytest.mark.parametrize("name", ["tiny_llava_cpu", "tiny_qwen25vl_cpu", "tiny_qwen2audio_cpu"])
def test_hundred_request_trial(name, no_orphans):
    config = load_experiment(CONFIGS / f"{name}.toml")
    plan = compose(config, Overrides(need_profile=False)).plan
    assert plan.sm_table_source == "config"  # the file's [profile] sm_share_table
    result = run_trial(plan)
    assert result.meta["sm_share_table"] == plan.sm_table.to_dict()
    rec = result.records
    assert list(rec.columns) == list(RECORD_COLUMNS)
    assert len(rec) == 100 and rec["request_id"].is_unique
    assert (rec["status"] == "ok").all(), rec.loc[rec["status"] != "ok", "error"].tolist()
    for early, late in itertools.pairwise(STAMPS):
        assert (rec[early] <= rec[late]).all(), f"{early} > {late}"
    dep = config.deployment
    assert rec["encode_batch_size"].max() <= dep.max_encode_batch
    assert rec["encode_worker"].notna().all() and rec["decode_worker"].notna().all()
    assert set(rec["route"]) <= {"local", "remote"}
    _check_routes(rec, dep.remote_fraction)
    log = result.stage_log
    assert set(STAGE_LOG_COLUMNS) <= set(log.columns)
    assert set(log["stage"]) == {"encode", "prefill", "decode"}
    assert (log.loc[log["stage"] == "encode", "batch_size"] <= dep.max_encode_batch).all()
    assert log.loc[log["stage"] == "prefill", "batch_size"].sum() == 100
    assert list(result.utilization.columns) == list(UTILIZATION_COLUMNS)
    assert result.engine == "live" and result.config["live"]["mm_token_scale"] > 0


@pytest.mark.parametrize("preset", ["easerve", "dynamo", "fixed-batch", "vllm"])
def test_every_preset_runs_live(preset, no_orphans):
    config = load_experiment(CONFIGS / "tiny_qwen2audio_cpu.toml")
    config = dataclasses.replace(config, cluster={**config.cluster, "num_gpus": 3})  # vllm: 3 instances
    plan = compose(config, Overrides(preset=preset, need_profile=False)).plan
    plan = replan(plan, requests=plan.requests[:24])
    result = run_trial(plan)
    rec = result.records
    assert len(rec) == 24 and rec["request_id"].is_unique
    assert (rec["status"] == "ok").all(), rec["error"].tolist()
    assert result.meta["preset"] == preset
    placement = result.meta["placement"]
    workers = sum(getattr(plan.deployment, g).num_workers for g in ("encode", "prefill", "decode"))
    assert placement["workers"] == workers and placement["shared"] == "host cores"
    if preset == "vllm":  # every instance ran all three stages
        assert (rec["route"] == "local").all()
        assert (rec["encode_worker"] == rec["decode_worker"]).all()
        assert set(result.stage_log["stage"]) == {"encode", "prefill", "decode"}
    if preset == "dynamo":
        assert (rec["encode_batch_size"] == 1).all() and (rec["route"] == "remote").all()


def test_the_controller_retunes_the_running_encode_worker(no_orphans):
    from easerve_core.controller import Band, Controller, ControllerSettings, PlanTable

    config = load_experiment(CONFIGS / "tiny_qwen2audio_cpu.toml")
    plan = compose(config, Overrides(need_profile=False)).plan
    slow, fast = plan.deployment.with_(max_encode_batch=1), plan.deployment.with_(max_encode_batch=4)
    plan = replan(plan, deployment=slow, requests=plan.requests[:60])
    table = PlanTable((Band(rate_hz=2.0, deployment=slow), Band(rate_hz=25.0, deployment=fast)))
    settings = ControllerSettings(window_s=1.0, check_every_s=0.25, settle_s=0.0, dwell_s=0.0,
                                  min_arrivals=5, hysteresis_frac=0.1)
    with Trial(plan, controller=Controller(table, settings)) as trial:  # 20 req/s: above band 0's 2.2
        trial.start()
        result = trial.run()
    decisions = result.meta["controller"]["decisions"]
    assert [(d["from_band"], d["band"], d["reason"]) for d in decisions] == [(0, 1, "rate")]
    assert result.meta["controller"]["retunes"][0]["max_encode_batch"] == 4
    rec = result.records.sort_values("arrival_s")
    assert (rec["status"] == "ok").all()
    early = rec[rec["encode_end_s"] < decisions[0]["at_s"]]
    assert (early["encode_batch_size"] == 1).all()  # B = 1 until the retune
    assert rec["encode_batch_size"].max() > 1  # then batches of up to 4
