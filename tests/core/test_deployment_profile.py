"""Deployments, clusters, configs and the profile file format."""

from __future__ import annotations

import json

import pytest

from easerve_core.cluster import Cluster
from easerve_core.config import ExperimentConfig
from easerve_core.deployment import Deployment, StageGroup
from easerve_core.profile import PROFILE_VERSION, ProfileDoc
from easerve_core.sm_share import SMShareTable
from runtime.configs import load_experiment
from runtime.profiles import load_profile_doc, save_profile_doc


def test_deployment_counts_gpus_and_checks_the_cluster():
    d = Deployment(encode=StageGroup(num_workers=2), prefill=StageGroup(num_workers=1, tp=2),
                   decode=StageGroup(num_workers=2, tp=2), remote_fraction=0.5)
    assert d.num_gpus == 8 and d.has_local_prefill
    d.check_fits(Cluster(gpu="rtx6000ada", num_gpus=8))
    with pytest.raises(ValueError, match="needs 8 GPUs"):
        d.check_fits(Cluster(gpu="rtx6000ada", num_gpus=4))


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"max_encode_batch": 0}, "max_encode_batch"),
        ({"remote_fraction": 1.5}, "remote_fraction"),
        ({"remote_fraction": float("nan")}, "remote_fraction"),
        ({"sm_sharing": "mps"}, "sm_sharing"),
        ({"batching": "lazy"}, "batching"),
        ({"encode": {"num_workers": 1, "tp": 3}}, "tp"),
        ({"prefill": StageGroup(num_workers=0, tp=2)}, "prefill.num_workers"),
        ({"remote_fraction": 0.5, "sm_sharing": "none"}, "sm_sharing"),
    ],
)
def test_bad_deployments_name_the_field(changes, field):
    with pytest.raises(ValueError, match=field):
        Deployment(**changes)


def test_deployment_dict_round_trip():
    d = Deployment(remote_fraction=0.25, sm_sharing="static")
    assert Deployment.from_dict(d.to_dict()) == d
    with pytest.raises(ValueError, match="colour"):
        Deployment.from_dict({**d.to_dict(), "colour": "red"})


def doc():
    return ProfileDoc(kind="analytic", model="m", gpu="g", source="test", created="2026-11-29",
                      params={"a": 1.5, "nested": {"b": [1, 2]}},
                      sm_share_table=SMShareTable({1: 0.2, 8: 1.0}), fit_error={"encode": 0.03})


def test_profile_doc_round_trips(tmp_path):
    path = save_profile_doc(doc(), tmp_path / "p.json")
    assert load_profile_doc(path) == doc()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(version=PROFILE_VERSION + 1), "version"),
        (lambda d: d.pop("params"), "params"),
        (lambda d: d.pop("model"), "model"),
        (lambda d: d.update(format="other"), "format"),
        (lambda d: d.update(sm_share_table={"shares": {"1": 2.0}}), "share"),
    ],
)
def test_bad_profile_files_are_refused(tmp_path, edit, message):
    data = doc().to_json_dict()
    edit(data)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        load_profile_doc(path)


CONFIG = """
seed = 4
[model]
name = "llava-v1.6-34b"
[cluster]
gpu = "rtx6000ada"
[deployment]
encode = { num_workers = 2, tp = 1 }
prefill = { num_workers = 1, tp = 2 }
decode = { num_workers = 2, tp = 2 }
remote_fraction = 0.5
[workload]
mix = "llava-image"
rate_hz = 2.0
num_requests = 100
[slo]
tier = "tight"
"""


def test_config_loads_and_resolves(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(CONFIG)
    cfg = load_experiment(path)
    assert cfg.seed == 4 and cfg.slo_tier == "tight" and cfg.deployment.num_gpus == 8
    again = ExperimentConfig.from_dict(cfg.to_dict())
    assert again.deployment == cfg.deployment and again.workload == cfg.workload
    cluster = cfg.build_cluster(Cluster(gpu="x", link_bytes_per_s=1e9))
    assert cluster.gpu == "rtx6000ada" and cluster.link_bytes_per_s == 1e9


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("tier = \"tight\"", "tier = \"lax\"", "slo.tier"),
        ("rate_hz = 2.0", "rate_hz = -2.0", "rate_hz"),
        ("[slo]", "[colour]", "colour"),
        ("name = \"llava-v1.6-34b\"", "", "model.name"),
    ],
)
def test_bad_configs_name_the_field(tmp_path, old, new, field):
    path = tmp_path / "c.toml"
    path.write_text(CONFIG.replace(old, new))
    with pytest.raises(ValueError, match=field):
        load_experiment(path)
