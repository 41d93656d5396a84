"""Model and GPU specifications, loaded from the JSON files under ``specs/``.

Each spec file holds every number beside its source and a mark (V read in a
source, D derived, G guess; see docs/profiles.md). Loading strips the marks
into :attr:`ModelSpec.provenance` / :attr:`GPUSpec.provenance` (dotted path ->
"[mark] source") and builds frozen, validated dataclasses. :func:`model_spec`
and :func:`gpu_spec` are the registries: an unknown name fails loudly and lists
the known ones. The language model, encoder and typical-request parts live in
:mod:`calibration.model_parts` (re-exported here). ``to_dict`` / ``from_dict``
give the plain values that analytic profiles embed, so a committed profile does
not change when a spec file does.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from calibration._fields import fraction, unknown_name, validate, validate_kind, whole
from calibration.marks import read_spec_file, strip_marks
from calibration.model_parts import MOE_FIELDS, EncoderSpec, LMSpec, TypicalRequest
from calibration.processor_spec import ProcessorSpec
from easerve_core.request import Modality

SPEC_DIR = Path(__file__).parent / "specs"


#: mapping kind -> the fields it needs (> 0)
_MAPPING_NEEDS: dict[str, tuple[str, ...]] = {
    "tiles": ("lm_tokens_per_tile", "max_tiles", "positions_per_tile"),
    "linear": ("positions_per_lm_token", "segment_positions"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemMapping:
    """How the LM tokens of one item become encoder work.

    ``tiles`` (LLaVA anyres): one base view plus grid tiles, each a separate
    encoder sequence of ``positions_per_tile``. ``linear`` (Qwen2.5-VL,
    Whisper): ``positions_per_lm_token`` encoder positions per LM token, cut
    into attention segments of ``segment_positions``; ``num_full_attention_layers``
    attend over a whole segment, the rest over windows of ``window_positions``.
    """

    kind: str
    base_lm_tokens: int = 0
    lm_tokens_per_tile: int = 0
    max_tiles: int = 0
    positions_per_tile: int = 0
    positions_per_lm_token: float = 0.0
    segment_positions: int = 0
    window_positions: int = 0
    num_full_attention_layers: int = 0

    def __post_init__(self) -> None:
        validate_kind(self, _MAPPING_NEEDS)
        if self.kind == "linear" and not self.positions_per_lm_token <= self.segment_positions:
            raise ValueError(f"ItemMapping.segment_positions ({self.segment_positions!r}) must hold at least "
                             f"one LM token's positions_per_lm_token ({self.positions_per_lm_token!r})")

    def segments(self, lm_tokens: int) -> list[int]:
        """Encoder sequence lengths (positions) for one item of ``lm_tokens``."""
        if self.kind == "tiles":
            extra = max(0, lm_tokens - self.base_lm_tokens)
            tiles = min(self.max_tiles, 1 + math.ceil(extra / self.lm_tokens_per_tile))
            return [self.positions_per_tile] * tiles
        total = max(1, math.ceil(lm_tokens * self.positions_per_lm_token))
        full, rest = divmod(total, self.segment_positions)
        return [self.segment_positions] * full + ([rest] if rest else [])

    def attention_spans(self, num_layers: int) -> list[tuple[int, int]]:
        """(layer count, window) pairs; window 0 means the whole segment."""
        if self.kind == "tiles" or not self.window_positions:
            return [(num_layers, 0)]
        full = min(num_layers, self.num_full_attention_layers)
        return [(full, 0), (num_layers - full, self.window_positions)]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    name: str
    hf_id: str
    modality: str
    lm: LMSpec
    encoder: EncoderSpec
    mapping: ItemMapping
    typical_request: TypicalRequest
    #: the processor rule raw item sizes go through (calibration.processor_spec); None: no rule
    processor: ProcessorSpec | None = None
    #: the inputs the model takes beside text (the file's ``modalities``; default: ``modality``,
    #: the one its costs and typical request are for); a stream with others is refused
    #: (:func:`easerve_core.request.check_modalities`)
    modalities: tuple[str, ...] = ()
    #: the LM's context (prompt, items, output) in tokens; 0: unsaid (easerve_core.plan.within_context)
    max_context_tokens: int = 0
    provenance: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        takes = tuple(self.modalities) or (self.modality,)
        known = {m.value for m in Modality} - {Modality.TEXT.value}
        for name in {self.modality, *takes}:
            if name not in known:
                raise ValueError(f"model spec {self.name!r}: unknown modality {name!r}; "
                                 f"known: {', '.join(sorted(known))}")
        if self.modality not in takes:
            raise ValueError(f"model spec {self.name!r}: modalities {list(takes)} must hold "
                             f"its modality {self.modality!r}")
        object.__setattr__(self, "modalities", takes)

    def to_dict(self) -> dict[str, Any]:
        """The cost-relevant values (what profiles embed): no provenance, no processor rule, not
        what else the model takes."""
        out = asdict(self)
        out.pop("provenance")
        out.pop("processor")
        out.pop("modalities")
        out.pop("max_context_tokens")
        out["typical_request"]["mm_tokens_per_item"] = list(self.typical_request.mm_tokens_per_item)
        tower = self.typical_request.encode_tokens_per_item
        if tower:
            out["typical_request"]["encode_tokens_per_item"] = list(tower)
        else:  # a model that pools nothing (and every profile embedding it) stays as before
            out["typical_request"].pop("encode_tokens_per_item")
        if not self.lm.is_moe:  # a dense model's dict (and every profile embedding it) stays as before
            for key in MOE_FIELDS:
                out["lm"].pop(key)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, provenance: Mapping[str, str] | None = None) -> ModelSpec:
        try:
            return cls(
                name=data["name"], hf_id=data["hf_id"], modality=data["modality"],
                lm=LMSpec(**data["lm"]), encoder=EncoderSpec(**data["encoder"]),
                mapping=ItemMapping(**data["mapping"]),
                typical_request=TypicalRequest(**data["typical_request"]),
                processor=ProcessorSpec.from_dict(data["processor"]) if "processor" in data else None,
                modalities=tuple(data.get("modalities", ())),
                max_context_tokens=whole("max_context_tokens", data.get("max_context_tokens", 0)),
                provenance=dict(provenance or {}),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"model spec {data.get('name', '?')!r} is malformed: {exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class GPUSpec:
    name: str
    full_name: str
    compute_capability: str
    num_sms: int
    dense_bf16_flops: float
    mem_bandwidth_bytes_per_s: float
    memory_bytes: int
    sm_partition_min_sms: int
    sm_partition_step_sms: int
    link_kind: str
    link_bytes_per_s: float
    link_latency_s: float
    num_links: int
    provenance: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        validate(self, positive=frozenset({
            "num_sms", "dense_bf16_flops", "mem_bandwidth_bytes_per_s", "memory_bytes",
            "sm_partition_min_sms", "sm_partition_step_sms", "link_bytes_per_s", "num_links"}))

    def partition_share(self, share: float) -> float:
        """The share of SMs a partition of ``share`` really gets, rounded up to the granularity."""
        fraction("GPUSpec", "sm_share", share)
        step = self.sm_partition_step_sms
        sms = max(self.sm_partition_min_sms, math.ceil(share * self.num_sms / step - 1e-9) * step)
        return min(1.0, sms / self.num_sms)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("provenance")
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, provenance: Mapping[str, str] | None = None) -> GPUSpec:
        try:
            return cls(**{k: v for k, v in data.items() if k != "provenance"},
                       provenance=dict(provenance or {}))
        except TypeError as exc:
            raise ValueError(f"GPU spec {data.get('name', '?')!r} is malformed: {exc}") from None


#: the environment variable naming more spec folders (``os.pathsep``-separated), read at each lookup
SPEC_PATH_ENV = "EASERVE_SPEC_PATH"
_KIND_WORD = {"models": "model", "gpus": "GPU"}


def spec_dirs(kind: str) -> list[Path]:
    """The folders searched for ``kind`` (``models`` or ``gpus``) specs, first match wins: the
    shipped ``specs/<kind>``, then ``<dir>/<kind>`` for each folder on ``EASERVE_SPEC_PATH``."""
    extra = [Path(d) / kind for d in os.environ.get(SPEC_PATH_ENV, "").split(os.pathsep) if d]
    return [SPEC_DIR / kind, *extra]


def spec_files(kind: str) -> dict[str, Path]:
    """Spec name -> its file, over :func:`spec_dirs` (a name found twice keeps the first)."""
    found: dict[str, Path] = {}
    for folder in spec_dirs(kind):
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            found.setdefault(path.stem, path)
    return found


def is_spec_path(ref: str) -> bool:
    """Whether ``ref`` names a spec by file (``*.json``) rather than by registry name."""
    return ref.endswith(".json")


def _locate(kind: str, ref: str) -> Path:
    if is_spec_path(ref):
        path = Path(ref)
        if not path.is_file():
            raise ValueError(f"{_KIND_WORD[kind]} spec file {ref} does not exist")
        return path.resolve()
    for folder in spec_dirs(kind):
        if (folder / f"{ref}.json").is_file():
            return (folder / f"{ref}.json").resolve()
    raise unknown_name(_KIND_WORD[kind], ref, list(spec_files(kind)))


def model_names() -> list[str]:
    return sorted(spec_files("models"))


def gpu_names() -> list[str]:
    return sorted(spec_files("gpus"))


def is_model(ref: str) -> bool:
    """Whether ``ref`` (a name or a ``*.json`` path) names a model spec."""
    return Path(ref).is_file() if is_spec_path(ref) else ref in spec_files("models")


def model_spec(ref: str) -> ModelSpec:
    """The spec of model ``ref``: a name (e.g. ``llava-v1.6-34b``) or a spec file ``*.json``; a
    file written since it was last read (a spec imported again in a notebook's session) is read again."""
    path = _locate("models", ref)
    return _model_file(path, path.stat().st_mtime_ns)


def gpu_spec(ref: str) -> GPUSpec:
    """The spec of GPU ``ref``: a name (e.g. ``rtx6000ada``) or a spec file ``*.json`` (read again
    when written since, as :func:`model_spec`)."""
    path = _locate("gpus", ref)
    return _gpu_file(path, path.stat().st_mtime_ns)


@functools.cache
def _model_file(path: Path, mtime_ns: int) -> ModelSpec:
    data, provenance = read_spec_file(path)
    return ModelSpec.from_dict(data, provenance=provenance)


@functools.cache
def _gpu_file(path: Path, mtime_ns: int) -> GPUSpec:
    data, provenance = read_spec_file(path)
    return GPUSpec.from_dict(data, provenance=provenance)


__all__ = ["SPEC_DIR", "SPEC_PATH_ENV", "EncoderSpec", "GPUSpec", "ItemMapping", "LMSpec", "ModelSpec",
           "TypicalRequest", "gpu_names", "gpu_spec", "is_model", "is_spec_path", "model_names",
           "model_spec", "read_spec_file", "spec_dirs", "spec_files", "strip_marks"]
