"""Profile documents: JSON round trips, refusals, kinds, and the committed profiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration import PROFILE_KINDS, AnalyticProfile, analytic_doc, load_profile, profile_from_doc
from calibration.fit import FittedProfile
from easerve_core.profile import ParallelProfile, ProfileDoc, StageProfile
from runtime.profiles import load_profile_doc, save_profile_doc

PROFILE_DIR = Path(__file__).resolve().parents[2] / "calibration" / "profiles"
PAPER = [(m, g) for m in ("llava-v1.6-34b", "qwen2.5-vl-32b", "ultravox-v0.6-gemma3-27b")
         for g in ("rtx6000ada", "h200")]


@pytest.fixture(scope="module")
def doc() -> ProfileDoc:
    return analytic_doc("ultravox-v0.6-gemma3-27b", "rtx6000ada", lm_tp=2, created="2026-01-01")


def test_analytic_profile_round_trips_unchanged(doc, tmp_path):
    path = save_profile_doc(doc, tmp_path / "p.json")
    again = load_profile_doc(path)
    assert again == doc
    assert save_profile_doc(again, tmp_path / "q.json").read_text() == path.read_text()
    assert isinstance(load_profile(path), AnalyticProfile)
    assert load_profile(path) == profile_from_doc(doc)


def test_fitted_profile_round_trips_unchanged(tmp_path):
    fitted = FittedProfile(
        encode={"fixed_s": 1e-3, "per_item_s": 1e-4, "per_token_s": 1e-6, "fill_tokens": 900.0},
        prefill={"fixed_s": 1e-3, "per_token_s": 1e-4, "per_token2_s": 1e-9, "fill_tokens": 500.0},
        decode={"fixed_s": 1e-2, "per_seq_s": 1e-4, "per_context_token_s": 1e-8},
        embed_bytes_per_token=10, kv_bytes_per_token=20)
    doc = ProfileDoc(kind="fitted", model="m", gpu="g", source="test", created="2026-01-01",
                     params=fitted.to_params(), fit_error={"encode": 0.01})
    loaded = load_profile(save_profile_doc(doc, tmp_path / "f.json"))
    assert loaded == fitted and isinstance(loaded, StageProfile)


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.update(version=99), "field 'version' is 99; this easerve reads version 1"),
    (lambda d: d.pop("params"), "missing field 'params'"),
    (lambda d: d.pop("kind"), "missing field 'kind'"),
    (lambda d: d.update(format="other"), "field 'format'"),
    (lambda d: d.update(kind="quantum"), "unknown profile kind 'quantum'; known: analytic, fitted"),
    (lambda d: d["params"].pop("gpu_spec"), "missing object 'gpu_spec'"),
    (lambda d: d["params"]["model_spec"].pop("lm"), "model spec .* is malformed"),
    # found by tests/core/mutation.py (kind profiles): a TypeError, or float()'s message naming no field
    (lambda d: d.update(fit_error={"encode": [0.1]}), r"fit_error\['encode'\] must be a number, got \[0.1\]"),
    (lambda d: d.update(fit_error={"decode": "x"}), r"fit_error\['decode'\] must be a number, got 'x'"),
])
def test_bad_profiles_are_refused_with_a_clear_error(doc, tmp_path, edit, match):
    data = json.loads(json.dumps(doc.to_json_dict()))
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=match):
        load_profile(path)


def test_profile_kinds_table_names_every_producer():
    assert set(PROFILE_KINDS) == {"analytic", "fitted", "measured", "scaled"}


@pytest.mark.parametrize("model, gpu", PAPER)
def test_committed_profiles_load_and_match_the_current_model(model, gpu):
    path = PROFILE_DIR / f"{model}--{gpu}.json"
    committed = load_profile_doc(path)
    fresh = analytic_doc(model, gpu, lm_tp=2, created=committed.created)
    assert committed == fresh, f"regenerate {path.name}: easerve profile analytic ... --tp 2"
    profile = load_profile(path)
    assert isinstance(profile, ParallelProfile) and committed.sm_share_table is not None
