"""Clocks, deadlines, repeated timing and per-layer marks (CPU)."""

from __future__ import annotations

import time

import pytest
import torch

from live.gpu.timing import Clock, Deadline, LayerTimer, Reps, percentile, repeat_s


def test_repeat_respects_min_max_and_target() -> None:
    calls = []
    times = repeat_s(lambda: calls.append(1), Clock("cpu"), Reps(warmup=2, min=3, max=4, target_s=0.0),
                     Deadline.after(10))
    assert len(times) == 3 and len(calls) == 5
    reps = Reps(warmup=0, min=1, max=4, target_s=10.0)
    times = repeat_s(lambda: None, Clock("cpu"), reps, Deadline.after(10))
    assert len(times) == 4


def test_repeat_stops_at_the_deadline_after_one_timed_run() -> None:
    times = repeat_s(lambda: None, Clock("cpu"), Reps(min=3, max=9), Deadline(time.monotonic() - 1))
    assert len(times) == 1


def test_deadline_children_never_outlive_the_parent() -> None:
    parent = Deadline.after(1.0)
    assert parent.within(100.0).at == parent.at
    assert parent.within(0.0).expired()
    with pytest.raises(ValueError, match="seconds"):
        Deadline.after(0)
    with pytest.raises(ValueError, match="reps"):
        Reps(min=3, max=2)


def test_layer_timer_marks_each_layer() -> None:
    layers = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
    with LayerTimer(list(layers), Clock("cpu")) as timer:
        layers(torch.ones(2, 4))
    assert len(timer.layer_s()) == 3 and all(t >= 0 for t in timer.layer_s())
    layers(torch.ones(2, 4))  # hooks are gone
    assert len(timer.marks) == 4


def test_percentile() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0], 99) == pytest.approx(1.99)
    assert percentile([], 50) != percentile([], 50)  # NaN
