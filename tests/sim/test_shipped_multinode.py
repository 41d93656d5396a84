"""The shipped two-node example (docs/multinode.md's first example) loads and simulates."""

from __future__ import annotations

import pandas as pd

from easerve.cli import main
from easerve.resources import CONFIGS_DIR, load_config


def test_a_two_node_config_ships():
    names = sorted(p.name for p in CONFIGS_DIR.glob("*_2x8*.toml"))
    assert names, "no configs/*_2x8*.toml ships"
    for name in names:
        config = load_config(name)
        cluster = config.build_cluster()
        assert (cluster.num_nodes, cluster.num_gpus) == (2, 16), name
        assert "nic_bytes_per_s" in config.cluster and "nic_latency_s" in config.cluster, name


def test_the_two_node_example_simulates_on_both_nodes(tmp_path, capsys):
    name = sorted(p.name for p in CONFIGS_DIR.glob("*_2x8*.toml"))[0]
    out = tmp_path / "run"
    assert main(["sim", name, "--out", str(out), "--no-plots", "--rate", "4"]) == 0
    records = pd.read_parquet(out / "records.parquet")
    assert len(records) and (records["status"] == "ok").all()
    util = pd.read_parquet(out / "utilization.parquet")
    assert max(util["gpu"]) >= 8  # workers sit on the second node (GPU ids 8..15) too
    assert "error" not in capsys.readouterr().err
