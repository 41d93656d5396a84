"""Validation shared by calibration's frozen dataclasses.

Every spec and config dataclass in ``calibration`` calls :func:`validate` from
``__post_init__``: integer fields must be integers, float fields finite numbers,
and every numeric field non-negative unless listed in ``positive`` (then > 0).
A dataclass whose ``kind`` picks the fields it needs calls :func:`validate_kind`.
Errors are ``ValueError`` naming the class, the field and the value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any


def validate(obj: Any, *, positive: frozenset[str] = frozenset()) -> None:
    """Check and normalise the numeric fields of the dataclass ``obj`` in place."""
    owner = type(obj).__name__
    for f in fields(obj):
        kind = str(f.type)
        if kind not in ("int", "float"):
            continue
        value = getattr(obj, f.name)
        where = f"{owner}.{f.name}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{where} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{where} must be finite, got {value!r}")
        if kind == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(f"{where} must be an integer, got {value!r}")
            value = int(value)
        else:
            value = float(value)
        if value < 0 or (f.name in positive and value == 0):
            bound = "> 0" if f.name in positive else ">= 0"
            raise ValueError(f"{where} must be {bound}, got {value!r}")
        object.__setattr__(obj, f.name, value)


def validate_kind(obj: Any, needs: Mapping[str, tuple[str, ...]]) -> None:
    """:func:`validate` the dataclass ``obj`` whose ``kind`` (a key of ``needs``) needs the fields
    ``needs[kind]`` > 0; an unknown kind is refused first, listing the known."""
    owner = type(obj).__name__
    if obj.kind not in needs:
        raise unknown_name(f"{owner}.kind", obj.kind, list(needs))
    validate(obj)
    for name in needs[obj.kind]:
        if getattr(obj, name) <= 0:
            raise ValueError(f"{owner}.{name} must be > 0 for kind {obj.kind!r}")


def fraction(owner: str, name: str, value: float, *, allow_zero: bool = False) -> None:
    """Refuse a fraction outside (0, 1] (or [0, 1] with ``allow_zero``)."""
    low_ok = value >= 0 if allow_zero else value > 0
    if not (low_ok and value <= 1):
        interval = "[0, 1]" if allow_zero else "(0, 1]"
        raise ValueError(f"{owner}.{name} must be in {interval}, got {value!r}")


def unknown_name(what: str, name: object, known: list[str]) -> ValueError:
    """The error for a name missing from a registry, listing the known names."""
    return ValueError(f"unknown {what} {name!r}; known: {', '.join(sorted(known))}")


def whole(name: str, value: Any) -> int:
    """``value`` as a whole number >= 0 (an integral float too), else a ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0 or value % 1:
        raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
    return int(value)
