"""``easerve model import`` / ``model list`` / ``gpu import`` and specs by path or EASERVE_SPEC_PATH.

Real configs come from the installed aiconfigurator-core (read in place);
the other families are tiny configs built in code (tests/calibration/importer_configs.py).
The three paper models, imported from configs carrying their published numbers,
equal the hand-written specs field for field, their processor rules included.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from calibration.specs import model_spec
from easerve.cli import main
from tests.calibration import importer_configs as cfgs
from tests.cli.refusal import refused

ROOT = Path(__file__).resolve().parents[2]
PAPER = {
    "llava-v1.6-34b": (cfgs.llava_v16_34b, "image", "llava-hf/llava-v1.6-34b-hf"),
    "qwen2.5-vl-32b": (cfgs.qwen25_vl_32b, "video", "Qwen/Qwen2.5-VL-32B-Instruct"),
    "ultravox-v0.6-gemma3-27b": (cfgs.ultravox_gemma3_27b, "audio", "fixie-ai/ultravox-v0_6-gemma-3-27b"),
}


def _import(src: Path, out: Path, *extra: str) -> int:
    return main(["model", "import", str(src), "--out", str(out), *extra])


@pytest.mark.parametrize("name", cfgs.AIC_CONFIGS)
def test_aiconfigurator_configs_import(tmp_path: Path, name: str) -> None:
    out = tmp_path / "spec.json"
    assert _import(cfgs.aic_config(name), out) == 0
    spec = model_spec(str(out))
    assert spec.lm.active_params <= spec.lm.params
    assert spec.lm.is_moe == ("A3B" in name or "A22B" in name or "16E" in name or "128E" in name
                              or "26B-A4B" in name)
    raw = json.loads(out.read_text())
    assert raw["lm"]["num_layers"]["mark"] == "V" and "num_hidden_layers" in raw["lm"]["num_layers"]["source"]


def test_moe_active_and_total() -> None:
    """Qwen3-VL-30B-A3B: about 30.5 B weights held, about 3.3 B computed per token."""
    from calibration.importers import import_model
    from calibration.specs import ModelSpec, strip_marks

    spec = ModelSpec.from_dict(strip_marks(import_model(cfgs.aic_config("Qwen--Qwen3-VL-30B-A3B-Instruct")),
                                           "", {}))
    assert 30.0e9 < spec.lm.params < 31.0e9 and 3.2e9 < spec.lm.active_params < 3.5e9
    assert spec.lm.num_experts == 128 and spec.lm.num_experts_per_token == 8
    assert spec.lm.experts_touched(1) == pytest.approx(8)
    assert spec.lm.experts_touched(1000) == pytest.approx(128)


@pytest.mark.parametrize("family", list(cfgs.tiny_configs()))
def test_tiny_families_import(tmp_path: Path, family: str) -> None:
    folder = cfgs.write(tmp_path / family, cfgs.tiny_configs()[family])
    out = tmp_path / f"{family}.json"
    assert _import(folder, out) == 0
    spec = model_spec(str(out))
    if family == "mqa_sliding_llama":
        assert spec.lm.num_kv_heads == 1 and spec.lm.num_sliding_layers == spec.lm.num_layers == 2
        assert spec.lm.sliding_window_tokens == 16


@pytest.mark.parametrize("name", list(PAPER))
def test_paper_models_equal_hand_written(tmp_path: Path, name: str) -> None:
    build, modality, hf_id = PAPER[name]
    folder = cfgs.write(tmp_path / name, build())
    if name in cfgs.PAPER_PREPROCESSORS:
        (folder / "preprocessor_config.json").write_text(json.dumps(cfgs.PAPER_PREPROCESSORS[name]))
    out = tmp_path / f"{name}.json"
    assert _import(folder, out, "--modality", modality, "--hf-id", hf_id) == 0
    assert model_spec(str(out)).to_dict() == model_spec(name).to_dict()
    assert model_spec(str(out)).processor == model_spec(name).processor is not None
    assert model_spec(str(out)).modalities == model_spec(name).modalities  # what the family takes


def test_the_context_comes_from_the_file_never_a_class_default(tmp_path: Path) -> None:
    folder = cfgs.write(tmp_path / "a", cfgs.tiny_configs()["llava_next"])
    raw = json.loads((folder / "config.json").read_text())
    assert _import(folder, tmp_path / "a.json") == 0
    context = raw["text_config"]["max_position_embeddings"]
    assert model_spec(str(tmp_path / "a.json")).max_context_tokens == context
    del raw["text_config"]["max_position_embeddings"]  # the class has a default; the checkpoint said none
    (folder / "config.json").write_text(json.dumps(raw))
    assert _import(folder, tmp_path / "b.json") == 0
    assert model_spec(str(tmp_path / "b.json")).max_context_tokens == 0


def test_spec_path_env_and_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    folder = cfgs.write(tmp_path / "m", cfgs.tiny_configs()["qwen2_5_vl"])
    assert _import(folder, tmp_path / "specs" / "models" / "tiny-qwen.json") == 0
    monkeypatch.setenv("EASERVE_SPEC_PATH", str(tmp_path / "specs"))
    capsys.readouterr()
    assert main(["model", "list"]) == 0
    listed = capsys.readouterr().out
    assert "tiny-qwen" in listed and str(tmp_path / "specs" / "models") in listed
    llava = next(line for line in listed.splitlines() if "llava-v1.6-34b" in line)
    assert "takes image " in llava and "context 4,096" in llava  # what a run is held to
    assert "takes image+video" in next(line for line in listed.splitlines() if "tiny-qwen" in line)
    assert model_spec("tiny-qwen").name == "tiny-qwen"


#: the [workload] mix lines for a spec of each modality (a model is refused a stream it has no tower for)
_MIX = {"image": ['mix = "llava-image"', "item_tokens = [880]"], "audio": ['mix = "ultravox-audio"']}


def _sim_config(tmp_path: Path, model: dict[str, Any], gpu: str = "h200", modality: str = "image") -> Path:
    text = "\n".join([
        "seed = 0", "[model]", *[f'{k} = "{v}"' for k, v in model.items()],
        "[cluster]", f'gpu = "{gpu}"', "num_gpus = 8",
        "[deployment]", "encode = { num_workers = 2, tp = 1 }", "prefill = { num_workers = 1, tp = 2 }",
        "decode = { num_workers = 2, tp = 2 }", "max_encode_batch = 4", "remote_fraction = 1.0",
        "[workload]", *_MIX[modality], "rate_hz = 1.0", "num_requests = 40", ""])
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


def test_sim_on_spec_by_path(tmp_path: Path) -> None:
    spec = tmp_path / "q.json"
    assert _import(cfgs.aic_config("Qwen--Qwen3-VL-8B-Instruct"), spec) == 0
    config = _sim_config(tmp_path, {"spec": "q.json"}, gpu="l40s")
    assert main(["sim", str(config), "--out", str(tmp_path / "run")]) == 0
    resolved = (tmp_path / "run").rglob("*.json")
    assert any(p.is_file() for p in resolved)


SHIPPED = sorted(p.name for p in (ROOT / "configs").glob("*.toml") if "specs/models" in p.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("config", SHIPPED)
def test_shipped_imported_configs_sim_and_search(tmp_path: Path, config: str) -> None:
    path = ROOT / "configs" / config
    assert main(["sim", str(path), "--out", str(tmp_path / "sim")]) == 0
    assert main(["search", str(path), "--rate", "1", "--trials", "10", "--trial-s", "5",
                 "--min-requests", "60", "--recheck-top", "1", "--recheck-seeds", "1",
                 "--out", str(tmp_path / "search")]) == 0


def _shipped_family(config: str) -> str:
    text = (ROOT / "configs" / config).read_text()
    spec = next(line.split('"')[1] for line in text.splitlines() if line.startswith("spec = "))
    return str(json.loads((ROOT / "configs" / spec).read_text())["imported_from"]["model_type"])


def test_every_family_has_a_shipped_example() -> None:
    from calibration.importers import FAMILIES

    assert set(FAMILIES) <= {_shipped_family(c) for c in SHIPPED}


@pytest.mark.slow
def test_examples_built_in_code_reproduce() -> None:
    """bench/import_examples.py rebuilds the shipped specs built in code byte for byte."""
    from bench.import_examples import main as rebuild

    assert rebuild(["--check"]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("family", list(cfgs.tiny_configs()))
def test_tiny_families_sim_and_search(tmp_path: Path, family: str) -> None:
    folder = cfgs.write(tmp_path / family, cfgs.tiny_configs()[family])
    assert _import(folder, tmp_path / "m.json") == 0
    config = _sim_config(tmp_path, {"spec": "m.json"}, modality=model_spec(str(tmp_path / "m.json")).modality)
    assert main(["sim", str(config), "--out", str(tmp_path / "sim")]) == 0
    assert main(["search", str(config), "--rate", "1", "--trials", "10", "--trial-s", "5",
                 "--min-requests", "40", "--recheck-top", "1", "--recheck-seeds", "1",
                 "--out", str(tmp_path / "search")]) == 0


# Bad input: one line naming the key, exit 2, nothing written.

def _raw(tmp_path: Path, data: Any) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(data if isinstance(data, str) else json.dumps(data))
    return folder


def test_bad_unknown_model_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _raw(tmp_path, {"model_type": "no_such_vlm"})
    refused(tmp_path, capsys, ["model", "import", str(src), "--out", str(tmp_path / "o.json")],
            "no_such_vlm", "qwen2_5_vl", "llava_next")


def test_bad_refused_cross_attention(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _raw(tmp_path, {"model_type": "mllama"})
    refused(tmp_path, capsys, ["model", "import", str(src), "--out", str(tmp_path / "o.json")],
            "mllama", "cross-attention")


def test_bad_missing_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = cfgs.tiny_configs()["qwen2_5_vl"].to_dict()
    del data["model_type"]
    src = _raw(tmp_path, data)
    refused(tmp_path, capsys, ["model", "import", str(src), "--out", str(tmp_path / "o.json")], "model_type")


def test_bad_missing_ultravox_sub_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = cfgs.ultravox_gemma3_27b()
    del data["audio_config"]
    src = _raw(tmp_path, data)
    refused(tmp_path, capsys, ["model", "import", str(src), "--out", str(tmp_path / "o.json")],
            "audio_config")


@pytest.mark.parametrize("heads", ["8", 8.5])
def test_bad_non_integer_heads(tmp_path: Path, capsys: pytest.CaptureFixture[str], heads: Any) -> None:
    data = cfgs.tiny_configs()["qwen2_5_vl"].to_dict()
    data["text_config"]["num_attention_heads"] = heads
    src = _raw(tmp_path, data)
    refused(tmp_path, capsys, ["model", "import", str(src), "--out", str(tmp_path / "o.json")],
            "text_config.num_attention_heads", "integer")


def test_bad_folder_without_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    refused(tmp_path, capsys, ["model", "import", str(tmp_path / "empty"), "--out", str(tmp_path / "o.json")],
            "no config.json")


def test_bad_config_not_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _raw(tmp_path, "{not json")
    refused(tmp_path, capsys, ["model", "import", str(src), "--out", str(tmp_path / "o.json")], "not JSON")


def test_bad_spec_file_not_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.json").write_text("{nope")
    config = _sim_config(tmp_path, {"spec": "bad.json"})
    refused(tmp_path, capsys, ["sim", str(config), "--out", str(tmp_path / "run")], "bad.json", "not JSON")


def test_bad_gpu_negative_bandwidth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads((ROOT / "calibration/specs/gpus/h200.json").read_text())
    data["mem_bandwidth_bytes_per_s"] = -1.0
    (tmp_path / "g.json").write_text(json.dumps(data))
    refused(tmp_path, capsys, ["gpu", "import", str(tmp_path / "g.json"), "--out", str(tmp_path / "o.json")],
            "mem_bandwidth_bytes_per_s", "> 0")


def test_gpu_import_marks_plain_values(tmp_path: Path) -> None:
    marked = json.loads((ROOT / "calibration/specs/gpus/l40s.json").read_text())
    data = {k: (v["value"] if isinstance(v, dict) else v) for k, v in marked.items() if k != "marks"}
    (tmp_path / "mine.json").write_text(json.dumps(data))
    assert main(["gpu", "import", str(tmp_path / "mine.json"), "--name", "mine", "--out",
                 str(tmp_path / "gpus" / "mine.json")]) == 0
    written = json.loads((tmp_path / "gpus" / "mine.json").read_text())
    assert written["num_sms"]["mark"] == "G" and written["name"] == "mine"


@pytest.mark.parametrize(("file", "body", "needles"), [
    ("video_preprocessor_config.json", '{"size": ', ("video_preprocessor_config.json: not JSON",)),
    ("video_preprocessor_config.json", "[1, 2]", ("video_preprocessor_config.json: not a JSON object",)),
    ("video_preprocessor_config.json", '{"size": {"shortest_edge": "big", "longest_edge": 5}}',
     ("video_preprocessor_config.json: size.shortest_edge must be an integer",)),
    ("video_preprocessor_config.json", '{"size": {"shortest_edge": 500, "longest_edge": 5}}',
     ("video_min_pixels must be <= video_max_pixels", "500 > 5")),
    ("preprocessor_config.json", '{"min_pixels": 8.5, "max_pixels": 100000}',
     ("preprocessor_config.json: min_pixels must be an integer",)),
])
def test_bad_processor_files_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str,
                                       body: str,
                                       needles: tuple[str, ...]) -> None:
    folder = cfgs.write(tmp_path / "qwen", cfgs.tiny_configs()["qwen2_5_vl"])
    (folder / file).write_text(body)
    refused(tmp_path, capsys, ["model", "import", str(folder), "--out", str(tmp_path / "o.json")], *needles)


def _changed(family: str, change: Any) -> dict[str, Any]:
    data = cfgs.ultravox_gemma3_27b() if family == "ultravox" else cfgs.tiny_configs()[family].to_dict()
    change(data)
    return data


#: what mutating configs at random found (tests/core/mutation.py, kind ``models``): each crashed
#: (TypeError, ZeroDivisionError) or printed transformers' whole message, a 48-entry list and all
@pytest.mark.parametrize(("family", "change", "processor", "needles"), [
    ("qwen2_5_vl", lambda d: d.update(model_type=["qwen2_5_vl"]), None, ("model_type must be a string",)),
    ("qwen2_5_vl", lambda d: d["text_config"].update(
        layer_types=["full_attention"] * (d["text_config"]["num_hidden_layers"] - 1) + [1.5]), None,
     ("transformers cannot read it: field 'layer_types' must be list[str] | NoneType",)),
    ("qwen2_5_vl", lambda d: d["text_config"].update(num_attention_heads=0), None,
     ("text_config.num_attention_heads must be at least 1, got 0",)),
    ("qwen2_5_vl", lambda d: None, {"min_pixels": {"value": 1}, "max_pixels": 100000},
     ("preprocessor_config.json: min_pixels must be an integer",)),
    ("llava_next", lambda d: d.update(image_grid_pinpoints=[[32, 64], [64, {}]]), None,
     ("image_grid_pinpoints[1] must be [height, width] in whole pixels",)),
    ("llava_next", lambda d: d["vision_config"].update(patch_size=64), None,
     ("vision_config.patch_size (64) must be at most vision_config.image_size (32)",)),
    ("ultravox", lambda d: d["audio_config"].update(activation_dropout=[1]), None,
     ("transformers cannot read audio_config: field 'activation_dropout' must be float | int",)),
    ("ultravox", lambda d: d.update(stack_factor=0), None, ("stack_factor must be at least 1, got 0",)),
    ("internvl", lambda d: None, {"max_patches": 0}, ("max_patches must be at least 1, got 0",)),
    ("internvl", lambda d: d.update(downsample_ratio="x"), None,
     ("field 'downsample_ratio' must be float, got str",)),
    ("idefics3", lambda d: None, {"size": [1, 2]}, ("preprocessor_config.json: size must be a table",)),
    ("idefics3", lambda d: d.update(scale_factor=0), None, ("scale_factor must be at least 1, got 0",)),
])
def test_bad_configs_found_by_mutation_are_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], family: str, change: Any,
        processor: dict[str, Any] | None, needles: tuple[str, ...]) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_changed(family, change)))
    if processor is not None:
        (folder / "preprocessor_config.json").write_text(json.dumps(processor))
    refused(tmp_path, capsys, ["model", "import", str(folder), "--out", str(tmp_path / "o.json")], *needles)


def test_a_refused_import_prints_one_line_with_transformers_notices_silenced(tmp_path: Path) -> None:
    """transformers logs to the terminal (not through pytest's capture) when it reads a token id
    outside the vocabulary or a rope type it has no check for; the import silences it, so the
    refusal is the one line on stderr."""
    import subprocess
    import sys

    data = cfgs.tiny_configs()["qwen2_5_vl"].to_dict()
    data["text_config"].update(eos_token_id=-1, rope_parameters={"rope_type": 0}, num_attention_heads=0)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(data))
    done = subprocess.run([sys.executable, "-m", "easerve", "model", "import", str(folder), "--out",
                           str(tmp_path / "o.json")], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 2
    said = "text_config.num_attention_heads must be at least 1, got 0"
    assert done.stderr.strip().splitlines() == [f"easerve model: error: {folder / 'config.json'}: {said}"]
    assert not (tmp_path / "o.json").exists()
