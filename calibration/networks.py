"""Network (NIC) specifications for multi-node clusters, loaded from ``specs/networks/*.json``.

Each file holds a node NIC's line rate, the bandwidth and per-transfer
latency the simulator uses, each beside its source and mark (V read, D
derived, G guess; docs/profiles.md), as the GPU specs do. A node with
several NICs that a transfer stripes over is one spec with their sum
(docs/multinode.md). :func:`network_spec` is the registry: an unknown name
fails and lists the known.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

from calibration.specs import SPEC_DIR

NETWORK_DIR = SPEC_DIR / "networks"


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkSpec:
    """One node's network: bandwidth each way and the fixed cost of one transfer."""

    name: str
    full_name: str
    line_rate_gbit_per_s: float
    nic_bytes_per_s: float
    nic_latency_s: float
    provenance: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.nic_bytes_per_s > 0:
            raise ValueError(f"NetworkSpec.nic_bytes_per_s must be > 0, got {self.nic_bytes_per_s!r}")
        if not self.nic_latency_s >= 0:
            raise ValueError(f"NetworkSpec.nic_latency_s must be >= 0, got {self.nic_latency_s!r}")


def network_names() -> list[str]:
    return sorted(p.stem for p in NETWORK_DIR.glob("*.json"))


@functools.cache
def network_spec(name: str) -> NetworkSpec:
    """The network spec called ``name`` (a file under ``specs/networks``)."""
    path = NETWORK_DIR / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"unknown network {name!r}; known: {', '.join(network_names())}")
    data = json.loads(Path(path).read_text())
    values, provenance = {}, {}
    for key in ("line_rate_gbit_per_s", "nic_bytes_per_s", "nic_latency_s"):
        values[key] = float(data[key]["value"])
        provenance[key] = f"[{data[key]['mark']}] {data[key]['source']}"
    return NetworkSpec(name=data["name"], full_name=data["full_name"], provenance=provenance, **values)
