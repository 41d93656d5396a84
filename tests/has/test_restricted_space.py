"""Restricted HAS spaces, as equal tuning uses them for the baselines (docs/has.md §8)."""

from __future__ import annotations

import pytest

from easerve_core.cluster import Cluster
from easerve_core.deployment import BatchingMode, Deployment
from easerve_core.has import SearchSpace, enumerate_allocations, trials_frame
from easerve_core.has.space import aggregated_tps
from easerve_core.presets import apply_preset
from runtime.has import MEMORY, SearchSettings, run_search
from tests.has.toy import AnalyticEvaluator, ToyProfile

CLUSTER = Cluster(gpu="toy", num_gpus=8)


def _space(**kw: object) -> SearchSpace:
    allocs = tuple(a for a in enumerate_allocations(ToyProfile(), CLUSTER) if a.prefill.num_workers)
    return SearchSpace(allocations=allocs, **kw)  # type: ignore[arg-type]


def _study(space: SearchSpace, sampler: str = "tpe", trials: int = 15):
    settings = SearchSettings(sampler=sampler, num_trials=trials, storage=MEMORY, study_name="r")
    return run_search(space, AnalyticEvaluator(best_label=space.labels[0]), settings)


def test_a_fixed_remote_fraction_is_not_searched_and_every_candidate_takes_it():
    study = _study(_space(remote_fraction=1.0, max_encode_batch=1, grid_batches=(1,)))
    frame = trials_frame(study)
    assert all(set(t.params) == {"alloc", "B"} for t in study.trials)
    assert set(frame["remote_fraction"]) == {1.0} and set(frame["max_encode_batch"]) == {1}


def test_the_grid_of_a_fixed_s_space_has_one_point_per_allocation_and_b():
    space = _space(remote_fraction=1.0, max_encode_batch=1, grid_batches=(1,))
    assert space.grid() == [(label, 1, 1.0) for label in space.labels]
    frame = trials_frame(_study(space, sampler="grid"))
    assert sorted(frame["alloc"]) == sorted(space.labels)


def test_a_timeout_range_is_searched_log_uniform_inside_it():
    frame = trials_frame(_study(_space(remote_fraction=1.0, timeout_range_s=(0.01, 1.0))))
    assert frame["batch_timeout_s"].between(0.01, 1.0).all()
    assert frame["batch_timeout_s"].nunique() == len(frame) and frame["max_encode_batch"].nunique() > 1
    # without a range every candidate keeps the base's
    assert set(trials_frame(_study(_space(), trials=4))["batch_timeout_s"]) == {0.05}


@pytest.mark.parametrize(("field", "value", "message"), [
    ("remote_fraction", 1.5, "remote_fraction"),
    ("timeout_range_s", (0.2, 0.1), "low <= high"),
    ("timeout_range_s", (0.0, 0.1), "timeout_range_s"),
])
def test_bad_restrictions_name_the_field(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _space(**{field: value})


def test_presets_keep_a_tuned_deployments_knobs_and_are_idempotent():
    epd = Deployment()
    tuned = apply_preset("fixed-batch", epd, CLUSTER).with_(max_encode_batch=3, batch_timeout_s=0.3)
    again = apply_preset("fixed-batch", tuned, CLUSTER)
    assert (again.batching, again.max_encode_batch, again.batch_timeout_s) == (BatchingMode.FIXED, 3, 0.3)
    assert apply_preset("fixed-batch", epd, CLUSTER).max_encode_batch == 8  # an adaptive one: B = 8
    agg = apply_preset("vllm", epd, CLUSTER)
    fewer = agg.with_(decode=agg.decode.__class__(num_workers=1, tp=agg.decode.tp))
    assert apply_preset("vllm", fewer, CLUSTER).decode.num_workers == 1
    for name in ("easerve", "dynamo", "fixed-batch", "vllm"):
        once = apply_preset(name, epd, CLUSTER)
        assert apply_preset(name, once, CLUSTER) == once, name


def test_aggregated_tps_need_the_encoder_beside_the_lm():
    assert aggregated_tps(ToyProfile(), CLUSTER) == [2, 4, 8]  # the toy LM needs TP >= 2
    assert aggregated_tps(ToyProfile(), Cluster(gpu="toy", num_gpus=4)) == [2, 4]
