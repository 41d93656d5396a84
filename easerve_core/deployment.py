"""Deployments: what runs where on a cluster, validated on construction.

A :class:`Deployment` splits a :class:`~easerve_core.cluster.Cluster`'s GPUs
into Encode, Prefill and Decode workers (each a group of ``tp`` GPUs) and
carries the runtime knobs HAS tunes: the maximum encode batch B, the
remote-prefill fraction s, the batching mode and the SM-sharing mode. The
aggregated baseline (vLLM-like) has no separate Encode or Prefill workers:
each ``decode`` worker runs all three stages.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from easerve_core import checks, limits
from easerve_core.cluster import Cluster
from easerve_core.placement import Layout, Placement, layout
from easerve_core.router import ROUTERS


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


def _enum(cls: type[StrEnum], name: str, value: object) -> Any:
    checks.one_of(name, str(value), [m.value for m in cls])
    return cls(str(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class StageGroup:
    """``num_workers`` workers of ``tp`` GPUs each."""

    num_workers: int
    tp: int = 1

    def __post_init__(self) -> None:
        limits.at_most("num_workers", checks.integer("num_workers", self.num_workers, minimum=0),
                       limits.MAX_NUM_GPUS, "a worker holds at least one GPU")
        tp = limits.at_most("tp", checks.integer("tp", self.tp, minimum=1), limits.MAX_TP,
                            "the largest NVLink domain")
        if tp & (tp - 1):
            raise ValueError(f"tp must be a power of two, got {tp!r}")

    @property
    def num_gpus(self) -> int:
        return self.num_workers * self.tp

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, name: str = "group") -> StageGroup:
        """A group from a config table (``encode = { num_workers = 1, tp = 2 }``), fields named."""
        known = ("num_workers", "tp")
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown deployment.{name} field(s): {', '.join(unknown)}; "
                             f"known: {', '.join(known)}")
        if "num_workers" not in data:
            raise ValueError(f"deployment.{name}.num_workers is required")
        try:
            return cls(**data)
        except ValueError as exc:
            raise ValueError(f"deployment.{name}.{exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    """A full deployment of one model on a cluster (see the module docstring)."""

    encode: StageGroup = field(default_factory=lambda: StageGroup(num_workers=1))
    prefill: StageGroup = field(default_factory=lambda: StageGroup(num_workers=1, tp=2))
    decode: StageGroup = field(default_factory=lambda: StageGroup(num_workers=1, tp=2))
    max_encode_batch: int = 8
    remote_fraction: float = 1.0
    architecture: Architecture = Architecture.DISAGGREGATED
    batching: BatchingMode = BatchingMode.ADAPTIVE
    batch_timeout_s: float = 0.05
    gap_factor: float = 1.0
    max_wait_s: float = 1.0
    rate_hint_hz: float | None = None
    sm_sharing: SMSharing = SMSharing.DYNAMIC
    static_encode_share: float = 0.5
    router: str = "deficit"
    max_num_decode_seqs: int = 256
    placement: Placement | None = None

    def __post_init__(self) -> None:
        for name in ("encode", "prefill", "decode"):
            group = getattr(self, name)
            if isinstance(group, dict):
                object.__setattr__(self, name, StageGroup.from_dict(group, name=name))
            elif not isinstance(group, StageGroup):
                raise ValueError(f"{name} must be a StageGroup, got {group!r}")
        set_ = object.__setattr__
        set_(self, "architecture", _enum(Architecture, "architecture", self.architecture))
        set_(self, "batching", _enum(BatchingMode, "batching", self.batching))
        set_(self, "sm_sharing", _enum(SMSharing, "sm_sharing", self.sm_sharing))
        limits.at_most("max_encode_batch", checks.integer("max_encode_batch", self.max_encode_batch,
                                                          minimum=1),
                       limits.MAX_ENCODE_BATCH, "the SM-share table is profiled for every size 1..B")
        checks.fraction("remote_fraction", self.remote_fraction)
        checks.non_negative("batch_timeout_s", self.batch_timeout_s)
        checks.positive("gap_factor", self.gap_factor)
        checks.non_negative("max_wait_s", self.max_wait_s)
        if self.rate_hint_hz is not None:
            checks.positive("rate_hint_hz", self.rate_hint_hz)
        checks.fraction("static_encode_share", self.static_encode_share)
        if not 0.0 < self.static_encode_share < 1.0:
            raise ValueError(
                f"static_encode_share must be in (0, 1), got {self.static_encode_share!r}"
            )
        checks.one_of("router", self.router, ROUTERS)
        if self.placement is not None and not isinstance(self.placement, Placement):
            set_(self, "placement", Placement.from_dict(self.placement))
        limits.at_most("max_num_decode_seqs",
                       checks.integer("max_num_decode_seqs", self.max_num_decode_seqs, minimum=1),
                       limits.MAX_NUM_DECODE_SEQS, "sequences one Decode worker batches")
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
        out = asdict(self)
        for key in ("architecture", "batching", "sm_sharing"):
            out[key] = str(out[key])
        if self.placement is None:  # a single-node deployment's table stays as it was
            del out["placement"]
        else:
            out["placement"] = self.placement.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Deployment:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown deployment field(s): {', '.join(unknown)}")
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
