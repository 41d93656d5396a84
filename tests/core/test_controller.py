"""The online controller on scripted traffic: exact decisions, no oscillation, same inputs same output."""

from __future__ import annotations

import math

import numpy as np
import pytest

from easerve_core import Deployment, StageGroup
from easerve_core.controller import Band, Controller, ControllerSettings, PlanTable
from easerve_core.oracle import ScriptedController
from easerve_core.plan_check import cross_check, cross_check_bands


def _dep(b: int) -> Deployment:
    return Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=1),
                      decode=StageGroup(num_workers=1), max_encode_batch=b)


TABLE = PlanTable((Band(rate_hz=1.0, deployment=_dep(2)), Band(rate_hz=2.0, deployment=_dep(4)),
                   Band(rate_hz=3.0, deployment=_dep(8))))
SETTINGS = ControllerSettings(window_s=60.0, check_every_s=5.0, hysteresis_frac=0.15, settle_s=60.0,
                              dwell_s=120.0, min_arrivals=20)


def _drive(controller: Controller, arrivals: np.ndarray, end_s: float) -> list:
    """Offer every arrival and poll at every deadline, in time order, as an engine does."""
    i = 0
    while controller.next_deadline() <= end_s:
        due = controller.next_deadline()
        while i < len(arrivals) and arrivals[i] <= due:
            controller.arrive(float(arrivals[i]))
            i += 1
        controller.poll(due)
    return controller.decisions


def _steady(rate: float, start: float, end: float) -> np.ndarray:
    return np.arange(start, end, 1.0 / rate)


def test_the_plan_for_a_rate_is_the_next_band_up():
    assert [TABLE.band_for(r) for r in (0.2, 1.0, 1.01, 2.0, 2.5, 9.0)] == [0, 0, 1, 1, 2, 2]
    with pytest.raises(ValueError, match="band rates must increase"):
        PlanTable((Band(rate_hz=2.0, deployment=_dep(1)), Band(rate_hz=1.0, deployment=_dep(1))))


def test_a_step_in_rate_makes_exactly_one_replan_once_it_settles():
    arrivals = np.concatenate([_steady(1.0, 0.0, 300.0), _steady(3.0, 300.0, 900.0)])
    decisions = _drive(Controller(TABLE, SETTINGS), arrivals, 900.0)
    assert len(decisions) == 1
    d = decisions[0]
    assert (d.from_band, d.band, d.reason) == (0, 2, "rate")
    # the window holds > 2 req/s (band 2's target) from t = 330 on: the first check there is 335,
    # and the target must hold for settle_s = 60 s: the decision is at the check of t = 395
    assert d.at_s == pytest.approx(395.0)
    assert d.deployment.max_encode_batch == 8


def test_a_fall_in_rate_moves_down_to_the_band_that_covers_it():
    # 3 req/s, then 1 req/s from t = 600.5: from the 3 req/s band down to the 1 req/s band, the
    # lowest whose planned rate covers 1 req/s (the move down mirrors the move up: the rate a margin
    # below the current band's planned rate, 3 / 1.15 = 2.61 req/s)
    arrivals = np.concatenate([_steady(3.0, 0.0, 600.0), _steady(1.0, 600.5, 1500.0)])
    decisions = _drive(Controller(TABLE, SETTINGS, start_band=2), arrivals, 1500.0)
    assert [(d.from_band, d.band, d.reason) for d in decisions] == [(2, 0, "rate")]
    # the window's estimate is 1 req/s from the check of t = 660 on (60 arrivals in (600, 660];
    # at 655, 14 at 3 req/s in (595, 600] and 55 after: 1.15 req/s, band 1), and holds for
    # settle_s = 60 s: the decision is at t = 720
    assert decisions[0].at_s == pytest.approx(720.0)
    middle = np.concatenate([_steady(3.0, 0.0, 600.0), _steady(1.6, 600.5, 1500.0)])
    assert [d.band for d in _drive(Controller(TABLE, SETTINGS, start_band=2), middle, 1500.0)] == [1]


def test_the_down_threshold_is_the_lower_band_s_own_rate_not_a_margin_below_it():
    # at the 2 req/s band, a steady 1 req/s (exactly the 1 req/s band's planned rate, and more than the
    # margin below 2 req/s) moves down; until 2026-12 the move needed the rate under 1 / 1.15 req/s
    decisions = _drive(Controller(TABLE, SETTINGS, start_band=1), _steady(1.0, 0.5, 900.0), 900.0)
    assert [(d.from_band, d.band) for d in decisions] == [(1, 0)]
    # a rate the lower band does not cover stays put, however long it lasts
    assert _drive(Controller(TABLE, SETTINGS, start_band=1), _steady(1.05, 0.5, 900.0), 900.0) == []


def test_a_band_that_holds_the_current_deployment_is_followed_without_a_decision():
    # bands 2 and 3 hold one deployment: 2 -> 3 req/s moves the controller's band, not the servers
    # (no decision, no dwell), so the fall to 0.8 req/s at t = 600 is one decision, 2 -> 0, that
    # needs no dwell from the follow; the oracle's script to a band of the same deployment too
    same = PlanTable((TABLE.bands[0], TABLE.bands[1], Band(rate_hz=3.0, deployment=_dep(4))))
    arrivals = np.concatenate([_steady(2.0, 0.0, 300.0), _steady(3.0, 300.0, 600.0),
                               _steady(0.8, 600.5, 1200.0)])
    c = Controller(same, SETTINGS, start_band=1)
    seen = []
    i = 0
    while c.next_deadline() <= 1200.0:
        due = c.next_deadline()
        while i < len(arrivals) and arrivals[i] <= due:
            c.arrive(float(arrivals[i]))
            i += 1
        c.poll(due)
        seen.append((due, c.band))
    assert [(d.from_band, d.band) for d in c.decisions] == [(2, 0)]
    # the window passes 2 * 1.15 req/s at the check of t = 320 ((120 + 20) / 60 = 2.33 req/s); the
    # target holds for settle_s, as a move's must: the band follows at t = 380
    assert min(t for t, band in seen if band == 2) == pytest.approx(380.0)
    oracle = ScriptedController(same, ((300.0, 2), (600.0, 0)), start_band=1)
    assert oracle.poll(300.0) is None and oracle.band == 2
    assert oracle.poll(600.0).band == 0 and len(oracle.decisions) == 1


def test_the_rate_before_a_full_window_is_over_the_time_since_the_start():
    c = Controller(TABLE, SETTINGS)
    for t in _steady(2.0, 0.25, 30.0):
        c.arrive(float(t))
    assert c.rate_hz(30.0) == pytest.approx(60 / 30.0)  # not 60 / window_s


def test_noise_inside_the_hysteresis_band_triggers_nothing():
    rng = np.random.default_rng(7)
    gaps = rng.uniform(0.45, 0.55, size=4000)  # about 2 req/s, +-10%: inside 2.0 * (1 +- 0.15)
    decisions = _drive(Controller(TABLE, SETTINGS, start_band=1), np.cumsum(gaps), 1800.0)
    assert decisions == []


def test_dwell_time_bounds_how_often_it_moves():
    # the rate flips between 1 and 3 req/s every 90 s: after settling, a move at most every dwell_s
    pieces = [_steady(1.0 if k % 2 == 0 else 3.0, 90.0 * k, 90.0 * (k + 1)) for k in range(20)]
    decisions = _drive(Controller(TABLE, SETTINGS), np.concatenate(pieces), 1800.0)
    times = [d.at_s for d in decisions]
    assert all(b - a >= SETTINGS.dwell_s for a, b in zip([0.0, *times], times, strict=False))


def test_slo_misses_with_a_growing_queue_move_one_band_up():
    c = Controller(TABLE, SETTINGS, start_band=0)
    for k, t in enumerate(_steady(0.9, 0.0, 600.0)):  # the rate says band 0 ...
        c.arrive(float(t))
        c.finish(float(t) + 0.5, met_slo=k % 2 == 0)  # ... but only half the requests meet the SLO
        c.queue(float(t), waiting=k)  # and the queue keeps growing
        c.poll(float(t))
    assert [(d.band, d.reason) for d in c.decisions][:1] == [(1, "slo")]


def test_slo_misses_move_nothing_on_a_mix_table():
    # a *_mean table's bands are mixes: the band above serves another mix, not more capacity
    mixes = PlanTable(TABLE.bands, signal="mm_tokens_mean")
    c = Controller(mixes, SETTINGS, start_band=0)
    for k, t in enumerate(_steady(0.9, 0.0, 600.0)):
        c.arrive(float(t), 0.9)  # the mix says band 0 ...
        c.finish(float(t) + 0.5, met_slo=k % 2 == 0)  # ... half the requests miss the SLO
        c.queue(float(t), waiting=k)  # and the queue keeps growing
        c.poll(float(t))
    assert c.decisions == []


def test_the_same_observations_give_the_same_decisions():
    rng = np.random.default_rng(3)
    arrivals = np.cumsum(rng.exponential(1 / 2.5, size=3000))
    runs = [_drive(Controller(TABLE, SETTINGS), arrivals, 1200.0) for _ in range(2)]
    assert runs[0] == runs[1] and runs[0]


def test_no_estimate_before_enough_arrivals_and_bad_settings():
    c = Controller(TABLE, SETTINGS)
    for t in range(5):
        c.arrive(float(t))
    assert math.isnan(c.rate_hz(5.0)) and c.poll(5.0) is None
    with pytest.raises(ValueError, match=r"controller\.dwell_s"):
        ControllerSettings(dwell_s=-1.0)
    with pytest.raises(ValueError, match="start_band"):
        Controller(TABLE, SETTINGS, start_band=3)


def test_cross_check_gives_each_band_the_best_of_the_table_at_its_rate():
    scores = {(2, 1.0): 0.8, (4, 1.0): 0.99, (8, 1.0): 1.0,  # 4 and 8 tie (within 2%) at 1 req/s:
              (2, 2.0): 1.5, (4, 2.0): 1.9, (8, 2.0): 1.7,  # 4 is the band above's choice
              (2, 3.0): 1.0, (4, 3.0): 2.0, (8, 3.0): 2.0}
    seen = []

    def score(d: Deployment, rate: float) -> float:
        seen.append((d.max_encode_batch, rate, d.rate_hint_hz))
        if (d.max_encode_batch, rate) == (8, 3.0) and d.rate_hint_hz < 3.0:
            return 2.5  # B8 serves 3 req/s best told a lower rate (told 1 and 2 tie: 2 is nearer)
        return scores[d.max_encode_batch, rate]

    hinted = PlanTable(tuple(Band(rate_hz=b.rate_hz, deployment=b.deployment.with_(rate_hint_hz=b.rate_hz))
                             for b in TABLE.bands))
    table, rows = cross_check(hinted, score)
    assert [(b.deployment.max_encode_batch, b.deployment.rate_hint_hz) for b in table.bands] == [
        (4, 2.0), (4, 2.0), (8, 2.0)]
    # every deployment told every band's rate, judged at every band's rate, its hint kept
    assert sorted(seen) == sorted((b, r, h) for b in (2, 4, 8) for r in (1.0, 2.0, 3.0)
                                  for h in (1.0, 2.0, 3.0))
    assert sum(r["chosen"] for r in rows) == 3 and len(rows) == 27
    # with no tie allowed, band 0 takes the strictly best, told the rate nearest its own
    strict, _ = cross_check(hinted, score, tie_frac=0.0)
    assert [(b.deployment.max_encode_batch, b.deployment.rate_hint_hz) for b in strict.bands] == [
        (8, 1.0), (4, 2.0), (8, 2.0)]
    # deployments without a hint are one candidate each: a table of one twice judges it once per band
    twice = PlanTable((Band(rate_hz=1.0, deployment=_dep(4)), Band(rate_hz=2.0, deployment=_dep(4))))
    assert len(cross_check(twice, lambda d, r: 1.0)[1]) == 2


def test_cross_check_ties_keep_the_allocation_of_the_band_above():
    # X and Z share an allocation, Y has another; settled top down: 3 req/s takes Z outright; at
    # 2 req/s all three tie and Z (the band above's choice) stays; at 1 req/s X and Y tie, and
    # the allocation of the band above (Z's) beats Y's headroom
    x, z = _dep(2), _dep(8)
    y = Deployment(encode=StageGroup(num_workers=2), prefill=StageGroup(num_workers=1),
                   decode=StageGroup(num_workers=1), max_encode_batch=4)
    scores = {(2, 3.0): 1.0, (4, 3.0): 1.0, (8, 3.0): 3.0,
              (2, 2.0): 1.93, (4, 2.0): 1.95, (8, 2.0): 1.92,
              (2, 1.0): 1.0, (4, 1.0): 1.0, (8, 1.0): 0.9}
    table = PlanTable((Band(rate_hz=1.0, deployment=y), Band(rate_hz=2.0, deployment=x),
                       Band(rate_hz=3.0, deployment=z)))
    checked, _ = cross_check(table, lambda d, r: scores[d.max_encode_batch, r])
    assert [b.deployment.max_encode_batch for b in checked.bands] == [2, 8, 8]


def test_cross_check_with_fewer_gpus_first_keeps_a_small_deployment_where_it_ties():
    small = Deployment(encode=StageGroup(num_workers=1), prefill=StageGroup(num_workers=0),
                       decode=StageGroup(num_workers=1), remote_fraction=0.0)
    big = _dep(8)  # 3 GPUs to small's 2
    table = PlanTable((Band(rate_hz=1.0, deployment=small), Band(rate_hz=2.0, deployment=big)))
    scores = {(2, 1.0): 0.99, (3, 1.0): 1.0, (2, 2.0): 1.2, (3, 2.0): 2.0}

    def score(d: Deployment, rate: float) -> float:
        return scores[d.num_gpus, rate]

    plain, _ = cross_check(table, score)
    assert [b.deployment.num_gpus for b in plain.bands] == [3, 3]  # the band above's choice ties
    frugal, rows = cross_check(table, score, fewer_gpus_first=True)
    assert [b.deployment.num_gpus for b in frugal.bands] == [2, 3]
    assert {r["num_gpus"] for r in rows} == {2, 3}


def test_the_windows_hold_exactly_the_last_window_of_observations_over_long_runs():
    # 30,000 arrivals and finishes (the lists are compacted several times on the way): at every
    # check the rate and the window's SLO count are those of a brute-force count
    rng = np.random.default_rng(11)
    arrivals = np.cumsum(rng.exponential(1 / 8.0, size=30_000))
    met = rng.random(30_000) < 0.7
    c = Controller(TABLE, SETTINGS)
    for k, (t, ok) in enumerate(zip(arrivals, met, strict=True)):
        c.arrive(float(t))
        c.finish(float(t), met_slo=bool(ok))
        if k % 997 == 0 and t > SETTINGS.window_s:
            inside = (arrivals[: k + 1] > t - SETTINGS.window_s)
            assert c.rate_hz(float(t)) == pytest.approx(inside.sum() / SETTINGS.window_s)
            finished = len(c._finish_s) - c._f0
            before = c._met_upto[c._f0 - 1] if c._f0 else c._met_before
            assert (finished, c._met_upto[-1] - before) == (inside.sum(), met[: k + 1][inside].sum())
    assert c._seen_before > 0  # compacted


def test_cross_check_bands_judges_each_band_on_its_own_workload_and_fewest_moves_avoids_a_move():
    # a mix table: bands are token levels (300, 3000), each a phase at its own request rate
    # (2.0, 0.5); A is the low phase's pick, C the high phase's. At the high phase A and C tie
    # (both carry its 0.5 req/s), at the low phase A wins outright.
    a, c = _dep(2).with_(rate_hint_hz=2.0), _dep(8).with_(rate_hint_hz=0.5)
    table = PlanTable((Band(rate_hz=300.0, deployment=a), Band(rate_hz=3000.0, deployment=c)),
                      signal="mm_tokens_mean")
    scores = {(2, 0): 1.9, (8, 0): 1.0, (2, 1): 0.49, (8, 1): 0.495}
    seen = []

    def score(d: Deployment, i: int) -> float:
        seen.append((d.max_encode_batch, d.rate_hint_hz, i))
        return scores[d.max_encode_batch, i]

    plain, rows = cross_check_bands(table, score, [2.0, 0.5])
    # candidates are told the phases' request rates, never the bands' token levels
    assert sorted(seen) == sorted((b, h, i) for b in (2, 8) for h in (2.0, 0.5) for i in (0, 1))
    assert plain.signal == "mm_tokens_mean" and [b.rate_hz for b in plain.bands] == [300.0, 3000.0]
    assert [b.deployment.max_encode_batch for b in plain.bands] == [2, 8]  # the tie keeps C's own
    assert {r["phase_rate_hz"] for r in rows} == {2.0, 0.5}
    # fewest_moves: A ties with the best at both phases, so both bands hold A (no move planned)
    moves, _ = cross_check_bands(table, score, [2.0, 0.5], fewest_moves=True)
    assert [b.deployment.max_encode_batch for b in moves.bands] == [2, 2]
    with pytest.raises(ValueError, match="rates_hz"):
        cross_check_bands(table, score, [2.0])
