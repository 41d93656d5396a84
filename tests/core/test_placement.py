"""Placement: packed and spread strategies, explicit node lists, and the errors that name the field."""

from __future__ import annotations

import pytest

from easerve_core import Cluster, Deployment, StageGroup
from easerve_core.placement import Placement, layout

TWO = Cluster(gpu="g", num_gpus=16, num_nodes=2)
DEP = Deployment(encode=StageGroup(num_workers=4), prefill=StageGroup(num_workers=2, tp=2),
                 decode=StageGroup(num_workers=4, tp=2))


def test_packed_on_one_node_is_the_single_node_numbering() -> None:
    dep = Deployment(encode=StageGroup(num_workers=2), prefill=StageGroup(num_workers=1, tp=2),
                     decode=StageGroup(num_workers=2, tp=2))
    lay = layout(dep, Cluster(gpu="g"))
    assert lay.encode == ((0,), (1,)) and lay.prefill == ((2, 3),) and lay.decode == ((4, 5), (6, 7))


def test_packed_fills_node_zero_first_and_spread_alternates() -> None:
    packed = layout(DEP, TWO)
    assert packed.nodes("encode") == (0, 0, 0, 0) and packed.nodes("prefill") == (0, 0)
    assert packed.nodes("decode") == (1, 1, 1, 1)
    spread = layout(DEP.with_(placement=Placement(strategy="spread")), TWO)
    assert spread.nodes("encode") == (0, 1, 0, 1) and spread.nodes("prefill") == (0, 1)
    assert spread.nodes("decode") == (0, 1, 0, 1)
    assert spread.encode[1] == (8,) and spread.decode[0] == (4, 5)


def test_explicit_node_lists_and_round_trip() -> None:
    place = Placement.from_dict({"encode": [1, 1, 1, 1], "prefill": [0, 0], "decode": [0, 0, 1, 1]})
    dep = DEP.with_(placement=place)
    assert layout(dep, TWO).nodes("decode") == (0, 0, 1, 1)
    assert Deployment.from_dict(dep.to_dict()) == dep
    assert "placement" not in DEP.to_dict()
    assert dep.label().endswith("@E[1, 1, 1, 1] P[0, 0] D[0, 0, 1, 1]")


@pytest.mark.parametrize("cluster,dep,message", [
    (TWO, DEP.with_(placement=Placement.from_dict({"encode": [0, 0, 0, 3], "prefill": [0, 0],
                                                     "decode": [1, 1, 1, 1]})),
     r"deployment.placement.encode\[3\] is node 3 but the cluster has 2 node"),
    (Cluster(gpu="g", num_gpus=32, num_nodes=4), DEP.with_(decode=StageGroup(num_workers=1, tp=16)),
     "deployment.decode.tp is 16 but a node has 8"),
    (Cluster(gpu="g", num_gpus=32, num_nodes=8), DEP.with_(prefill=StageGroup(num_workers=1, tp=8)),
     "deployment.prefill.tp is 8 but a node has 4"),
])
def test_bad_placements_name_the_field(cluster: Cluster, dep: Deployment, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dep.check_fits(cluster)


@pytest.mark.parametrize("kwargs,field", [
    ({"num_nodes": 3}, "num_nodes must divide"), ({"nic_bytes_per_s": 0}, "nic_bytes_per_s must be > 0"),
    ({"nic_bytes_per_s": -5.0}, "nic_bytes_per_s must be > 0"), ({"nic_latency_s": -1}, "nic_latency_s"),
    ({"link_sharing": "x"}, "link_sharing"),
])
def test_bad_clusters_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Cluster(gpu="g", num_gpus=16, **kwargs)  # type: ignore[arg-type]
