"""Settings classes, declared: each field names its check; one validate, one from_dict, one to_dict.

A settings class is a frozen dataclass over :class:`Settings` whose fields
name their check in their metadata with :func:`rule`::

    @dataclass(frozen=True, slots=True, kw_only=True)
    class ControllerSettings(Settings):
        section = "controller"
        prefix = "controller."
        window_s: float = field(default=60.0, metadata=rule(checks.positive))

A check is any ``check(name, value, **options)`` that raises a ``ValueError``
naming the field and returns the value, normalised (:mod:`easerve_core.checks`
holds the shared ones). Construction runs the checks in field order, each
with the field's name after ``prefix``; a rule that ``store``s puts the
normalised value in the field. A rule between fields is not a field's: a class
writes it after :meth:`Settings.validate` in its own ``__post_init__``.
:meth:`Settings.from_dict` refuses keys that are not fields in one line
("unknown controller field(s): x; known: ..."), and :meth:`Settings.to_dict`
gives the fields in order, nested settings as their dicts.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from functools import partial
from types import MappingProxyType
from typing import Any, ClassVar, Self

#: ``check(name, value, **options)``: the value (normalised), or a ValueError naming ``name``
Check = Callable[..., Any]
_KEY = "easerve.rule"


@dataclass(frozen=True, slots=True)
class Rule:
    """A field's check, its options, whether the normalised value is stored, whether None passes,
    and the name messages give it when that is not the field's (a command-line flag, say)."""

    check: Check
    options: Mapping[str, Any]
    store: bool = False
    optional: bool = False
    label: str | None = None


def rule(check: Check, /, *, store: bool = False, optional: bool = False, label: str | None = None,
         **options: Any) -> Mapping[str, Rule]:
    """Field metadata naming the field's check.

    ``field(default=1, metadata=rule(checks.integer, minimum=1))``; the options go to the check.
    ``store``: the field keeps the check's normalised value (an integral float a check makes an
    ``int`` is always kept as the ``int``: a count given as ``2.0`` would break ``range``);
    ``optional``: None passes unchecked; ``label``: the name in messages instead of the field's.
    """
    return MappingProxyType({_KEY: Rule(check, MappingProxyType(options), store, optional, label)})


def refuse_unknown(data: Mapping[str, Any], known: Iterable[str], section: str, *,
                   list_known: bool = True, hint: str = "") -> None:
    """A ValueError naming every key of ``data`` not in ``known`` (listed in the order given)."""
    known = list(known)
    unknown = sorted(set(data) - set(known))
    if unknown:
        tail = f"; known: {', '.join(known)}" if list_known else ""
        raise ValueError(f"unknown {section} field(s): {', '.join(unknown)}{hint}{tail}")


class Settings:
    """Base of a declarative settings dataclass (the module docstring)."""

    __slots__ = ()
    #: the table in "unknown {section} field(s)"
    section: ClassVar[str] = ""
    #: put before every field's name in its check's message ("controller." -> "controller.window_s")
    prefix: ClassVar[str] = ""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Run every field's rule, in field order."""
        for attr, name, check, optional, store in _rules(type(self)):
            value = getattr(self, attr)
            if value is None and optional:
                continue
            out = check(name, value)
            if store or (type(value) is float and type(out) is int):  # a count of 2.0 is kept as 2
                object.__setattr__(self, attr, out)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The settings of a config table; a key that is not a field is refused by name."""
        refuse_unknown(data, sorted(f.name for f in fields(cls)), cls.section)  # type: ignore[arg-type]
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        """The fields in order, nested settings as their dicts."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]


#: per class, (field, name in messages, check with its options bound, optional, store), in field order
_RULES: dict[type, tuple[tuple[str, str, Check, bool, bool], ...]] = {}


def _rules(cls: type[Settings]) -> tuple[tuple[str, str, Check, bool, bool], ...]:
    """The rules of ``cls``, gathered once (construction is on the simulator's path)."""
    found = _RULES.get(cls)
    if found is None:
        found = _RULES[cls] = tuple(
            (f.name, r.label or cls.prefix + f.name, partial(r.check, **r.options) if r.options else r.check,
             r.optional, r.store)
            for f in fields(cls) if (r := f.metadata.get(_KEY)) is not None)  # type: ignore[arg-type]
    return found


def _plain(value: Any) -> Any:
    return value.to_dict() if isinstance(value, Settings) else value
