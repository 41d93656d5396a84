"""What-ifs on several nodes: network speed, placement, cluster size; goodput vs one node.

For each paper config (image, video, audio on RTX 6000 Ada) the config's
own deployment D on one node of 8 GPUs at its rate r is the baseline. On
``n`` nodes (n = 2: 16 GPUs, n = 4: 32 GPUs) the deployment is D with every
stage's worker count times n, at n x r (n x the requests, so the run spans
the same time), placed

* ``spread``: worker i of each stage on node i mod n, hand-offs kept on the
  sender's node (each node a copy of D);
* ``packed``: workers in stage order on the first node with room (stages
  grouped: encode and prefill first, decode on the last nodes), so KV and
  embeddings cross the NICs;

with 100 GbE or NDR 400 NICs (calibration/specs/networks). A second table
compares a dedicated encode node against encode workers spread over both
nodes, same worker counts, at 2 x r. Every run is one simulator run of the
config's seed; goodput at the config's SLO tier (the single-node SLO).
Writes ``<out>/multinode_whatif.csv`` and ``<out>/multinode_whatif.png``
and prints both tables.

Run: ``.venv/bin/python bench/multinode_whatif.py [--out docs/results] [--models image,audio]``
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from calibration.networks import network_spec  # noqa: E402
from calibration.session import Overrides, compose  # noqa: E402
from easerve.resources import load_config  # noqa: E402
from easerve_core import Deployment, StageGroup  # noqa: E402
from easerve_core.placement import Placement  # noqa: E402
from easerve_core.slo import goodput_rps  # noqa: E402

CONFIGS = {
    "image": ROOT / "configs" / "llava34b_rtx6000ada.toml",
    "video": ROOT / "configs" / "qwen25vl32b_rtx6000ada.toml",
    "audio": ROOT / "configs" / "ultravox27b_rtx6000ada.toml",
}
NETWORKS = ("eth-100g", "ndr-400g")


def _scaled(dep: Deployment, n: int) -> Deployment:
    return dep.with_(**{s: StageGroup(num_workers=getattr(dep, s).num_workers * n, tp=getattr(dep, s).tp)
                        for s in ("encode", "prefill", "decode")})


def run_one(modality: str, *, nodes: int, network: str | None, deployment: Any = None,
            placement: Placement | None = None) -> dict[str, Any]:
    """One simulator run of ``modality``'s config on ``nodes`` x 8 GPUs (see the module docstring)."""
    config = load_config(CONFIGS[modality])
    rate = config.workload.mean_rate_hz * nodes
    cluster = dict(config.cluster, num_gpus=8 * nodes, num_nodes=nodes)
    if network is not None:
        net = network_spec(network)
        cluster.update(nic_bytes_per_s=net.nic_bytes_per_s, nic_latency_s=net.nic_latency_s)
    workload = replace(config.workload, num_requests=config.workload.num_requests * nodes)
    dep = deployment or _scaled(config.deployment, nodes)
    config = replace(config, cluster=cluster, workload=workload, deployment=dep.with_(placement=placement))
    session = compose(config, Overrides(rate_hz=rate))
    plan, engine = session.plan, session.sim()
    start = time.perf_counter()
    result = engine.run()
    assert plan.slo is not None
    good = goodput_rps(result.records, plan.slo)
    return {"modality": modality, "nodes": nodes, "gpus": 8 * nodes, "network": network or "-",
            "placement": placement.strategy if placement else "-", "rate_hz": rate,
            "deployment": plan.deployment.label(), "goodput_rps": round(good, 4),
            "goodput_per_node": round(good / nodes, 4),
            "cross_node_gb": round(result.meta.get("cross_node_bytes", 0) / 1e9, 3),
            "wall_s": round(time.perf_counter() - start, 1)}


def scaling(modalities: list[str]) -> pd.DataFrame:
    rows = []
    for m in modalities:
        rows.append(run_one(m, nodes=1, network=None))
        for nodes in (2, 4):
            for net in NETWORKS:
                for strategy in ("spread", "packed"):
                    rows.append(run_one(m, nodes=nodes, network=net, placement=Placement(strategy=strategy)))
                    print(rows[-1], flush=True)
    frame = pd.DataFrame(rows)
    base = frame[frame.nodes == 1].set_index("modality")["goodput_rps"]
    frame["vs_one_node"] = (frame["goodput_rps"] / frame["modality"].map(base)).round(3)
    return frame


def dedicated(modalities: list[str]) -> pd.DataFrame:
    """A dedicated encode node (E on node 0, P and D on node 1) vs the same workers spread."""
    rows = []
    for m in modalities:
        config = load_config(CONFIGS[m])
        d = config.deployment
        e_tp = d.encode.tp
        enc = StageGroup(num_workers=8 // e_tp, tp=e_tp)  # node 0: all encoders
        dep = _scaled(d, 2).with_(encode=enc, remote_fraction=1.0, sm_sharing="none")
        rest = dep.prefill.num_gpus + dep.decode.num_gpus
        if rest > 8:  # the LM stages fill node 1: drop decode workers until they fit
            drop = (rest - 8 + dep.decode.tp - 1) // dep.decode.tp
            dep = dep.with_(decode=StageGroup(num_workers=dep.decode.num_workers - drop, tp=dep.decode.tp))
        explicit = Placement(strategy="explicit", encode=(0,) * enc.num_workers,
                             prefill=(1,) * dep.prefill.num_workers, decode=(1,) * dep.decode.num_workers)
        for net in NETWORKS:
            for name, plc in (("dedicated-encode", explicit), ("spread", Placement(strategy="spread"))):
                row = run_one(m, nodes=2, network=net, deployment=dep, placement=plc)
                row["placement"] = name
                rows.append(row)
                print(row, flush=True)
    return pd.DataFrame(rows)


def figure(frame: pd.DataFrame, path: Path) -> None:
    multi = frame[frame.nodes > 1]
    mods = list(dict.fromkeys(multi["modality"]))
    fig, axes = plt.subplots(1, len(mods), figsize=(4.2 * len(mods), 3.4), squeeze=False)
    for ax, m in zip(axes[0], mods, strict=True):
        sub = multi[multi.modality == m]
        labels = [f"{r.gpus} {r.network.split('-')[-1]}\n{r.placement}" for r in sub.itertuples()]
        ax.bar(range(len(sub)), sub["vs_one_node"], color=["C0" if p == "spread" else "C1"
                                                           for p in sub["placement"]])
        for n in (2, 4):
            ax.axhline(n, color="grey", lw=0.6, ls=":")
        ax.axhline(1.8, color="red", lw=0.8, ls="--")
        ax.set_xticks(range(len(sub)), labels, fontsize=6)
        ax.set_title(f"{m}: goodput vs one node (8 GPUs)", fontsize=9)
        ax.set_ylabel("x one-node goodput")
    fig.tight_layout()
    fig.savefig(path, dpi=130)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "results"))
    ap.add_argument("--models", default="image,video,audio")
    args = ap.parse_args()
    mods = args.models.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frame = scaling(mods)
    frame.to_csv(out / "multinode_whatif.csv", index=False)
    figure(frame, out / "multinode_whatif.png")
    ded = dedicated(mods)
    ded.to_csv(out / "multinode_dedicated_encode.csv", index=False)
    cols = ["modality", "gpus", "network", "placement", "rate_hz", "goodput_rps", "vs_one_node",
            "cross_node_gb"]
    print(frame[cols].to_string(index=False))
    print(ded[["modality", "network", "placement", "deployment", "goodput_rps", "cross_node_gb"]]
          .to_string(index=False))


if __name__ == "__main__":
    main()
