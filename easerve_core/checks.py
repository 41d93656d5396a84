"""Validators shared by every constructor and loader in easerve (public API).

Every public constructor and loader in easerve rejects bad input with a
``ValueError`` that names the field and the value; these helpers keep those
messages uniform ("max_batch must be >= 1, got 0"). A settings class names
them field by field (:mod:`easerve_core.settings`).

A choice easerve makes for the user where the input leaves it open (rows
sorted by arrival, a default filled in) is a :class:`Notice`, issued with
:func:`notice` as a Python warning: the ``easerve`` command prints each as
one line on stderr (docs/cli.md), a library caller sees an ordinary warning.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from typing import Any


class Notice(UserWarning):
    """A choice made for the user that they should see (the module docstring)."""


def notice(message: str) -> None:
    """Tell the user, as a :class:`Notice`, of a choice made for them (one line)."""
    warnings.warn(message, Notice, stacklevel=2)


def finite(name: str, value: Any) -> float:
    """Return ``value`` as a float, refusing NaN, infinities and non-numbers."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(out):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return out


def non_negative(name: str, value: Any) -> float:
    out = finite(name, value)
    if out < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return out


def positive(name: str, value: Any) -> float:
    out = finite(name, value)
    if out <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return out


def fraction(name: str, value: Any) -> float:
    out = finite(name, value)
    if not 0.0 <= out <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return out


def flag(name: str, value: Any) -> bool:
    """Return ``value``, refusing anything but True and False (a config's true / false)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


def integer(name: str, value: Any, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    out = int(value)
    if minimum is not None and out < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return out


def instance(name: str, value: Any, *, kind: type) -> Any:
    """Return ``value``, refusing anything not of ``kind`` (a group of settings, say)."""
    if not isinstance(value, kind):
        raise ValueError(f"{name} must be a {kind.__name__}, got {value!r}")
    return value


def one_of(name: str, value: Any, known: Iterable[str]) -> str:
    options = sorted(known)
    if value not in options:
        raise ValueError(f"unknown {name} {value!r}; known: {', '.join(options)}")
    return str(value)
