"""The latency-profile contract and its versioned JSON file format.

:class:`StageProfile` is all the simulator knows about hardware (DESIGN.md
§4.3). Two producers implement it: the analytic roofline model and profiles
fitted from live measurements (both in ``calibration/``). A profile that also
knows tensor parallelism and memory implements :class:`ParallelProfile`; the
simulator then asks it for one :class:`StageProfile` per worker size.

On disk a profile is a :class:`ProfileDoc`: a JSON object with a format tag,
a version, the model, GPU, source and date, a ``kind`` that names the code
able to evaluate it, that kind's ``params``, an optional SM-share table and
the per-stage fit error. :meth:`ProfileDoc.from_json_dict` refuses data of
another format or version, or data missing a field, naming what is wrong;
``runtime.profiles`` reads and writes the files (``load_profile_doc``,
``save_profile_doc``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from easerve_core.sm_share import SMShareTable

PROFILE_FORMAT = "easerve.profile"
PROFILE_VERSION = 1


@runtime_checkable
class StageProfile(Protocol):
    """Stage latencies (seconds) and transfer sizes (bytes) for one worker size."""

    def encode_s(self, mm_tokens_per_item: Sequence[int], sm_share: float = 1.0) -> float: ...

    def prefill_s(self, seq_lens: Sequence[int], sm_share: float = 1.0) -> float: ...

    def decode_step_s(self, batch_size: int, context_tokens: int) -> float: ...

    def embed_bytes(self, mm_tokens: int) -> int: ...

    def kv_bytes(self, num_tokens: int) -> int: ...


@runtime_checkable
class HostPreprocessing(Protocol):
    """A stage profile that also knows the host-side preprocessing of a request's items.

    Media decode and the model's processor run on the host CPU, not the SMs, as
    their own stage in front of the encoder (docs/simulator.md); a profile without
    this method has none (:func:`host_preprocess_s` is 0).
    """

    def host_preprocess_s(self, mm_tokens_per_item: Sequence[int]) -> float: ...


def host_preprocess_s(profile: StageProfile, mm_tokens_per_item: Sequence[int]) -> float:
    """Host seconds to preprocess ``mm_tokens_per_item`` on ``profile`` (0 if it knows none)."""
    if isinstance(profile, HostPreprocessing):
        return float(profile.host_preprocess_s(mm_tokens_per_item))
    return 0.0


@runtime_checkable
class ParallelProfile(Protocol):
    """A profile that knows tensor parallelism and memory.

    ``for_tp`` gives the :class:`StageProfile` of a worker of ``tp`` GPUs;
    the memory questions let the simulator and HAS screen deployments.
    """

    def for_tp(self, tp: int) -> StageProfile: ...

    def lm_fits(self, tp: int) -> bool: ...

    def kv_capacity_tokens(self, tp: int, *, with_encoder: bool = False) -> int: ...


def profile_for_tp(profile: StageProfile | ParallelProfile, tp: int) -> StageProfile:
    """The stage profile for a worker of ``tp`` GPUs (``profile`` itself if it knows no TP)."""
    if isinstance(profile, ParallelProfile):
        return profile.for_tp(tp)
    return profile


def kv_capacity_tokens(
    profile: StageProfile | ParallelProfile, tp: int, *, with_encoder: bool = False
) -> int | None:
    """KV tokens a worker of ``tp`` GPUs holds, or None when the profile has no memory model."""
    if isinstance(profile, ParallelProfile):
        return profile.kv_capacity_tokens(tp, with_encoder=with_encoder)
    return None


_REQUIRED: Mapping[str, type | tuple[type, ...]] = {
    "format": str,
    "version": int,
    "kind": str,
    "model": str,
    "gpu": str,
    "source": str,
    "created": str,
    "params": dict,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileDoc:
    """A profile as stored on disk (see the module docstring)."""

    kind: str
    model: str
    gpu: str
    source: str
    created: str
    params: Mapping[str, Any]
    sm_share_table: SMShareTable | None = None
    fit_error: Mapping[str, float] = field(default_factory=dict)
    notes: str = ""

    def __post_init__(self) -> None:
        for name in ("kind", "model", "gpu", "source", "created"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"profile field {name!r} must be a non-empty string, got {value!r}")
        if not isinstance(self.params, Mapping):
            raise ValueError("profile field 'params' must be an object")
        for stage, err in self.fit_error.items():
            if not isinstance(err, int | float) or math.isnan(err) or err < 0:
                raise ValueError(f"profile fit_error[{stage!r}] must be >= 0, got {err!r}")

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "format": PROFILE_FORMAT,
            "version": PROFILE_VERSION,
            "kind": self.kind,
            "model": self.model,
            "gpu": self.gpu,
            "source": self.source,
            "created": self.created,
            "params": dict(self.params),
            "sm_share_table": None if self.sm_share_table is None else self.sm_share_table.to_dict(),
            "fit_error": dict(self.fit_error),
            "notes": self.notes,
        }

    @classmethod
    def from_json_dict(cls, data: Any, *, where: str = "profile") -> ProfileDoc:
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: a profile must be a JSON object")
        for name, typ in _REQUIRED.items():
            if name not in data:
                raise ValueError(f"{where}: missing field {name!r}")
            if not isinstance(data[name], typ) or isinstance(data[name], bool):
                raise ValueError(f"{where}: field {name!r} has the wrong type: {data[name]!r}")
        if data["format"] != PROFILE_FORMAT:
            raise ValueError(f"{where}: field 'format' is {data['format']!r}, not {PROFILE_FORMAT!r}")
        if data["version"] != PROFILE_VERSION:
            raise ValueError(
                f"{where}: field 'version' is {data['version']!r}; this easerve reads version "
                f"{PROFILE_VERSION}"
            )
        table = data.get("sm_share_table")
        fit_error = data.get("fit_error") or {}
        if not isinstance(fit_error, Mapping):
            raise ValueError(f"{where}: field 'fit_error' must be an object")
        for key, err in fit_error.items():
            if isinstance(err, bool) or not isinstance(err, int | float):
                raise ValueError(f"{where}: fit_error[{key!r}] must be a number, got {err!r}")
        return cls(
            kind=data["kind"],
            model=data["model"],
            gpu=data["gpu"],
            source=data["source"],
            created=data["created"],
            params=data["params"],
            sm_share_table=None if table is None else SMShareTable.from_dict(table),
            fit_error={str(k): float(v) for k, v in fit_error.items()},
            notes=str(data.get("notes", "")),
        )

