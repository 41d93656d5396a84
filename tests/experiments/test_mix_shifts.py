"""Shifts where the best deployment moves: the shift file, its bad input, the stream (no study run)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from calibration.reconfig import STANDBY_WARMUP_S, WARMUP_S
from easerve.cli import main as easerve
from easerve.experiments import mix_flags
from easerve.experiments.controller_eval import main
from easerve.experiments.mix_control import (
    CUT_Z,
    MOVES,
    ORACLE_LEAD_S,
    RULES,
    SETTLE_Z,
    lead_s,
    phase_rates,
    phase_setups,
)
from easerve.experiments.shape_control import screened_capacity_hz as screened
from easerve.experiments.shift_control import MoveMechanisms
from easerve.experiments.shifts import EARLIER_SHIFTS, SHIFTS, at_rate_scale, load_shift, phase_of, stream
from easerve.resources import config_path
from easerve_core.controller import Band, PlanTable
from easerve_core.has.screen import screen

GOOD = """model = "image"
signal = "output_tokens_mean"
[[phase]]
start_s = 0
duration_s = 100
rate_hz = 1.0
mix = "llava-caption"
[[phase]]
start_s = 100
duration_s = 100
rate_hz = 0.5
mix = "llava-chat"
"""


def test_a_shift_file_reads_and_streams_its_phases(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(GOOD)
    shift = load_shift(path)
    assert [p.mix for p in shift.phases] == ["llava-caption", "llava-chat"]
    reqs = stream(shift, [1.0, 0.5], seed=0)
    arrivals = np.array([r.arrival_s for r in reqs])
    assert (np.diff(arrivals) >= 0).all() and [r.request_id for r in reqs] == list(range(len(reqs)))
    phase = phase_of(shift, arrivals)
    outs = np.array([r.output_tokens for r in reqs])
    assert outs[phase == 0].max() <= 48 and outs[phase == 1].min() >= 512
    assert stream(shift, [1.0, 0.5], seed=0) == reqs  # same seed, same stream


@pytest.mark.parametrize("edit, field", [
    (("start_s = 100", "start_s = 50"), "phase[1].start_s"),  # out of order: overlaps phase 0
    (("duration_s = 100\nrate_hz = 0.5", "duration_s = -5\nrate_hz = 0.5"), "phase[1].duration_s"),
    # a phase the model has no tower for: before, it ran and reported 1.0 attainment
    (('mix = "llava-chat"', 'mix = "ultravox-audio"'),
     "phase[1].mix: audio requests, but model llava-v1.6-34b takes image input"),
    # each of these was a ValueError that named no field ("could not convert string to float"), an
    # unknown mix with no phase, or a boolean taken as one second (found by mutating a shift file)
    (("start_s = 100", 'start_s = "x"'), "phase[1].start_s must be a number, got 'x'"),
    (("duration_s = 100\nrate_hz = 0.5", "duration_s = true\nrate_hz = 0.5"),
     "phase[1].duration_s must be a number, got True"),
    (('mix = "llava-chat"', 'mix = "nope"'), "unknown phase[1].mix 'nope'"),
    (('mix = "llava-chat"', "mix = 3"), "phase[1].mix must be a name, got 3"),
])
def test_a_bad_shift_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 edit: tuple[str, str], field: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(GOOD.replace(*edit))
    assert main(["--shift", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


def test_an_unknown_forecaster_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--mix-shifts", "output-length", "--forecaster", "arima"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "controller.forecaster" in err[0] and "holt" in err[0]


@pytest.mark.parametrize("value", ["-1", "soon"])
def test_a_bad_drain_deadline_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], value: str) -> None:
    assert main(["--mix-shifts", "output-length", "--drain-deadline", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--drain-deadline" in err[0]


@pytest.mark.parametrize("flag", ["--settle-z", "--cut-z"])
@pytest.mark.parametrize("value", ["0", "-3", "often", "inf"])
def test_a_bad_z_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], flag: str, value: str) -> None:
    assert main(["--mix-shifts", "output-length", flag, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0]


def test_a_rate_scale_scales_every_set_rate_and_the_screened_share() -> None:
    resolution = at_rate_scale(SHIFTS["resolution"], 0.8)
    assert [p.rate_hz for p in resolution.phases] == [2.78, 2.46, 2.78, 2.46]  # 3.48, 3.08 x 0.8
    assert [(p.start_s, p.duration_s, p.mix) for p in resolution.phases] == \
        [(p.start_s, p.duration_s, p.mix) for p in SHIFTS["resolution"].phases]
    output = at_rate_scale(SHIFTS["output-length"], 0.5)  # captioning's rate comes from the screen
    assert [p.rate_hz for p in output.phases] == [None, 0.4, None, 0.4]
    assert output.load_frac == pytest.approx(SHIFTS["output-length"].load_frac * 0.5)
    assert at_rate_scale(SHIFTS["resolution"], 1.0) == SHIFTS["resolution"]
    assert mix_flags.rate_scale_of(None) == 1.0 and mix_flags.rate_scale_of("0.8") == 0.8
    with pytest.raises(ValueError, match="rate_scale"):
        at_rate_scale(replace(SHIFTS["resolution"], arrivals_s=(0.0, 1.0)), 0.8)


@pytest.mark.parametrize(("args", "field"), [
    (["--mix-shifts", "output-length", "--rate-scale", "0"], "--rate-scale"),
    (["--mix-shifts", "output-length", "--rate-scale", "lots"], "--rate-scale"),
    (["--mix-shifts", "trace-rate", "--rate-scale", "0.8"], "rate_scale: shift 'trace-rate' replays"),
])
def test_a_bad_rate_scale_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                 args: list[str], field: str) -> None:
    assert main([*args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["-1", "1.5", "seven", "inf"])
def test_a_bad_seed_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], value: str) -> None:
    assert main(["--mix-shifts", "output-length", "--seed", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--seed must be an integer >= 0" in err[0]
    assert mix_flags.seed_of(None) == 0 and mix_flags.seed_of("3") == 3


@pytest.mark.parametrize("value", ["-1", "soon", "inf"])
def test_a_bad_oracle_lead_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], value: str) -> None:
    assert main(["--mix-shifts", "output-length", "--oracle-lead", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--oracle-lead" in err[0]


def test_the_z_flags_override_the_evaluation_s() -> None:
    assert mix_flags.settle_z_of(None) == SETTLE_Z == 3.0 and mix_flags.cut_z_of(None) == CUT_Z == 4.0
    assert mix_flags.settle_z_of("none") is None and mix_flags.settle_z_of("2.5") == 2.5
    assert mix_flags.cut_z_of("none") is None and mix_flags.cut_z_of("5") == 5.0
    assert RULES.settle_z == SETTLE_Z and RULES.cut_z == CUT_Z and RULES.forecaster == "none"
    assert mix_flags.oracle_lead_of(None) == ORACLE_LEAD_S == 0.0 and mix_flags.oracle_lead_of("26.3") == 26.3


def test_the_move_flags_override_the_evaluation_s_moves() -> None:
    assert mix_flags.move_mechanisms(None, None) == MOVES
    assert mix_flags.move_mechanisms("none", False, linger=False, interim_share=False,
                                     standby=False) == MoveMechanisms()
    assert mix_flags.move_mechanisms("30", None) == replace(MOVES, drain_deadline_s=30.0)
    assert MOVES.linger and not mix_flags.move_mechanisms(None, None, linger=False).linger
    assert MOVES.interim_share
    assert not mix_flags.move_mechanisms(None, None, interim_share=False).interim_share
    assert MOVES.standby and not mix_flags.move_mechanisms(None, None, standby=False).standby


def test_standby_moves_wake_engines_and_lead_by_the_wake() -> None:
    """MOVES wake standby engines: every re-role costs the warm-up less, and the predictive
    controller's lead (the longest re-role of the table) shrinks with it."""
    setup = phase_setups(SHIFTS["resolution"])["llava-small-chat"]
    cold, warm = replace(MOVES, standby=False).reconfiguration(setup), MOVES.reconfiguration(setup)
    for role, tp in (("decode", 4), ("encode+prefill", 2), ("prefill", 2)):
        assert cold(role, tp) - warm(role, tp) == pytest.approx(WARMUP_S - STANDBY_WARMUP_S)
    deployment = setup.deployment.with_(remote_fraction=1.0)
    table = PlanTable((Band(rate_hz=1.0, deployment=deployment),), signal="requests")
    assert lead_s(setup, table, replace(MOVES, standby=False)) - lead_s(setup, table) == \
        pytest.approx(WARMUP_S - STANDBY_WARMUP_S)


def test_the_built_in_shifts_name_why_the_optimum_moves() -> None:
    assert set(SHIFTS) >= {"output-length", "image-video", "resolution"}
    for shift in SHIFTS.values():
        assert shift.why and len(shift.mixes) == 2


def test_a_plan_table_needing_more_gpus_than_the_cluster_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = {"encode": {"num_workers": 4, "tp": 2}, "prefill": {"num_workers": 1, "tp": 2},
           "decode": {"num_workers": 1, "tp": 4}, "max_encode_batch": 4, "remote_fraction": 0.5}
    table = tmp_path / "pt.json"
    table.write_text(json.dumps({"bands": [{"rate_hz": 1.0, "deployment": big}]}))
    out = tmp_path / "out"
    config = config_path("configs/llava34b_rtx6000ada.toml")
    assert easerve(["sim", str(config), "--controller", str(table), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bands[0].deployment" in err[0] and "14 GPUs" in err[0], err
    assert not out.exists()


def test_the_video_phase_runs_where_the_image_phases_local_prefill_cannot_carry_it() -> None:
    """shifts.py's capacity argument for the first image-video shift's rates, on the screen itself."""
    shift = EARLIER_SHIFTS["image-video-0.9"]
    setups = phase_setups(shift)
    image_hz, video_hz = phase_rates(shift, setups)[:2]
    assert (image_hz, video_hz) == (1.89, 0.9)

    def carriers(mix: str, rate: float) -> set[str]:
        s = setups[mix]
        report = screen(s.profile, s.plan.cluster, s.mix, rate_hz=rate, slo=s.slos["moderate"])
        return {c.allocation.label for c in report.survivors}

    videos, images = carriers("qwen-video-rmm16", video_hz), carriers("qwen-image", image_hz)
    assert "E2x2 P0x2 D1x4" in images and "E2x2 P0x2 D1x4" not in videos
    assert "E2x1 P1x2 D1x4" not in videos
    assert videos and videos <= images  # the reverse does not hold (shifts.py says so)


@pytest.mark.parametrize("name", ["image-video", "resolution"])
def test_no_allocation_the_screen_passes_carries_both_phases(name: str) -> None:
    """shifts.py's argument for the bottleneck-differing shifts: at the phases' rates (0.85 of
    the simulator's measured capacity) the screen's carriers of one phase never carry the other,
    so the best allocation must move (the simulator's side is in SIM_CAPACITY_HZ's note)."""
    shift = SHIFTS[name]
    setups = phase_setups(shift)
    rates = phase_rates(shift, setups)[:2]
    assert rates == [p.rate_hz for p in shift.phases[:2]]

    def carriers(mix: str, rate: float) -> set[str]:
        s = setups[mix]
        cands = screen(s.profile, s.plan.cluster, s.mix, rate_hz=min(rate, 0.999 * screened(s)),
                       slo=s.slos["moderate"]).survivors
        return {c.allocation.label for c in cands}

    low, high = (carriers(p.mix, r) for p, r in zip(shift.phases[:2], rates, strict=True))
    assert low and high and not low & high
