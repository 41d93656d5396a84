"""The headline on measured hardware: the setups on H100/H200, the ranking reader, the report section."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from calibration import MeasuredProfile, aiconfigurator
from easerve.experiments.measured_setup import (
    gpu_of,
    have_database,
    measured_setup,
    roofline_setup,
    setup_for,
)
from easerve.experiments.measured_study import ranking_changes, rankings, reference_peaks
from easerve.experiments.report_measured import measured_sections
from easerve.experiments.setup import load_setup, run

needs_db = pytest.mark.skipif(importlib.util.find_spec(aiconfigurator.PACKAGE) is None,
                              reason="needs the measured extra (aiconfigurator-core)")


@needs_db
def test_a_measured_setup_on_h200_builds_and_simulates():
    assert have_database()  # the full run's study runs (it is skipped, logged, without the extra)
    setup = measured_setup("image", "h200_sxm")
    assert isinstance(setup.profile, MeasuredProfile)
    assert setup.plan.cluster.gpu == "h200" and setup.plan.cluster.num_gpus == 8
    assert setup.profile.database["system"] == "h200_sxm"
    rtx = load_setup("image", anchored=True)
    assert setup.deployment == rtx.deployment  # the example config's, on the other server
    # the same anchored per-call costs; the server's own SLOs (faster: tighter TPOT)
    assert setup.efficiency.encode_call_residual_s == rtx.efficiency.encode_call_residual_s
    assert setup.slos["moderate"].tpot_s < rtx.slos["moderate"].tpot_s
    result = run(setup, setup.deployment, rate_hz=1.0, num_requests=20)
    summary = result.summary(setup.slos["moderate"])
    assert summary.num_requests == 20 and summary.goodput_rps > 0


def test_a_roofline_setup_on_h100_uses_the_analytic_profile_of_that_gpu():
    setup = roofline_setup("audio", "h100_sxm")
    assert setup.plan.cluster.gpu == "h100-sxm"
    assert setup.profile.gpu.name == "h100-sxm"
    assert setup.efficiency == load_setup("audio", anchored=True).efficiency


def test_unknown_names_are_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown system 'tpu'; known: h200_sxm"):
        gpu_of("tpu")
    with pytest.raises(ValueError, match="unknown profile kind 'fitted'; known: measured, roofline"):
        setup_for("image", "h200_sxm", "fitted")


def test_the_default_setup_is_unchanged_by_the_gpu_seam():
    a, b = load_setup("video", anchored=True), load_setup("video", anchored=True)
    assert a.plan.cluster.gpu == "rtx6000ada" and a.slos == b.slos


def _peaks() -> pd.DataFrame:
    committed = pd.DataFrame({
        "modality": ["image"] * 4, "system": ["easerve", "dynamo", "vllm", "fixed-batch"],
        "tuning": "tuned", "at_rate_hz": 1.0, "goodput_rps": [2.5, 1.5, 1.3, 2.0], "censored": False})
    measured = pd.DataFrame({
        "gpu": "h200", "profile_kind": ["measured"] * 4 + ["roofline"] * 4,
        "modality": "image", "system": ["easerve", "dynamo", "vllm", "fixed-batch"] * 2,
        "peak_goodput_rps": [9.0, 3.0, 4.0, 9.1, 9.0, 3.0, 2.0, 8.0], "at_rate_hz": 5.0,
        "censored": [True, False, False, False] * 2})
    return measured, committed


def test_rankings_and_changes_are_computed_against_the_rtx_roofline():
    measured, committed = _peaks()
    peaks = pd.concat([reference_peaks(committed), measured], ignore_index=True)
    ranks = rankings(peaks).set_index(["gpu", "profile_kind"])["ranking"]
    assert ranks[("rtx6000ada", "roofline")] == "easerve > fixed-batch > dynamo > vllm"
    assert ranks[("h200", "measured")] == "fixed-batch = easerve > vllm > dynamo"
    assert ranking_changes(peaks) == [
        "image, h200 measured (fixed-batch = easerve > vllm > dynamo): easerve = fixed-batch, "
        "easerve above before; vllm above dynamo",
        "image, h200 roofline (easerve > fixed-batch > dynamo > vllm): same order"]
    assert ranking_changes(peaks, ("h200", "measured"), [("h200", "roofline")]) == [
        "image, h200 roofline (easerve > fixed-batch > dynamo > vllm): easerve above fixed-batch, "
        "tied before; dynamo above vllm"]


def test_the_report_section_renders_from_a_small_table_and_is_absent_without_it():
    measured, committed = _peaks()
    assert measured_sections({"peak_goodput": committed}) == []
    text = "\n\n".join(measured_sections({"headline_measured": measured, "peak_goodput": committed}))
    assert text.startswith("## The headline on measured hardware")
    assert "| image | easerve | 2.5 | >= 9 | >= 9 |" in text
    assert "- image, h200 measured (fixed-batch = easerve > vllm > dynamo): easerve = fixed-batch" in text
    # without the committed headline the section still renders, with nothing to compare against
    alone = "\n\n".join(measured_sections({"headline_measured": measured}))
    assert "- (nothing to compare)" in alone and "; vllm above dynamo" in alone


def test_the_full_run_has_the_study_and_the_quick_run_lists_it_as_cut():
    from easerve.experiments.reproduce import FULL, QUICK, cuts

    assert FULL.measured_headline and not QUICK.measured_headline
    assert "headline on 8 x H100 and 8 x H200 measured profiles: 0 (full run: 1)" in cuts(QUICK)


def test_the_entry_point_refuses_an_unknown_system_in_one_line_and_writes_nothing(tmp_path, capsys):
    from easerve.experiments.headline_measured import main

    out = tmp_path / "out"
    assert main(["--out", str(out), "--systems", "tpu", "--kinds", "roofline"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: unknown system 'tpu'")
    assert not out.exists()


def test_the_entry_point_checks_its_out_before_the_run(tmp_path, capsys):
    from easerve.experiments.headline_measured import main

    (tmp_path / "taken").write_text("a file")
    out = tmp_path / "taken" / "out"
    assert main(["--out", str(out), "--kinds", "roofline"]) == 2  # before any simulation: no time spent
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        f"error: --out {out}: {tmp_path / 'taken'} is a file, not a folder"
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]
