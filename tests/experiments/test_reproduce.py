"""``easerve reproduce --quick`` end to end: every table, figure and the report."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from easerve.cli import main
from easerve.experiments.anchor import paper_anchored_efficiency
from easerve.experiments.markdown import md_table
from easerve.experiments.setup import load_setup
from easerve.experiments.studies import _binned_step
from easerve.experiments.sweep import refine_rates

TABLES = ("goodput_sweep", "peak_goodput", "vllm_free_encoder", "fixed_batch", "burstiness",
          "rate_shift", "rate_shift_bins", "sm_ablation", "encoder_utilization",
          "has_convergence", "has_grid_best", "has_choices", "baseline_choices", "video_clip_length",
          "video_clip_length_sweep", "controller_shift", "controller_shift_phases", "controller_plan_table",
          "controller_shapes", "controller_shapes_phases", "controller_shapes_plan_tables")
FIGURES = ("goodput_curves", "burstiness", "rate_shift", "encoder_utilization", "has_convergence",
           "video_clip_length", "controller_shift", "controller_shapes")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    assert main(["reproduce", "--quick", "--quiet", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize(("extra", "message"), [
    (["--backend", "dask"], "unknown backend 'dask'; known: local, ray"),
    (["--jobs", "0"], "jobs must be >= 1"),
    (["--address", "auto"], "address: only the ray backend"),
])
def test_a_bad_backend_is_one_line_and_writes_nothing(tmp_path, capsys, extra, message):
    out = tmp_path / "out"
    assert main(["reproduce", "--quick", "--quiet", "--out", str(out), *extra]) == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
    assert not out.exists()


def test_quick_defaults_to_two_local_workers_and_the_full_run_to_this_process():
    from easerve.experiments.reproduce import FULL, QUICK, cuts, resolve_backend
    from runtime.parallel import BackendSettings

    assert resolve_backend(None, quick=True).num_jobs == min(2, os.cpu_count() or 1)
    assert resolve_backend(None, quick=False).num_jobs == 1
    assert resolve_backend(BackendSettings(num_jobs=4), quick=True).num_jobs == 4
    assert resolve_backend(BackendSettings(name="ray"), quick=True).num_jobs is None  # all CPUs
    assert "HAS-convergence seeds (TPE and random): 1 (full run: 5)" in cuts(QUICK)
    assert cuts(FULL) == []


def test_quick_run_writes_every_table_figure_and_the_report(quick_run):
    for name in TABLES:
        frame = pd.read_csv(quick_run / f"{name}.csv")
        assert not frame.empty, name
    for name in FIGURES:
        assert (quick_run / f"{name}.png").stat().st_size > 1000, name
    report = (quick_run / "report.md").read_text()
    from easerve.experiments.reproduce import resolve_backend

    assert "## What the quick run cuts" in report and "wall time" in report
    assert resolve_backend(None, quick=True).describe() in report
    for heading in ("Goodput at the moderate tier", "Fixed-batch trade-off", "Burstiness",
                    "Rate shifts", "SM-sharing ablation", "Encoder GPU utilisation",
                    "HAS convergence", "What-if: video clip length",
                    "Baselines at the example config's allocation", "Baseline choices (equal tuning)"):
        assert heading in report


def test_quick_run_shows_the_papers_directions(quick_run):
    peak = pd.read_csv(quick_run / "peak_goodput.csv")
    assert set(peak["tuning"]) == {"tuned", "config"}
    peak = peak[peak["tuning"] == "tuned"].set_index(["modality", "system"])
    for modality in ("image", "audio"):
        assert peak.loc[(modality, "easerve"), "goodput_rps"] > peak.loc[(modality, "dynamo"),
                                                                          "goodput_rps"]
    fixed = pd.read_csv(quick_run / "fixed_batch.csv").set_index("batch")
    assert fixed.loc[8, "throughput_rps"] > fixed.loc[1, "throughput_rps"]
    assert fixed.loc[8, "ttft_mean_s"] < fixed.loc[1, "ttft_mean_s"]
    util = pd.read_csv(quick_run / "encoder_utilization.csv").groupby("system")["busy_frac"].mean()
    assert util["easerve"] > util["dynamo"]


def test_clip_length_whatif_sweeps_our_clips_beside_the_headline_mix(quick_run):
    clip = pd.read_csv(quick_run / "video_clip_length.csv")
    assert set(clip["mix"]) == {"qwen-video x1", "qwen-video-rmm16"}
    assert set(clip["system"]) == {"dynamo", "vllm", "easerve"}
    by_mix = clip.groupby("mix")[["mean_item_tokens", "moderate_ttft_slo_s"]].first()
    ours, head = by_mix.loc["qwen-video x1"], by_mix.loc["qwen-video-rmm16"]
    assert head["mean_item_tokens"] == 5760 and ours["mean_item_tokens"] == pytest.approx(7560)
    assert head["moderate_ttft_slo_s"] < ours["moderate_ttft_slo_s"]
    peak = pd.read_csv(quick_run / "peak_goodput.csv")
    video = peak[(peak["modality"] == "video") & (peak["system"] == "vllm")
                 & (peak["tuning"] == "tuned")]["goodput_rps"].item()
    head_vllm = clip[(clip["mix"] == "qwen-video-rmm16") & (clip["system"] == "vllm")]
    assert head_vllm["goodput_rps"].item() == video
    sweep = pd.read_csv(quick_run / "video_clip_length_sweep.csv")
    assert set(sweep["label"]) == {"qwen-video x1"}


def test_every_curve_is_refined_around_its_own_peak(quick_run):
    sweep = pd.read_csv(quick_run / "goodput_sweep.csv")
    for _curve, curve in sweep.groupby(["modality", "system", "tuning"]):
        grid = curve[~curve["refined"]].groupby("rate_hz")["goodput_moderate_rps"].median()
        refined = sorted(set(curve[curve["refined"]]["rate_hz"]))
        assert refined == refine_rates(grid.index.tolist(), grid.tolist())


def test_with_item_scale_keeps_the_profile_and_checks_the_scale():
    from easerve.experiments.setup import with_item_scale

    video = load_setup("video")
    half = with_item_scale(video, 0.5)
    assert half.profile is video.profile and half.mix.item_weights == video.mix.item_weights
    assert max(half.mix.item_tokens) == round(max(video.mix.item_tokens) * 0.5)
    with pytest.raises(ValueError, match="scale must be > 0"):
        with_item_scale(video, 0.0)


def test_with_mix_swaps_the_mix_of_the_same_modality_only():
    from easerve.experiments.setup import with_item_scale, with_mix
    from easerve_core.workload import mix

    video = load_setup("video")
    assert video.mix.item_tokens == (5760,)  # the headline: vLLM random-mm's 16-frame bucket
    clips = with_mix(video, mix("qwen-video"), "qwen-video")
    assert clips.mix.item_tokens == (3600, 7200, 14400) and clips.profile is video.profile
    assert clips.workload.mix_name == "qwen-video" and video.workload.mix_name == "qwen-video-rmm16"
    assert with_item_scale(clips, 0.5).workload.mix_name == "qwen-video x0.5"
    assert clips.slos["moderate"].ttft_s > video.slos["moderate"].ttft_s
    with pytest.raises(ValueError, match="mix is audio"):
        with_mix(video, mix("ultravox-audio"))


def test_anchor_makes_a_request_at_a_time_call_take_the_papers_time():
    """Kernels + residual (on the SMs) + measured host preprocessing = 1 / 0.75 s for LLaVA."""
    eff = paper_anchored_efficiency(modality="image")
    setup = load_setup("image", efficiency=eff)
    assert load_setup("image", anchored=True).efficiency == eff
    items = [sorted(setup.mix.item_tokens)[len(setup.mix.item_tokens) // 2]]
    enc = setup.profile.for_tp(1)
    assert 1.0 / (enc.encode_s(items) + enc.host_preprocess_s(items)) == pytest.approx(0.75, rel=1e-9)


def test_binned_step_averages_a_step_function():
    step = pd.DataFrame({"time_s": [1.0, 2.0, 4.0], "busy_frac": [1.0, 0.5, 0.0]})
    out = _binned_step(step, 2.0)
    assert list(out["bin_s"]) == [0.0, 2.0]
    assert list(out["busy_frac"]) == pytest.approx([0.5, 0.5])


def test_md_table():
    text = md_table(pd.DataFrame({"a": [1.23456, float("nan")], "b": ["x", "y"]}))
    assert text.splitlines()[0] == "| a | b |" and "—" in text and "1.23" in text
