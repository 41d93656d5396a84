"""Deployments: what runs where on a cluster, validated on construction.

A :class:`Deployment` splits a :class:`~easerve_core.cluster.Cluster`'s GPUs
into Encode, Prefill and Decode workers (each a group of ``tp`` GPUs) and
carries the runtime knobs HAS tunes: the maximum encode batch B, the
remote-prefill fraction s, the batching mode and the SM-sharing mode. The
aggregated baseline (vLLM-like) has no separate Encode or Prefill workers:
each ``decode`` worker runs all three stages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from easerve_core import checks, limits
from easerve_core.cluster import Cluster
from easerve_core.placement import Layout, Placement, layout
from easerve_core.router import ROUTERS
from easerve_core.settings import Settings, refuse_unknown, rule


class Architecture(StrEnum):
    DISAGGREGATED = "disaggregated"  # E / P / D workers (EAServe and EPD baselines)
    AGGREGATED = "aggregated"  # each LM instance encodes, prefills and decodes


class BatchingMode(StrEnum):
    ADAPTIVE = "adaptive"
    FIXED = "fixed"


class SMSharing(StrEnum):
    DYNAMIC = "dynamic"  # share from the SM-share table, per micro-batch
    STATIC = "static"  # one fixed split
    TIME_SLICE = "time-slice"  # uncontrolled sharing: both slowed by contention
    NONE = "none"  # no local prefill on encode workers


def _enum(name: str, value: object, *, kind: type[StrEnum]) -> Any:
    checks.one_of(name, str(value), [m.value for m in kind])
    return kind(str(value))


def _member(kind: type[StrEnum]) -> Any:
    """A field holding a member of ``kind`` (given as one or by its value)."""
    return rule(_enum, store=True, kind=kind)


def _count(name: str, value: Any, *, minimum: int, limit: int, why: str) -> int:
    """An integer >= ``minimum`` within ``limit`` (:mod:`easerve_core.limits`, ``why`` says why)."""
    return limits.at_most(name, checks.integer(name, value, minimum=minimum), limit, why)


def _tp(name: str, value: Any) -> int:
    tp = _count(name, value, minimum=1, limit=limits.MAX_TP, why="the largest NVLink domain")
    if tp & (tp - 1):
        raise ValueError(f"{name} must be a power of two, got {tp!r}")
    return tp


@dataclass(frozen=True, slots=True, kw_only=True)
class StageGroup(Settings):
    """``num_workers`` workers of ``tp`` GPUs each."""

    num_workers: int = field(metadata=rule(_count, minimum=0, limit=limits.MAX_NUM_GPUS,
                                           why="a worker holds at least one GPU"))
    tp: int = field(default=1, metadata=rule(_tp))

    @property
    def num_gpus(self) -> int:
        return self.num_workers * self.tp

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, name: str = "group") -> StageGroup:
        """A group from a config table (``encode = { num_workers = 1, tp = 2 }``), fields named."""
        refuse_unknown(data, ("num_workers", "tp"), f"deployment.{name}")
        if "num_workers" not in data:
            raise ValueError(f"deployment.{name}.num_workers is required")
        try:
            return cls(**data)
        except ValueError as exc:
            raise ValueError(f"deployment.{name}.{exc}") from None


def _group(name: str, group: Any) -> StageGroup:
    """A stage's workers: a StageGroup, or its config table."""
    if isinstance(group, dict):
        return StageGroup.from_dict(group, name=name)
    if not isinstance(group, StageGroup):
        raise ValueError(f"{name} must be a StageGroup, got {group!r}")
    return group


def _open_share(name: str, value: Any) -> Any:
    checks.fraction(name, value)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return value


def _placement(name: str, value: Any) -> Placement:
    return value if isinstance(value, Placement) else Placement.from_dict(value)


_GROUP = rule(_group, store=True)
_BATCH_WHY = "the SM-share table is profiled for every size 1..B"


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment(Settings):
    """A full deployment of one model on a cluster (see the module docstring)."""

    encode: StageGroup = field(default_factory=lambda: StageGroup(num_workers=1), metadata=_GROUP)
    prefill: StageGroup = field(default_factory=lambda: StageGroup(num_workers=1, tp=2), metadata=_GROUP)
    decode: StageGroup = field(default_factory=lambda: StageGroup(num_workers=1, tp=2), metadata=_GROUP)
    max_encode_batch: int = field(default=8, metadata=rule(_count, minimum=1, limit=limits.MAX_ENCODE_BATCH,
                                                           why=_BATCH_WHY))
    remote_fraction: float = field(default=1.0, metadata=rule(checks.fraction))
    architecture: Architecture = field(default=Architecture.DISAGGREGATED, metadata=_member(Architecture))
    batching: BatchingMode = field(default=BatchingMode.ADAPTIVE, metadata=_member(BatchingMode))
    batch_timeout_s: float = field(default=0.05, metadata=rule(checks.non_negative))
    gap_factor: float = field(default=1.0, metadata=rule(checks.positive))
    max_wait_s: float = field(default=1.0, metadata=rule(checks.non_negative))
    rate_hint_hz: float | None = field(default=None, metadata=rule(checks.positive, optional=True))
    sm_sharing: SMSharing = field(default=SMSharing.DYNAMIC, metadata=_member(SMSharing))
    static_encode_share: float = field(default=0.5, metadata=rule(_open_share))
    router: str = field(default="deficit", metadata=rule(checks.one_of, known=ROUTERS))
    max_num_decode_seqs: int = field(default=256, metadata=rule(
        _count, minimum=1, limit=limits.MAX_NUM_DECODE_SEQS, why="sequences one Decode worker batches"))
    placement: Placement | None = field(default=None, metadata=rule(_placement, store=True, optional=True))

    def __post_init__(self) -> None:
        self.validate()
        if self.decode.num_workers < 1:
            raise ValueError("decode.num_workers must be >= 1")
        if self.architecture is Architecture.AGGREGATED:
            if self.encode.num_workers or self.prefill.num_workers:
                raise ValueError(
                    "an aggregated deployment has no encode or prefill workers; "
                    "set encode.num_workers and prefill.num_workers to 0"
                )
            return
        if self.encode.num_workers < 1:
            raise ValueError("encode.num_workers must be >= 1")
        if self.remote_fraction > 0 and self.prefill.num_workers < 1:
            raise ValueError(
                f"remote_fraction is {self.remote_fraction!r} but prefill.num_workers is 0"
            )
        if self.remote_fraction < 1 and self.sm_sharing is SMSharing.NONE:
            raise ValueError(
                f"remote_fraction is {self.remote_fraction!r} (some local prefill) "
                "but sm_sharing is 'none'"
            )

    @property
    def num_gpus(self) -> int:
        return self.encode.num_gpus + self.prefill.num_gpus + self.decode.num_gpus

    @property
    def has_local_prefill(self) -> bool:
        return self.architecture is Architecture.DISAGGREGATED and self.remote_fraction < 1

    def check_fits(self, cluster: Cluster) -> None:
        """Raise ``ValueError`` if the deployment needs more GPUs than ``cluster`` has, or its
        placement does not fit the cluster's nodes (:func:`easerve_core.placement.layout`)."""
        if self.num_gpus > cluster.num_gpus:
            raise ValueError(
                f"deployment needs {self.num_gpus} GPUs but the cluster has {cluster.num_gpus}"
            )
        self.layout(cluster)

    def layout(self, cluster: Cluster) -> Layout:
        """The GPU ids of every worker on ``cluster`` (see :mod:`easerve_core.placement`)."""
        return layout(self, cluster)

    def with_(self, **changes: Any) -> Deployment:
        """A copy with ``changes`` applied (and validated)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out = Settings.to_dict(self)
        for key in ("architecture", "batching", "sm_sharing"):
            out[key] = str(out[key])
        if self.placement is None:  # a single-node deployment's table stays as it was
            del out["placement"]
        else:
            out["placement"] = self.placement.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Deployment:
        known = set(cls.__dataclass_fields__)
        refuse_unknown(data, known, "deployment", list_known=False)
        try:
            return cls(**data)
        except ValueError as exc:  # name the table: "max_encode_batch ..." -> "deployment.max_..."
            message = str(exc)
            if message.split(" ", 1)[0].split(".")[0] in known:
                message = f"deployment.{message}"
            raise ValueError(message) from None

    def label(self) -> str:
        """A short human-readable name, e.g. ``E2x1 P1x2 D2x2 B8 s0.50 dynamic``."""
        if self.architecture is Architecture.AGGREGATED:
            return f"AGG {self.decode.num_workers}x{self.decode.tp}"
        e, p, d = self.encode, self.prefill, self.decode
        where = "" if self.placement is None else f" @{self.placement.name}"
        return (
            f"E{e.num_workers}x{e.tp} P{p.num_workers}x{p.tp} D{d.num_workers}x{d.tp} "
            f"B{self.max_encode_batch} s{self.remote_fraction:.2f} {self.batching}/{self.sm_sharing}{where}"
        )
