"""Equal tuning: every baseline's own best deployment per rate under EAServe's HAS budget.

Small request counts and budgets keep each search to a second or two; the
assertions are about what each baseline may search, not about its numbers.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from easerve.experiments import report
from easerve.experiments.choose import (
    BASELINE_TIMEOUT_RANGE_S,
    _evaluator,
    aggregated_candidates,
    choose_baseline,
)
from easerve.experiments.headline import Chooser, headline_sweep
from easerve.experiments.reproduce import EvalSize
from easerve.experiments.setup import Setup, load_setup
from easerve.experiments.sweep import QUICK, SYSTEMS, Scale, peak_goodput
from easerve_core import Architecture, Deployment
from easerve_core.has.space import LM_TPS
from easerve_core.presets import apply_preset
from sim.feasibility import check_memory

BUDGET = {"trials": 6, "num_requests": 30}


@pytest.fixture(scope="module")
def audio() -> Setup:
    return load_setup("audio", anchored=True)


def _deployments(frame: pd.DataFrame) -> list[Deployment]:
    return [Deployment.from_dict(json.loads(j)) for j in frame["deployment_json"]]


@pytest.mark.parametrize("trials", [2, 6])  # fewer trials than grid points: TPE; else all of them
def test_request_at_a_time_only_searches_b1_s1_deployments(audio: Setup, trials: int) -> None:
    choice = choose_baseline(audio, "dynamo", rate_hz=1.0, trials=trials, num_requests=30)
    tried = [*_deployments(choice.trials), choice.deployment]
    assert all((d.max_encode_batch, d.remote_fraction) == (1, 1.0) for d in tried)
    assert all(d.prefill.num_workers >= 1 for d in tried)
    assert len({d.label() for d in tried}) > 1  # the allocation is searched
    assert choice.exhaustive == (choice.num_survivors <= trials) and len(choice.trials) >= trials


def test_fixed_batch_searches_the_allocation_b_and_the_timeout(audio: Setup) -> None:
    choice = choose_baseline(audio, "fixed-batch", rate_hz=1.0, **BUDGET)
    frame = choice.trials
    assert len(frame) == BUDGET["trials"] and not choice.exhaustive  # a continuous timeout: TPE
    assert frame["max_encode_batch"].nunique() > 1 and frame["batch_timeout_s"].nunique() > 1
    low, high = BASELINE_TIMEOUT_RANGE_S
    assert frame["batch_timeout_s"].between(low, high).all()
    assert (frame["remote_fraction"] == 1.0).all()
    # under its preset the chosen deployment runs as chosen: its own B and timeout
    run = apply_preset("fixed-batch", choice.deployment, audio.plan.cluster)
    assert (run.max_encode_batch, run.batch_timeout_s) == (choice.deployment.max_encode_batch,
                                                          choice.deployment.batch_timeout_s)


def test_aggregated_enumeration_covers_every_instance_tp_that_fits(audio: Setup) -> None:
    cands = aggregated_candidates(audio)
    profile, cluster = audio.profile_for("vllm"), audio.plan.cluster

    def fits(tp: int) -> bool:  # the simulator's own memory check is the oracle
        try:
            check_memory(apply_preset("vllm", audio.deployment.with_(
                decode=audio.deployment.decode.__class__(num_workers=1, tp=tp)), cluster), profile)
        except ValueError:
            return False
        return True

    want = {(tp, n) for tp in LM_TPS if tp <= cluster.num_gpus and fits(tp)
            for n in range(1, cluster.num_gpus // tp + 1)}
    assert {(d.decode.tp, d.decode.num_workers) for d in cands} == want and len(cands) == len(want)
    assert all(d.architecture is Architecture.AGGREGATED for d in cands)
    assert 1 not in {tp for tp, _ in want}  # the 27B LM needs two 48 GB GPUs: a real restriction
    whole = choose_baseline(audio, "vllm", rate_hz=1.0, trials=len(cands), num_requests=30)
    assert whole.exhaustive and len(whole.trials) == len(cands)
    part = choose_baseline(audio, "vllm", rate_hz=1.0, trials=3, num_requests=30)
    assert not part.exhaustive and len(part.trials) == 3


@pytest.mark.parametrize(("system", "rate_hz"), [("dynamo", 0.5), ("vllm", 2.0)])
def test_a_tuned_baseline_is_at_least_its_config_deployment(audio: Setup, system: str,
                                                            rate_hz: float) -> None:
    """Where the search evaluates every point and the config deployment is one of them.

    Not asserted for fixed-batch: its TPE search over a continuous timeout need not
    try the config's B = 8 and 50 ms, so it may end below it on a small budget.
    """
    choice = choose_baseline(audio, system, rate_hz=rate_hz, trials=12, num_requests=30)
    config = apply_preset(system, audio.deployment, audio.plan.cluster)
    tried = [apply_preset(system, d, audio.plan.cluster) for d in _deployments(choice.trials)]
    assert choice.exhaustive and config in tried  # else the claim below would prove nothing
    evaluate = _evaluator(audio, rate_hz=rate_hz, tier="moderate", num_requests=30, num_samples=1,
                          preset=system)
    assert choice.best_goodput_rps == evaluate(choice.deployment) >= evaluate(config)


def test_the_same_seed_makes_the_same_choice(audio: Setup) -> None:
    a, b = (choose_baseline(audio, "fixed-batch", rate_hz=2.0, seed=3, **BUDGET) for _ in range(2))
    assert a.deployment == b.deployment
    cols = ["goodput_rps", "key"]
    pd.testing.assert_frame_equal(a.trials[cols], b.trials[cols])
    with pytest.raises(ValueError, match="unknown baseline 'sglang'"):
        choose_baseline(audio, "sglang", rate_hz=1.0)


def test_the_headline_sweep_runs_both_readings(audio: Setup) -> None:
    scale = Scale(num_requests=30, rates_hz=(1.0,), num_seeds=1, timeline_s=60.0)
    plan = EvalSize(scale=scale, has_trials=3, has_requests=30, convergence_seeds=(0,))
    chooser = Chooser({"audio": audio}, plan)
    sweep = headline_sweep({"audio": audio}, chooser, scale)
    readings = sweep.groupby("tuning")["system"].apply(set).to_dict()
    assert readings == {"tuned": set(SYSTEMS), "config": {"dynamo", "vllm", "fixed-batch"}}
    assert list(sweep.columns[:3]) == ["modality", "system", "tuning"]
    choices = chooser.table(("dynamo", "fixed-batch", "vllm"))
    assert set(choices["system"]) == {"dynamo", "fixed-batch", "vllm"}
    assert (choices["max_encode_batch"][choices["system"] == "dynamo"] == 1).all()
    peak = peak_goodput(sweep, keys=("modality", "system", "tuning"))
    assert len(peak) == 7


def test_the_report_reads_each_baseline_against_easerve_in_both_readings() -> None:
    peak = pd.DataFrame({
        "modality": ["image"] * 7,
        "system": ["easerve", "dynamo", "dynamo", "vllm", "vllm", "fixed-batch", "fixed-batch"],
        "tuning": ["tuned", "tuned", "config", "tuned", "config", "tuned", "config"],
        "goodput_rps": [2.0, 1.0, 0.5, 1.6, 0.8, 1.25, 0.4], "censored": [False] * 7})
    free = peak[peak["system"] == "vllm"]
    tuned = report.goodput_vs_paper(peak, free, tuning="tuned").iloc[0]
    config = report.goodput_vs_paper(peak, free, tuning="config").iloc[0]
    assert tuned["EAServe/Dynamo ours / paper"].startswith("2.00 /")
    assert tuned["EAServe/vLLM ours / paper"].startswith("1.25 /")
    assert tuned["EAServe/fixed-batch ours"] == "1.60"
    assert config["EAServe/Dynamo ours / paper"].startswith("4.00 /")
    assert config["EAServe/fixed-batch ours"] == "5.00"
    assert config["vLLM-like, free in-step encoder"] == "0.8"


class _Counting:
    """This process, counting the tasks it is given."""

    def __init__(self) -> None:
        self.tasks = 0

    def map(self, fn, items, poll=None):
        self.tasks += len(items)
        return [fn(x) for x in items]


def test_rates_planned_at_the_same_rate_share_one_study(audio: Setup) -> None:
    plan = EvalSize(scale=QUICK, has_trials=3, has_requests=30, convergence_seeds=(0,))
    backend = _Counting()
    chooser = Chooser({"audio": audio}, plan, backend)  # type: ignore[arg-type]
    keys = [("audio", "dynamo", r) for r in (4.0, 5.0, 30.0)] + [("audio", "vllm", 4.0)]
    chooser.prepare(keys)
    rows = chooser.table(("dynamo", "vllm"))
    dyn = rows[rows["system"] == "dynamo"]
    assert dyn["requested_rate_hz"].tolist() == [4.0, 5.0, 30.0]
    assert dyn["planned_rate_hz"].nunique() == 1 and dyn["planned_rate_hz"].iloc[0] < 4.0
    assert backend.tasks == 2  # one dynamo study for three rates, one aggregated enumeration
    alone = choose_baseline(audio, "dynamo", rate_hz=5.0, trials=3, num_requests=30)
    assert chooser("audio", 5.0, "dynamo").deployment == alone.deployment
    assert alone.planned_rate_hz == dyn["planned_rate_hz"].iloc[0]
