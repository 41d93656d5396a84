"""Requests and per-request records: the vocabulary both engines share.

A :class:`Request` is what a workload produces and an engine serves. A
:class:`Record` is what an engine writes back, one per request, with the
timestamps of DESIGN.md §4.1. :func:`records_from_columns` builds the pandas
DataFrame every metric, plot and notebook reads, with the same columns and
dtypes whether the simulator (records held as columns) or the live executor
(:class:`Record` rows, through :func:`records_to_frame`) produced them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from easerve_core import checks, limits


class Modality(StrEnum):
    IMAGE = "image"
    VIDEO = "video"
    AUDIO = "audio"
    TEXT = "text"

    @classmethod
    def parse(cls, value: object, *, field_name: str = "modality") -> Modality:
        """Return the modality named ``value`` or raise a ``ValueError`` naming the field."""
        if isinstance(value, Modality):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            known = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown {field_name} {value!r}; known: {known}") from None


def check_modality(modality: str | Modality, takes: Iterable[str | Modality], *, model: str,
                   field_name: str = "workload.mix") -> None:
    """Refuse ``modality`` where ``model`` does not take it (``takes``; text it always does): both
    engines would serve it at costs the model has no tower for, and a typo'd mix would pass for a
    result. The ``ValueError`` names ``field_name``."""
    allowed = {Modality.parse(m) for m in takes} | {Modality.TEXT}
    if Modality.parse(modality) not in allowed:
        shown = ", ".join(sorted(m.value for m in allowed - {Modality.TEXT}))
        hint = "; choose a mix of that modality" if field_name.endswith("mix") else ""
        raise ValueError(f"{field_name}: {Modality.parse(modality).value} requests, but model {model} "
                         f"takes {shown} input{hint}")


def check_modalities(requests: Iterable[Request], takes: Iterable[str | Modality], *, model: str,
                     field_name: str = "workload.mix") -> None:
    """:func:`check_modality` for a stream: the first (by name) of its modalities ``model`` does
    not take is refused."""
    takes = tuple(takes)
    for modality in sorted({r.modality.value for r in requests}):
        check_modality(modality, takes, model=model, field_name=field_name)


def encode_tokens(values: Iterable[Any], count: int, name: str, *, per: str = "item") -> tuple[int, ...]:
    """``values``: one whole count >= 1 per ``per`` (``count`` of them), each within the token
    bound; the ``ValueError`` names ``name`` (``encode_tokens_per_item``, ``item_encode_tokens``)."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a list of token counts, got {values!r}")
    out = tuple(values)
    if len(out) != count:
        raise ValueError(f"{name} must hold one count per {per} ({count}), got {len(out)}")
    for i, tokens in enumerate(out):
        limits.at_most(f"{name}[{i}]", checks.integer(f"{name}[{i}]", tokens, minimum=1),
                       limits.MAX_TOKENS, limits.TOKENS_WHY)
    return tuple(int(t) for t in out)


class PooledItems:
    """What a request-like value with ``mm_tokens_per_item`` and ``encode_tokens_per_item`` (the
    items' tokens before a model cuts or pools features; empty: neither) says of its encoder's work:
    :class:`Request`, ``capacity.RequestShape``, a model spec's ``TypicalRequest``."""

    __slots__ = ()
    mm_tokens_per_item: tuple[int, ...]
    encode_tokens_per_item: tuple[int, ...]

    @property
    def encode_items(self) -> tuple[int, ...]:
        """The encoder's work per item: ``encode_tokens_per_item``, else ``mm_tokens_per_item``."""
        return self.encode_tokens_per_item or self.mm_tokens_per_item

    def _check_encode_tokens(self, name: str) -> None:
        """Normalise ``encode_tokens_per_item`` (when given) by :func:`encode_tokens`."""
        if self.encode_tokens_per_item:
            object.__setattr__(self, "encode_tokens_per_item", encode_tokens(
                self.encode_tokens_per_item, len(self.mm_tokens_per_item), name))


@dataclass(frozen=True, slots=True, kw_only=True)
class Request(PooledItems):
    """One multimodal request.

    ``mm_tokens_per_item`` holds the LM tokens each multimodal item (image,
    video clip, audio clip) becomes after the encoder and projector; it is
    empty for a text-only request. ``encode_tokens_per_item``, where a model
    cuts or pools an item's features after its projector (LLaVA-NeXT's
    unpadding, LLaVA-OneVision's ``anyres_max``), holds each item's tokens
    before that: the encoder's work, which the LM tokens no longer tell
    (:class:`PooledItems`; empty: nothing cut or pooled).
    """

    request_id: int
    arrival_s: float
    modality: Modality
    prompt_tokens: int
    output_tokens: int
    mm_tokens_per_item: tuple[int, ...] = ()
    encode_tokens_per_item: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        checks.integer("request_id", self.request_id, minimum=0)
        arrival = checks.non_negative("arrival_s", self.arrival_s)
        if arrival > limits.MAX_ARRIVAL_S:
            raise ValueError(f"arrival_s must be <= {limits.MAX_ARRIVAL_S:,} s ({limits.ARRIVAL_WHY}), "
                             f"got {self.arrival_s!r}")
        object.__setattr__(self, "modality", Modality.parse(self.modality))
        # the bounds a mix's ranges have (easerve_core.limits), so a trace row is held to them too
        for name, least in (("prompt_tokens", 0), ("output_tokens", 1)):
            limits.at_most(name, checks.integer(name, getattr(self, name), minimum=least),
                           limits.MAX_TOKENS, limits.TOKENS_WHY)
        items = tuple(self.mm_tokens_per_item)
        limits.at_most("number of mm_tokens_per_item", len(items), limits.MAX_ITEMS_PER_REQUEST,
                       "items one request carries")
        for i, tokens in enumerate(items):
            limits.at_most(f"mm_tokens_per_item[{i}]", checks.integer(f"mm_tokens_per_item[{i}]", tokens,
                                                                      minimum=1),
                           limits.MAX_TOKENS, limits.TOKENS_WHY)
        if self.modality is Modality.TEXT and items:
            raise ValueError("mm_tokens_per_item must be empty for a text request")
        if self.modality is not Modality.TEXT and not items:
            raise ValueError(f"mm_tokens_per_item must hold at least one item for {self.modality}")
        object.__setattr__(self, "mm_tokens_per_item", items)
        self._check_encode_tokens("encode_tokens_per_item")

    @property
    def mm_tokens(self) -> int:
        return sum(self.mm_tokens_per_item)

    @property
    def num_items(self) -> int:
        return len(self.mm_tokens_per_item)

    @property
    def input_tokens(self) -> int:
        """Tokens the LM prefills: text prompt plus multimodal tokens."""
        return self.prompt_tokens + self.mm_tokens


class Status(StrEnum):
    OK = "ok"
    FAILED = "failed"
    REJECTED = "rejected"


_NAN = math.nan

#: The record columns and their pandas dtypes, in order. Times are seconds
#: from the start of the run; a stage a request never reached holds NaN.
RECORD_COLUMNS: Mapping[str, str] = {
    "request_id": "int64",
    "modality": "string",
    "arrival_s": "float64",
    "encode_start_s": "float64",
    "encode_end_s": "float64",
    "encode_batch_size": "Int64",
    "encode_worker": "Int64",
    "route": "string",
    "prefill_worker": "Int64",
    "prefill_start_s": "float64",
    "first_token_s": "float64",
    "decode_worker": "Int64",
    "finish_s": "float64",
    "prompt_tokens": "int64",
    "mm_tokens": "int64",
    "output_tokens": "int64",
    "status": "string",
    "error": "string",
}


@dataclass(slots=True, kw_only=True)
class Record:
    """What an engine fills in for one request as it moves through the stages.

    Mutable on purpose: the engine stamps each field as the request reaches
    that point. ``route`` is ``"local"``, ``"remote"`` or ``""`` when the
    request never reached the router.
    """

    request_id: int
    modality: str
    arrival_s: float
    prompt_tokens: int
    mm_tokens: int
    output_tokens: int
    encode_start_s: float = _NAN
    encode_end_s: float = _NAN
    encode_batch_size: int | None = None
    encode_worker: int | None = None
    route: str = ""
    prefill_worker: int | None = None
    prefill_start_s: float = _NAN
    first_token_s: float = _NAN
    decode_worker: int | None = None
    finish_s: float = _NAN
    status: str = Status.OK.value
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def for_request(cls, request: Request) -> Record:
        return cls(
            request_id=request.request_id,
            modality=request.modality.value,
            arrival_s=request.arrival_s,
            prompt_tokens=request.prompt_tokens,
            mm_tokens=request.mm_tokens,
            output_tokens=request.output_tokens,
        )

    def fail(self, error: str, *, status: Status = Status.FAILED) -> None:
        self.status = status.value
        self.error = error


def records_to_frame(records: Iterable[Record | Mapping[str, Any]]) -> pd.DataFrame:
    """Return records as a DataFrame with exactly :data:`RECORD_COLUMNS`, sorted by id.

    Accepts :class:`Record` objects or mappings holding at least the schema's
    columns; extra keys are dropped. The rows are laid out as columns and
    built by :func:`records_from_columns`, the one record builder.
    """
    columns: dict[str, list[Any]] = {c: [] for c in RECORD_COLUMNS}
    for rec in records:
        if isinstance(rec, Record):
            for column, values in columns.items():
                values.append(getattr(rec, column))
            continue
        missing = [c for c in RECORD_COLUMNS if c not in rec]
        if missing:
            raise ValueError(f"record is missing fields: {', '.join(missing)}")
        for column, values in columns.items():
            values.append(rec[column])
    return records_from_columns(columns)


def records_from_columns(columns: Mapping[str, Sequence[Any]]) -> pd.DataFrame:
    """The records frame (:data:`RECORD_COLUMNS`, sorted by id), from records held column by column.

    The one record builder: the simulator keeps its records as columns (a
    long simulation builds no row objects), and :func:`records_to_frame` lays
    rows out as columns and calls it. ``columns`` maps every name of
    :data:`RECORD_COLUMNS` to one value per record (None or NaN where an
    integer column has none, or a nullable ``Int64`` array).
    """
    missing = [c for c in RECORD_COLUMNS if c not in columns]
    if missing:
        raise ValueError(f"records are missing columns: {', '.join(missing)}")
    frame = pd.DataFrame({
        column: _nullable_ints(columns[column]) if dtype == "Int64"
        else pd.array(columns[column], dtype="string") if dtype == "string"
        else np.asarray(columns[column], dtype=dtype)
        for column, dtype in RECORD_COLUMNS.items()}, copy=False)
    return _by_id(frame)


def _nullable_ints(values: Iterable[Any]) -> pd.api.extensions.ExtensionArray:
    if isinstance(values, pd.arrays.IntegerArray) and values.dtype == "Int64":
        return values
    return pd.array([None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)
                     for v in values], dtype="Int64")


def _by_id(frame: pd.DataFrame) -> pd.DataFrame:
    """Sorted by request id (stable), on a fresh range index; no copy when already in order."""
    if not frame["request_id"].is_monotonic_increasing:
        frame = frame.sort_values("request_id", kind="stable")
    return frame.reset_index(drop=True)


def ttft_s(frame: pd.DataFrame) -> pd.Series:
    """Time to first token per record (NaN where no token came)."""
    return frame["first_token_s"] - frame["arrival_s"]


def tpot_s(frame: pd.DataFrame) -> pd.Series:
    """Time per output token after the first; NaN for one-token outputs."""
    steps = (frame["output_tokens"] - 1).astype("float64").replace(0.0, np.nan)
    return (frame["finish_s"] - frame["first_token_s"]) / steps
