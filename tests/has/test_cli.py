"""``easerve search``: bad input is one line and exit 2; a small search writes its outputs."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from easerve.cli import main
from runtime.configs import load_experiment
from tests.backends import needs_ray

CONFIG = """seed = 0
[model]
name = "llava-v1.6-34b"
[cluster]
gpu = "rtx6000ada"
num_gpus = 8
[workload]
mix = "llava-image"
rate_hz = 2.0
num_requests = 250
"""


@pytest.fixture()
def config(tmp_path: Path) -> Path:
    path = tmp_path / "llava.toml"
    path.write_text(CONFIG)
    return path


@pytest.mark.parametrize(("extra", "field"), [
    (["--sampler", "bayes"], "sampler"),
    (["--trials", "0"], "trials"),
    (["--rate", "0"], "rate"),
    (["--rate", "-1"], "rate"),
    (["--tier", "severe"], "tier"),
    (["--storage", "sqlite:////no/such/dir/x.db"], "storage"),
    (["--storage", "postgresql://nobody@127.0.0.1:1/has"], "storage"),
    (["--rate", "500"], "rate: no allocation carries 500 req/s"),
    (["--backend", "dask"], "unknown backend 'dask'; known: local, ray"),
    (["--address", "auto"], "address: only the ray backend"),
    (["--backend", "ray", "--address", "head:6379"], "not an SQLite file"),
    (["--trial-s", "0"], "trial-s"),
    (["--trial-s", "-5"], "trial-s"),
    (["--trial-s", "nan"], "trial-s"),
    (["--trial-s", "1e12"], "trial-s"),
    (["--num-requests", "250"], "--num-requests: trials are sized in time now; give --trial-s"),
    (["--recheck-top", "-1"], "recheck-top"),
    (["--recheck-seeds", "0"], "recheck-seeds"),
    (["--emit", "triton"], "--emit 'triton'; known: dynamo, sglang, vllm"),
])
def test_bad_input_is_one_line_and_exit_2(config: Path, tmp_path: Path, extra: list[str],
                                          field: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["search", str(config), "--rate", "2", "--out", str(tmp_path / "out"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("easerve search: error:") and field in err[-1]
    assert not (tmp_path / "out").exists()


def test_empty_space_names_the_bottleneck_stage(config: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", str(config), "--rate", "500", "--out", str(tmp_path / "o")]) == 2
    assert "limited by its" in capsys.readouterr().err


def test_search_emits_the_pick_as_a_recipe(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["search", str(config), "--rate", "2", "--trials", "3", "--trial-s", "10", "--sampler", "random",
            "--recheck-top", "1", "--recheck-seeds", "1", "--emit", "vllm", "--out", str(out)]
    assert main(argv) == 0
    launch = (out / "recipe-vllm" / "launch.sh").read_text()
    best = load_experiment(out / "best.toml").deployment
    assert "vllm serve" in launch and f"max-num-seqs {best.max_encode_batch}" in launch.replace("=", " ")
    assert main(argv) == 0  # a rerun replaces the recipe
    assert (out / "recipe-vllm" / "RECIPE.md").is_file()
    pick = json.loads((out / "search.json").read_text())["pick"]
    assert pick["num_seeds"] == 1 and pick["ci95_rps"] is None  # one stream claims no interval


def test_small_search_writes_every_output(config: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    argv = ["search", str(config), "--rate", "2", "--trials", "4", "--trial-s", "10",
            "--sampler", "random", "--top", "2", "--out", str(out)]
    assert main(argv) == 0
    for name in ("trials.parquet", "trials.csv", "best.toml", "convergence.png", "search.json"):
        assert (out / name).is_file()
    trials = pd.read_parquet(out / "trials.parquet")
    assert len(trials) == 4 and (trials["sampler"] == "random").all()
    best = load_experiment(out / "best.toml")  # ready to run: it parses as a config
    assert best.deployment.num_gpus == 8
    assert tomllib.loads((out / "best.toml").read_text())["workload"]["rate_hz"] == 2.0
    assert "top 2 distinct deployments" in capsys.readouterr().out
    assert main(argv) == 0  # a rerun resumes the finished study: still 4 trials
    assert len(pd.read_parquet(out / "trials.parquet")) == 4


@needs_ray
@pytest.mark.usefixtures("ray_session")
def test_search_on_ray_jobs_writes_the_planned_trials(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["search", str(config), "--rate", "2", "--trials", "6", "--trial-s", "10",
            "--sampler", "random", "--backend", "ray", "--workers", "2", "--out", str(out)]
    assert main(argv) == 0
    trials = pd.read_parquet(out / "trials.parquet")
    assert sorted(trials["trial"]) == list(range(6))
