"""Placement: which node of a multi-node cluster each worker lives on.

A cluster is ``num_nodes`` nodes of ``gpus_per_node`` GPUs
(:class:`~easerve_core.cluster.Cluster`). A worker (a group of ``tp``
GPUs) lives whole on one node: its TP group and its KV memory never span
nodes. A :class:`Placement` names the node of every worker, or a strategy
that chooses them (:data:`PLACEMENTS`):

* ``packed`` (the default): workers in stage order (encode, prefill, decode),
  each on the lowest-numbered node with room. On one node this is today's
  numbering; on several it tends to give each stage its own node(s) (a
  dedicated encode node when the encoders fill one).
* ``spread``: worker ``i`` of each stage on node ``i mod num_nodes`` (the next
  node with room when that one is full), so that every node holds some of
  every stage and most hand-offs stay inside a node.
* ``explicit``: the node lists given, ``encode = [0, 1]`` etc., one per worker.

:func:`layout` turns a placement into GPU ids: node ``n`` owns GPUs
``n * gpus_per_node ..``, handed out in stage order; on one node the ids are
the single-node model's (encode workers from 0, then Prefill, then Decode).
``locality`` says how the simulator's hand-offs pick a receiver: ``node``
(the least-loaded receiver on the sender's node, any node's when the sender's
has none) or ``any`` (the least-loaded receiver anywhere).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from easerve_core import checks
from easerve_core.cluster import Cluster
from easerve_core.settings import Settings, refuse_unknown, rule

STAGES = ("encode", "prefill", "decode")
LOCALITIES = ("node", "any")


def _strategy(name: str, value: Any) -> str:
    return checks.one_of(name, value, [*PLACEMENTS, "explicit"])


def _nodes(name: str, nodes: Any) -> tuple[int, ...]:
    """A stage's node list: a node index >= 0 per worker."""
    if isinstance(nodes, str) or not isinstance(nodes, Sequence):
        raise ValueError(f"{name} must be a list of node indices, got {nodes!r}")
    return tuple(checks.integer(f"{name}[{i}]", n, minimum=0) for i, n in enumerate(nodes))


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement(Settings):
    """A placement strategy, or the node of every worker (see the module docstring)."""

    prefix = "placement."
    strategy: str = field(default="packed", metadata=rule(_strategy))
    encode: tuple[int, ...] = field(default=(), metadata=rule(_nodes, store=True))
    prefill: tuple[int, ...] = field(default=(), metadata=rule(_nodes, store=True))
    decode: tuple[int, ...] = field(default=(), metadata=rule(_nodes, store=True))
    locality: str = field(default="node", metadata=rule(checks.one_of, known=LOCALITIES))

    def __post_init__(self) -> None:
        self.validate()
        given = any(getattr(self, s) for s in STAGES)
        if given and self.strategy != "explicit":
            raise ValueError(f"placement.strategy is {self.strategy!r} but node lists are given; "
                             "node lists need strategy 'explicit' (or leave it out)")

    @classmethod
    def from_dict(cls, data: Any) -> Placement:
        """From a config value: a strategy name, or a table of node lists (``explicit``)."""
        if isinstance(data, str):
            return cls(strategy=data)
        if not isinstance(data, Mapping):
            raise ValueError(f"placement must be a strategy name or a table, got {data!r}")
        refuse_unknown(data, ("strategy", *STAGES, "locality"), "placement")
        values = dict(data)
        if any(s in values for s in STAGES):
            values.setdefault("strategy", "explicit")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"strategy": self.strategy, "locality": self.locality}
        if self.strategy == "explicit":
            out.update({s: list(getattr(self, s)) for s in STAGES})
        return out

    @property
    def name(self) -> str:
        """A short label: the strategy, or the node lists."""
        if self.strategy != "explicit":
            return self.strategy
        return " ".join(f"{s[0].upper()}{list(getattr(self, s))}" for s in STAGES)


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """GPU ids of every worker, per stage, and the node size that maps them to nodes."""

    gpus_per_node: int
    encode: tuple[tuple[int, ...], ...]
    prefill: tuple[tuple[int, ...], ...]
    decode: tuple[tuple[int, ...], ...]

    def node_of(self, gpu: int) -> int:
        return gpu // self.gpus_per_node

    def nodes(self, stage: str) -> tuple[int, ...]:
        """The node of each worker of ``stage``."""
        return tuple(g[0] // self.gpus_per_node for g in getattr(self, stage))


Groups = list[tuple[str, int, int]]  # (stage, worker index, tp) in stage order


class Stage(Protocol):
    """What placement needs of a stage's workers (a :class:`~easerve_core.deployment.StageGroup`)."""

    @property
    def num_workers(self) -> int: ...

    @property
    def tp(self) -> int: ...


class Staged(Protocol):
    """What :func:`layout` needs of a deployment (a :class:`~easerve_core.deployment.Deployment`):
    its three stages and its placement (typed here so placement need not import deployment)."""

    @property
    def encode(self) -> Stage: ...

    @property
    def prefill(self) -> Stage: ...

    @property
    def decode(self) -> Stage: ...

    @property
    def placement(self) -> Placement | None: ...


def _groups(stages: Mapping[str, Stage]) -> Groups:
    return [(s, i, stages[s].tp) for s in STAGES for i in range(stages[s].num_workers)]


def _first_fit(groups: Groups, num_nodes: int, per_node: int, strategy: str,
               order: Callable[[int], Sequence[int]]) -> list[int]:
    """Each group on the first node of ``order(worker index)`` with room for its TP."""
    free = [per_node] * num_nodes
    out = []
    for stage, i, tp in groups:
        node = next((n for n in order(i) if free[n] >= tp), None)
        if node is None:
            raise ValueError(f"deployment.placement: {strategy!r} finds no node with {tp} free GPUs for a "
                             f"{stage} worker; give node lists (strategy 'explicit')")
        free[node] -= tp
        out.append(node)
    return out


def _packed(groups: Groups, num_nodes: int, per_node: int) -> list[int]:
    return _first_fit(groups, num_nodes, per_node, "packed", lambda i: range(num_nodes))


def _spread(groups: Groups, num_nodes: int, per_node: int) -> list[int]:
    return _first_fit(groups, num_nodes, per_node, "spread",
                      lambda i: [(i + k) % num_nodes for k in range(num_nodes)])


#: named placement strategies: (stage-ordered groups, num_nodes, GPUs per node) -> node per group
PLACEMENTS: Mapping[str, Callable[[Groups, int, int], list[int]]] = {"packed": _packed, "spread": _spread}


def layout(deployment: Staged, cluster: Cluster) -> Layout:
    """The GPU ids of every worker of ``deployment`` on ``cluster``, checked (:func:`place`)."""
    stages = {s: getattr(deployment, s) for s in STAGES}
    return place(stages, deployment.placement or Placement(), cluster)


def place(stages: Mapping[str, Stage], placement: Placement, cluster: Cluster) -> Layout:
    """The GPU ids of the workers of ``stages`` (``encode``, ``prefill``, ``decode``) under ``placement``.

    Raises ``ValueError`` naming the field: a TP group larger than a node, a
    node index the cluster lacks, a node given more GPUs than it has, or node
    lists whose length is not the stage's worker count.
    """
    per_node, num_nodes = cluster.gpus_per_node, cluster.num_nodes
    groups = _groups(stages)
    for stage in STAGES:
        tp = stages[stage].tp
        if stages[stage].num_workers and tp > per_node:
            raise ValueError(f"deployment.{stage}.tp is {tp} but a node has {per_node} GPUs: a TP group "
                             f"cannot span nodes (cluster.num_gpus / cluster.num_nodes)")
    if placement.strategy == "explicit":
        nodes = []
        for stage in STAGES:
            given, count = getattr(placement, stage), stages[stage].num_workers
            if len(given) != count:
                raise ValueError(f"deployment.placement.{stage} names {len(given)} node(s) for "
                                 f"{count} {stage} worker(s)")
            for i, n in enumerate(given):
                if n >= num_nodes:
                    raise ValueError(f"deployment.placement.{stage}[{i}] is node {n} but the cluster has "
                                     f"{num_nodes} node(s) (cluster.num_nodes)")
            nodes.extend(given)
    else:
        nodes = PLACEMENTS[placement.strategy](groups, num_nodes, per_node)
    used = [0] * num_nodes
    out: dict[str, list[tuple[int, ...]]] = {s: [] for s in STAGES}
    for (stage, _, tp), node in zip(groups, nodes, strict=True):
        start = node * per_node + used[node]
        used[node] += tp
        if used[node] > per_node:
            raise ValueError(f"deployment.placement puts more than {per_node} GPUs on node {node} "
                             f"(cluster.num_gpus / cluster.num_nodes)")
        out[stage].append(tuple(range(start, start + tp)))
    return Layout(gpus_per_node=per_node, encode=tuple(out["encode"]), prefill=tuple(out["prefill"]),
                  decode=tuple(out["decode"]))
