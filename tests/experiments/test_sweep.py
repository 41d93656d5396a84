"""The one sweep: its stream-length rules and its grid of rates x seeds x systems (no simulation)."""

from __future__ import annotations

from easerve.experiments.plan_tables import segment_requests
from easerve.experiments.sweep import HorizonLength, Scale, SegmentLength, Sweep
from easerve_core.trial_length import TrialLength


def test_the_stream_length_rules():
    segment = SegmentLength(segment_s=30.0)
    assert [segment.requests_at(r) for r in (0.1, 0.5, 2.0, 3.01)] == [20, 20, 60, 90]  # round, >= 20
    assert segment_requests(2.05, 30.0) == max(20, round(2.05 * 30.0))
    length = TrialLength(trial_s=60.0, min_requests=100)
    assert HorizonLength(length=length, ttft_limit_s=8.86).requests_at(2.0) == length.requests_at(2.0, 8.86)
    assert HorizonLength(length=length).requests_at(5.0) == 300
    scale = Scale(num_requests=10, rates_hz=(1.0,), num_seeds=2, timeline_s=1.0, min_duration_s=5.0)
    assert scale.sweep() == Sweep(length=scale, seeds=(0, 1))


def test_points_are_one_per_seed_with_the_rules_length_and_labels_in_order():
    sweep = Sweep(length=SegmentLength(segment_s=10.0), seeds=(2000, 2001), keep_hint=True)
    points = sweep.points(object(), "dep", 4.0, preset="dynamo", labels={"modality": "image"},
                          flags={"refined": True})
    assert [(p.seed, p.num_requests, p.preset, p.keep_hint, p.rate_hz) for p in points] == [
        (2000, 40, "dynamo", True, 4.0), (2001, 40, "dynamo", True, 4.0)]
    assert [dict(p.labels) for p in points] == [
        {"modality": "image", "rate_hz": 4.0, "seed": s, "refined": True} for s in (2000, 2001)]


class _Echo:
    def __init__(self):
        self.maps = []

    def map(self, fn, points):
        self.maps.append(len(points))
        return [dict(p.labels) for p in points]


def test_a_round_asks_each_key_once_in_order_and_returns_rows_by_curve_rate_and_seed():
    asked, heard = [], []
    backend = _Echo()
    rows = Sweep(length=SegmentLength(segment_s=10.0), seeds=(0, 1)).rows(
        {"audio": object()}, lambda m, s, r: asked.append((m, s, r)) or s,
        {("audio", "easerve"): [1.0, 2.0], ("audio", "dynamo"): [], ("audio", "vllm"): [3.0]},
        backend=backend, prepare=heard.extend)
    assert heard == asked == [("audio", "easerve", 1.0), ("audio", "easerve", 2.0), ("audio", "vllm", 3.0)]
    assert [(r["rate_hz"], r["seed"]) for r in rows[("audio", "easerve")]] == [(1.0, 0), (1.0, 1),
                                                                               (2.0, 0), (2.0, 1)]
    assert rows[("audio", "dynamo")] == [] and len(rows[("audio", "vllm")]) == 2
    assert backend.maps == [6]  # one map per round
