"""The trace-rate shift: a public trace's arrivals scaled to the cluster, cut into phases (no study run)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from easerve.experiments.controller_eval import main
from easerve.experiments.mix_control import phase_setups
from easerve.experiments.shifts import phase_of, stream
from easerve.experiments.trace_shift import (
    SYNTHETIC_CV,
    SYNTHETIC_RATES_HZ,
    SYNTHETIC_SEGMENT_S,
    plan_setups,
    synthetic_arrivals,
    trace_arrivals,
    trace_shift,
)
from easerve_core.workload import ReplayedGaps


def _burstgpt(path: Path, rates_hz: tuple[float, ...], window_s: float = 100.0, seed: int = 3) -> Path:
    """A BurstGPT-format file: uniform arrivals at each rate for one window, from t = 50 s."""
    rng = np.random.default_rng(seed)
    times = np.concatenate([k * window_s + np.sort(rng.uniform(0, window_s, round(r * window_s)))
                            for k, r in enumerate(rates_hz)])
    rows = [f"{t + 50:.3f},ChatGPT,{rng.integers(10, 900)},{rng.integers(1, 300)},0,Conversation log"
            for t in times]
    path.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                    + "\n".join(rows) + "\n")
    return path


def test_a_trace_is_scaled_to_the_cluster_and_cut_into_quiet_and_busy_phases(tmp_path: Path) -> None:
    arrivals = trace_arrivals(_burstgpt(tmp_path / "b.csv", (1.0, 3.0, 3.0, 1.0, 1.0)), "burstgpt")
    assert arrivals[0] == 0.0 and list(arrivals) == sorted(arrivals)
    shift = trace_shift(arrivals, capacity_hz=3.6, load_frac=0.5, phase_s=100.0, max_phases=4)
    # the mean rate (1.8 req/s) is half of 3.6 req/s: the time scale is about 1, the windows the file's
    assert [(p.start_s, p.duration_s) for p in shift.phases] == [(0.0, 100.0), (100.0, 200.0), (300.0, 100.0)]
    low, high, low2 = (p.rate_hz for p in shift.phases)
    assert low == low2 and 0.7 < low < 1.3 and 2.6 < high < 3.4  # the busy windows merge into one phase
    assert shift.signal == "requests" and len(set(shift.mixes)) == 1
    # the stream keeps the trace's own arrivals (those inside the phases), its content from the mix
    reqs = stream(shift, [p.rate_hz for p in shift.phases], seed=0)
    kept = [t for t in shift.arrivals_s if t < 400.0]
    assert [r.arrival_s for r in reqs] == pytest.approx(kept)
    assert [r.request_id for r in reqs] == list(range(len(reqs)))
    assert np.bincount(phase_of(shift, np.array(kept))).tolist() == [
        sum(p.start_s <= t < p.end_s for t in kept) for p in shift.phases]
    # twice the capacity halves the time: the phases keep their rates' ratio
    fast = trace_shift(arrivals, capacity_hz=7.2, load_frac=0.5, phase_s=50.0, max_phases=4)
    assert [p.duration_s for p in fast.phases] == [50.0, 100.0, 50.0]


def test_a_trace_shorter_than_one_phase_names_the_field() -> None:
    with pytest.raises(ValueError, match="phase_s"):
        trace_shift([0.0, 1.0, 2.0], capacity_hz=1.0, load_frac=0.5, phase_s=300.0)
    with pytest.raises(ValueError, match="trace_format"):
        trace_arrivals("x.csv", "easerve")


def test_a_bad_trace_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "b.csv"
    path.write_text("Timestamp,Request tokens\n1.0,5\n")
    assert main(["--trace", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Response tokens" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.csv"]


def test_the_report_has_a_mix_shift_section_only_when_the_run_holds_its_table() -> None:
    import pandas as pd

    from easerve.experiments.report_controller import controller_sections
    from easerve.experiments.reproduce import FULL, QUICK, cuts

    assert controller_sections({}) == []
    systems = pd.DataFrame([{"shift": "output-length", "system": s, "attainment_high": 0.9,
                             "attainment_low": 0.8, "goodput_rps": 1.0, "ttft_p99_s": 2.0, "tpot_p99_s": 0.1,
                             "decisions": 3,
                             "gpus_moved": 12, "held_gpu_s": 9000.0} for s in ("static-low", "predictive")])
    text = "\n".join(controller_sections({"controller_mix_shifts": systems}))
    assert "shifts where the optimum moves" in text and "predictive" in text
    assert FULL.mix_shifts and not QUICK.mix_shifts
    assert any("optimum moves" in line for line in cuts(QUICK))


def test_the_synthetic_stream_is_seeded_bursty_and_at_its_segments_rates() -> None:
    arrivals = np.asarray(synthetic_arrivals())
    assert tuple(arrivals) == synthetic_arrivals()  # the same every run
    assert tuple(arrivals) != synthetic_arrivals(seed=8)
    assert arrivals.size == 2456 and np.all(np.diff(arrivals) > 0)
    segment = (arrivals // SYNTHETIC_SEGMENT_S).astype(int)
    for k, rate in enumerate(SYNTHETIC_RATES_HZ):
        inside = arrivals[segment == k]
        assert inside.size == pytest.approx(rate * SYNTHETIC_SEGMENT_S, rel=0.2)
        if rate > 1:  # ~900 gaps: their coefficient of variation is the stream's, not Poisson's 1
            gaps = np.diff(inside)
            assert gaps.std() / gaps.mean() == pytest.approx(SYNTHETIC_CV, rel=0.15)


def test_the_synthetic_stream_written_as_burstgpt_reads_back_to_the_same_shift(tmp_path: Path) -> None:
    arrivals = synthetic_arrivals()
    path = tmp_path / "synthetic.csv"
    path.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" + "".join(
        f"{t!r},ChatGPT,472,18,490,Conversation log\n" for t in arrivals))
    read = trace_arrivals(path, "burstgpt")
    assert np.allclose(read, np.asarray(arrivals) - arrivals[0], rtol=0, atol=1e-9)
    ours, theirs = (trace_shift(a, capacity_hz=3.02) for a in (arrivals, read))
    assert [(p.start_s, p.duration_s, p.rate_hz) for p in ours.phases] == \
        [(p.start_s, p.duration_s, p.rate_hz) for p in theirs.phases]
    low, high, low2, high2 = (p.rate_hz for p in ours.phases)  # quiet and busy, 300 s each
    assert [p.start_s for p in ours.phases] == [0.0, 300.0, 600.0, 900.0]
    assert low == low2 < high == high2


def test_an_unknown_mix_shift_names_the_known_ones_with_the_trace_rate(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--mix-shifts", "output-length,rates"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--mix-shifts: unknown shift(s) rates" in err[0] and "trace-rate" in err[0]


@pytest.mark.parametrize("value", ["0", "-0.5", "1.5", "x", "nan", "inf"])
def test_a_bad_trace_load_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 value: str) -> None:
    path = _burstgpt(tmp_path / "b.csv", (1.0, 3.0))
    assert main(["--trace", str(path), "--trace-load", value, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--trace-load must be a fraction in (0, 1], got {value!r}" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.csv"]


def test_a_trace_load_without_a_trace_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--mix-shifts", "trace-rate", "--trace-load", "0.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--trace-load: goes with --trace" in err[0]


def test_the_trace_load_scales_the_trace_to_that_share_of_the_capacity(tmp_path: Path) -> None:
    from easerve.experiments.mix_control import mix_capacity_hz
    from easerve.experiments.mix_flags import shifts_of, trace_load_of
    from easerve.experiments.trace_shift import TRACE_LOAD_FRAC

    path = str(_burstgpt(tmp_path / "b.csv", (1.0, 3.0, 3.0, 1.0) * 8))
    assert trace_load_of(None) == TRACE_LOAD_FRAC == 0.6
    (default,) = shifts_of(None, trace=path)
    (half,) = shifts_of(None, trace=path, trace_load=trace_load_of("0.3"))
    # half the load: the same arrivals, their time stretched twice; the kept stream's mean rate is
    # the share of the mix's screened capacity (within the file's window-to-window spread)
    capacity = mix_capacity_hz("image", "llava-image")
    for shift, load in ((default, 0.6), (half, 0.3)):
        assert shift.load_frac == load
        span = shift.phases[-1].end_s
        assert len(shift.arrivals_s) / span == pytest.approx(load * capacity, rel=0.1)
    gaps = [float(np.mean(np.diff(s.arrivals_s))) for s in (default, half)]
    assert gaps[1] == pytest.approx(2 * gaps[0], rel=0.05)


def test_each_class_is_planned_on_the_gaps_of_the_trace_s_later_windows(tmp_path: Path) -> None:
    # eight 100 s windows: the run replays the first four (quiet, busy, busy, quiet), the rest
    # (busy, quiet, busy, quiet) is what each class is planned on; the mean rate, 2 req/s, is half
    # of 4 req/s, so the time scale is about 1
    rates = (1.0, 3.0, 3.0, 1.0, 3.0, 1.0, 3.0, 1.0)
    arrivals = trace_arrivals(_burstgpt(tmp_path / "b.csv", rates), "burstgpt")
    shift = trace_shift(arrivals, capacity_hz=4.0, load_frac=0.5, phase_s=100.0, max_phases=4)
    assert shift.phases[-1].end_s == 400.0 and max(shift.arrivals_s) < 400.0
    # the rule written again: the later whole windows, each by its rate against the run's mean
    t = np.asarray(arrivals, dtype=float)
    t = t * ((t.size - 1) / t[-1]) / (0.5 * 4.0)
    run = np.histogram(t, bins=4, range=(0.0, 400.0))[0] / 100.0
    rest = t[t >= 400.0] - 400.0
    windows = [rest[(rest >= 100 * k) & (rest < 100 * (k + 1))] for k in range(int(rest[-1] // 100))]
    assert len(windows) == 3 and [w.size / 100 >= run.mean() for w in windows] == [True, False, True]
    low, high = sorted({p.rate_hz for p in shift.phases})
    gaps = dict(shift.plan_gaps_s)
    assert set(gaps) == {low, high}  # each class's gaps hold at least one phase (100 s) at its rate
    assert gaps[high] == pytest.approx(tuple(np.concatenate([np.diff(windows[0]), np.diff(windows[2])])))
    assert gaps[low] == pytest.approx(tuple(np.diff(windows[1])))
    # each kind's setup replays its class's gaps at its rate; off, the mix's own (Poisson)
    setups = phase_setups(shift)
    kinds = [("llava-image", low), ("llava-image", high)]
    planned = plan_setups(shift, setups, kinds)
    for kind in kinds:
        replay = planned[kind].workload.arrivals
        assert isinstance(replay, ReplayedGaps) and replay.rate_hz == kind[1]
        assert replay.gaps_s == gaps[kind[1]]
    off = plan_setups(shift, setups, kinds, trace_planning=False)
    assert off == dict.fromkeys(kinds, setups["llava-image"])


def test_a_class_whose_later_gaps_hold_less_than_one_phase_is_planned_on_poisson() -> None:
    # evenly spaced windows of 100 s: the run (1, 3, 1, 3 req/s), then two busy windows (598 gaps,
    # at least 3 req/s x 100 s) and one quiet one at 0.5 req/s (49 gaps, short of 1 req/s x 100 s)
    rates = (1.0, 3.0, 1.0, 3.0, 3.0, 3.0, 0.5)
    times = np.concatenate([100 * k + np.arange(round(r * 100)) / r for k, r in enumerate(rates)])
    mean = (times.size - 1) / times[-1]
    shift = trace_shift(times, capacity_hz=mean / 0.5, load_frac=0.5, phase_s=100.0, max_phases=4)
    low, high = sorted({p.rate_hz for p in shift.phases})
    assert (low, high) == (1.0, 3.0)
    gaps = dict(shift.plan_gaps_s)
    assert list(gaps) == [high] and len(gaps[high]) == 598 and gaps[high] == pytest.approx((1 / 3,) * 598)


def test_a_trace_with_no_window_after_the_run_is_planned_on_poisson() -> None:
    # the built-in synthetic stream: its run replays every window it has
    assert trace_shift(synthetic_arrivals(), capacity_hz=3.02).plan_gaps_s == ()


def test_the_cross_check_streams_of_a_replaying_setup_keep_the_recorded_gaps() -> None:
    from easerve.experiments.setup import requests_for, with_gaps

    setup = phase_setups(trace_shift(synthetic_arrivals(), capacity_hz=3.02))["llava-image"]
    recorded = tuple(float(g) for g in range(1, 11))  # mean 5.5 s: at 2 req/s each is scaled by 1 / 11
    replaying = with_gaps(setup, recorded, rate_hz=1.0)
    arrivals = np.array([r.arrival_s for r in requests_for(replaying, 2.0, 25, seed=4)])
    gaps = np.diff(np.concatenate(([0.0], arrivals))) * 11.0
    start = recorded.index(round(gaps[0]))
    assert gaps == pytest.approx([recorded[(start + k) % 10] for k in range(25)])
    # a Poisson setup's streams are as before: no two draws of its gaps repeat in a cycle of ten
    plain = np.diff([r.arrival_s for r in requests_for(setup, 2.0, 25, seed=4)])
    assert len(set(np.round(plain, 9))) == plain.size
