"""The declarative settings helper (easerve_core.settings): checks by field, unknown keys, round trips."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from easerve_core import checks
from easerve_core.settings import Settings, refuse_unknown, rule


def _levels(name: str, value: object) -> tuple[float, ...]:
    if not isinstance(value, list | tuple):
        raise ValueError(f"{name} must be a list, got {value!r}")
    return tuple(checks.fraction(f"{name}[{i}]", v) for i, v in enumerate(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class Knobs(Settings):
    section = "knobs"
    prefix = "knobs."

    size: int = field(default=2, metadata=rule(checks.integer, minimum=1, store=True))
    share: float = field(default=0.5, metadata=rule(checks.fraction))
    limit_s: float | None = field(default=None, metadata=rule(checks.positive, optional=True))
    kind: str = field(default="a", metadata=rule(checks.one_of, known=("a", "b")))
    levels: tuple[float, ...] = field(default=(0.25, 1.0), metadata=rule(_levels, store=True))
    note: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Outer(Settings):
    knobs: Knobs = field(default_factory=Knobs)
    flag: bool = True


def test_a_refused_value_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"^knobs\.size must be >= 1, got 0$"):
        Knobs(size=0)
    with pytest.raises(ValueError, match=r"^knobs\.share must be in \[0, 1\], got 2$"):
        Knobs(share=2)
    with pytest.raises(ValueError, match=r"^unknown knobs\.kind 'c'; known: a, b$"):
        Knobs(kind="c")
    with pytest.raises(ValueError, match=r"^knobs\.limit_s must be > 0, got -1$"):
        Knobs(limit_s=-1)


def test_fields_are_checked_in_field_order() -> None:
    with pytest.raises(ValueError, match=r"^knobs\.size"):
        Knobs(size=0, share=2, kind="c")


def test_store_keeps_the_normalised_value_and_optional_lets_none_pass() -> None:
    knobs = Knobs(size=3.0, limit_s=None)
    assert knobs.size == 3 and isinstance(knobs.size, int)
    assert Knobs(share=1).share == 1 and isinstance(Knobs(share=1).share, int)  # not stored: as given


def test_a_count_given_as_a_whole_float_is_kept_as_an_int_without_store() -> None:
    """A deployment's max_encode_batch = 2.0 was accepted and kept as 2.0, and the plan's range()
    over it raised a TypeError (found by mutating shipped configs)."""
    from easerve_core.deployment import Deployment

    deployment = Deployment.from_dict({"max_encode_batch": 2.0, "encode": {"num_workers": 2.0, "tp": 1.0}})
    assert type(deployment.max_encode_batch) is int and type(deployment.encode.num_workers) is int
    assert deployment.label().startswith("E2x1 ") and " B2 " in deployment.label()


def test_an_unknown_key_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^unknown knobs field\(s\): bogus, zz; "
                                         r"known: kind, levels, limit_s, note, share, size$"):
        Knobs.from_dict({"size": 2, "zz": 1, "bogus": 0})
    with pytest.raises(ValueError, match=r"^unknown bare field\(s\): x$"):
        refuse_unknown({"x": 1, "count": 2}, {"count"}, "bare", list_known=False)
    with pytest.raises(ValueError, match=r"^unknown t field\(s\): b \(a hint\); known: z, a$"):
        refuse_unknown({"a": 1, "b": 2}, ["z", "a"], "t", hint=" (a hint)")


def test_defaults_round_trip_through_to_dict_and_from_dict() -> None:
    knobs = Knobs()
    out = knobs.to_dict()
    assert out == {"size": 2, "share": 0.5, "limit_s": None, "kind": "a", "levels": (0.25, 1.0), "note": ""}
    assert list(out) == ["size", "share", "limit_s", "kind", "levels", "note"]
    assert Knobs.from_dict(out) == knobs
    changed = Knobs(size=4, limit_s=2.5, kind="b", levels=(0.5,))
    assert Knobs.from_dict(changed.to_dict()) == changed


def test_nested_settings_become_their_dicts() -> None:
    assert Outer().to_dict() == {"knobs": Knobs().to_dict(), "flag": True}


@dataclass(frozen=True, slots=True, kw_only=True)
class Flagged(Settings):
    prefix = "flagged."
    trial_s: float = field(default=1.0, metadata=rule(checks.positive, label="trial-s"))
    low: int = field(default=0, metadata=rule(checks.integer, minimum=0))
    high: int = 1

    def __post_init__(self) -> None:
        self.validate()
        checks.integer("high", self.high, minimum=self.low)  # a rule between fields, after the fields'


def test_a_label_names_the_field_and_rules_between_fields_come_after() -> None:
    with pytest.raises(ValueError, match=r"^trial-s must be > 0, got 0$"):
        Flagged(trial_s=0)
    with pytest.raises(ValueError, match=r"^flagged\.low must be >= 0, got -1$"):
        Flagged(low=-1, high=-5)
    with pytest.raises(ValueError, match=r"^high must be >= 3, got 2$"):
        Flagged(low=3, high=2)
