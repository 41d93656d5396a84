"""What every engine's recipe shares: the recipe value, the instances and their GPUs, shell and markdown text.

A :class:`Topology` is the deployment laid out as engine instances: one per
worker, each with its GPU ids (the deployment's layout: encode workers from
GPU 0, then Prefill, then Decode; on several nodes, node ``n`` owns GPUs
``n * gpus_per_node ..``), its node, its TP and its HTTP port. The engine
modules turn it into commands; nothing here knows an engine's flags.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType

from calibration.specs import model_names, model_spec
from easerve_core.cluster import Cluster
from easerve_core.config import ExperimentConfig
from easerve_core.deployment import Architecture, Deployment

#: the proxy or router listens here (on node 0)
PROXY_PORT = 8000
#: first HTTP port of each role's instances (instance ``i`` takes base + i)
ROLE_PORTS = {"encode": 8100, "prefill": 8200, "decode": 8300}
#: the most slots a weighted round-robin cycle may hold (s is rounded to a fraction of at most this)
MAX_CYCLE_SLOTS = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Recipe:
    """An engine's recipe: file name -> text, the engine version it targets, and what it could not map."""

    engine: str
    engine_version: str
    files: Mapping[str, str]
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", MappingProxyType(dict(sorted(self.files.items()))))
        object.__setattr__(self, "notes", tuple(self.notes))


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """One engine instance: a worker of ``role`` on ``gpus`` (global ids) of ``node``."""

    role: str  # encode | local-prefill (encode GPUs running Encode + Prefill) | prefill | decode
    index: int
    gpus: tuple[int, ...]
    node: int
    gpus_per_node: int
    port: int

    @property
    def tp(self) -> int:
        return len(self.gpus)

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"

    @property
    def visible_devices(self) -> str:
        """``CUDA_VISIBLE_DEVICES`` on its node: the node-local GPU ids."""
        return ",".join(str(g % self.gpus_per_node) for g in self.gpus)

    @property
    def host(self) -> str:
        return host(self.node)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Topology:
    """The deployment as engine instances (see the module docstring)."""

    model: str
    deployment: Deployment
    rate_hz: float | None
    num_nodes: int
    encode: tuple[Instance, ...]
    prefill: tuple[Instance, ...]
    decode: tuple[Instance, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def remote_fraction(self) -> float:
        return self.deployment.remote_fraction

    @property
    def all_remote(self) -> bool:
        """s = 1: every prefill on the Prefill workers; the encode workers run only the encoder."""
        return self.remote_fraction >= 1.0

    @property
    def instances(self) -> tuple[Instance, ...]:
        return self.encode + self.prefill + self.decode


def host(node: int) -> str:
    """A node's address in the launch script: a variable the user sets, 127.0.0.1 by default."""
    return f"${{NODE{node}_HOST:-127.0.0.1}}"


def served_model(config: ExperimentConfig) -> tuple[str, list[str]]:
    """The model's Hugging Face id from its spec, or the config's name with a note saying why."""
    notes = []
    if config.model in model_names():
        name = model_spec(config.model).hf_id
    else:
        name = config.model
        notes.append(f"model.name {config.model!r} has no model spec (calibration/specs/models/), so the "
                     f"recipe serves it by that name: replace it with the model's Hugging Face id.")
    gpu = str(config.cluster.get("gpu", ""))
    if config.model_size != "full" or gpu == "cpu":
        notes.append(f"this config runs a {config.model_size} model on {gpu!r}: the recipe shows the "
                     "deployment's shape; the engines serve full-size models on GPUs.")
    return name, notes


def topology(deployment: Deployment, config: ExperimentConfig, rate_hz: float | None) -> Topology:
    """Lay ``deployment`` out on ``config``'s cluster as instances (``ValueError`` names the field)."""
    if deployment.architecture is Architecture.AGGREGATED:
        raise ValueError("emit: deployment.architecture is 'aggregated'; a recipe writes a disaggregated "
                         "(Encode / Prefill / Decode) deployment")
    if rate_hz is not None and not (math.isfinite(rate_hz) and rate_hz > 0):
        raise ValueError(f"emit: rate_hz must be a positive number, got {rate_hz!r}")
    cluster = Cluster(**config.cluster)
    deployment.check_fits(cluster)
    lay = deployment.layout(cluster)
    per_node = cluster.gpus_per_node
    local = deployment.has_local_prefill
    encode_role = "local-prefill" if local else "encode"

    def instances(role: str, base: int, groups: Sequence[tuple[int, ...]]) -> tuple[Instance, ...]:
        return tuple(Instance(role=role, index=i, gpus=tuple(g), node=g[0] // per_node,
                              gpus_per_node=per_node, port=base + i) for i, g in enumerate(groups))

    prefill = lay.prefill if deployment.remote_fraction > 0 else ()
    model, notes = served_model(config)
    notes.append("Each engine supports encoder disaggregation per model architecture: check that your "
                 "engine version lists this model's family before you launch.")
    if deployment.remote_fraction == 0 and deployment.prefill.num_workers:
        notes.append(f"s = 0 sends no prefill to the {deployment.prefill.num_workers} Prefill worker(s); "
                     "the recipe launches none, and their GPUs stay free.")
    return Topology(
        model=model, deployment=deployment,
        rate_hz=rate_hz if rate_hz is not None else deployment.rate_hint_hz,
        num_nodes=cluster.num_nodes,
        encode=instances(encode_role, ROLE_PORTS["encode"], lay.encode),
        prefill=instances("prefill", ROLE_PORTS["prefill"], prefill),
        decode=instances("decode", ROLE_PORTS["decode"], lay.decode),
        notes=tuple(notes),
    )


def split_cycle(local: Sequence[Instance], remote: Sequence[Instance],
                remote_fraction: float) -> tuple[Instance, ...]:
    """A round-robin list of prefill instances in which the remote ones take ``remote_fraction`` of the slots.

    s is rounded to a fraction a/b (b at most :data:`MAX_CYCLE_SLOTS`); the
    cycle is stretched until every local and every remote instance holds the
    same number of slots, and remote slots are spread as the deficit counter
    spreads them (slot ``i`` is remote when ``floor((i+1)a/b)`` steps up).
    """
    if not remote:
        return tuple(local)
    if not local:
        return tuple(remote)
    share = Fraction(remote_fraction).limit_denominator(MAX_CYCLE_SLOTS)
    a, b = share.numerator, share.denominator
    if a == 0:
        return tuple(local)
    if a == b:
        return tuple(remote)
    stretch = 1
    while (stretch * a) % len(remote) or (stretch * (b - a)) % len(local):
        stretch += 1
    slots, picked, out = stretch * b, [0, 0], []
    for i in range(slots):
        is_remote = ((i + 1) * a) // b > (i * a) // b
        pool = remote if is_remote else local
        out.append(pool[picked[is_remote] % len(pool)])
        picked[is_remote] += 1
    return tuple(out)


def shell_word(word: str) -> str:
    """``word`` quoted for bash: double quotes when it holds a variable, else single quotes if needed."""
    if "$" in word:
        if '"' in word:
            raise ValueError(f"cannot quote {word!r}: a variable and a double quote in one word")
        return f'"{word}"'
    return shlex.quote(word)


def command(argv: Sequence[str], *, env: Mapping[str, str] | None = None, background: bool = True) -> str:
    """One command, one flag (and its values) a line, with its environment in front."""
    head = [f"{k}={shell_word(v)}" for k, v in (env or {}).items()]
    lines, current = [], [*head, shell_word(argv[0])]
    for word in argv[1:]:
        if word.startswith("--"):
            lines.append(" ".join(current))
            current = ["   ", shell_word(word)]
        else:
            current.append(shell_word(word))
    lines.append(" ".join(current))
    text = " \\\n".join(lines)
    return text + " &\nPIDS+=($!)" if background else text


def launch_script(title: str, blocks: Sequence[tuple[int, str, str]], proxy: str) -> str:
    """A bash script: ``blocks`` of (node, heading, command), each node's run when ``NODE_RANK`` is it."""
    out = [
        "#!/bin/bash",
        f"# {title}",
        "# Generated by `easerve recipe` / `easerve search --emit`; see RECIPE.md beside it.",
        "# One node: run it as is. Several nodes: run it on every node with NODE_RANK=n and",
        "# NODE<n>_HOST set to each node's address; the proxy/router runs on node 0.",
        "set -euo pipefail",
        'NODE_RANK="${NODE_RANK:-0}"',
        "PIDS=()",
        'trap \'kill "${PIDS[@]}" 2>/dev/null || true\' EXIT INT TERM',
    ]
    for node in sorted({b[0] for b in blocks}):
        out += ["", f'if [[ "$NODE_RANK" == "{node}" ]]; then']
        for n, heading, text in blocks:
            if n == node:
                out += [f"# {heading}", text]
        out.append("fi")
    out += ["", "# the proxy / router (node 0), in the foreground", 'if [[ "$NODE_RANK" == "0" ]]; then',
            proxy, "fi", "wait", ""]
    return "\n".join(out)


def instance_table(topo: Topology) -> list[str]:
    """Markdown rows: every instance's role, node, GPUs and port."""
    rows = ["| instance | node | CUDA_VISIBLE_DEVICES | TP | port |", "|---|---|---|---|---|"]
    rows += [f"| {i.name} | {i.node} | {i.visible_devices} | {i.tp} | {i.port} |" for i in topo.instances]
    return rows


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(r) + " |" for r in rows]
