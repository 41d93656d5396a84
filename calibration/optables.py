"""Measured operator tables and the rule that interpolates them (pure Python, no I/O).

A measured database times kernels at grid points; a stage asks for sizes in
between and beyond. One rule answers every table (docs/profiles.md, "Measured
profiles"):

* **Between grid points**, latency is interpolated piecewise-linearly in
  log(size) -> log(latency): a power law between neighbours, so a kernel whose
  time is flat (a weight-bound GEMM at small m), linear (one at large m) or
  quadratic in its size (causal attention over the sequence) is followed
  exactly at the grid points and smoothly between them.
* **Below the grid** the smallest point's latency is kept (a kernel cannot get
  faster than its smallest measured launch).
* **Above the grid** latency grows as size**``exponent_above`` from the largest
  point: 1 for a size the work is linear in (GEMM m, n, k; batch; bytes; a
  decode's context), 2 for the sequence length of context or encoder attention.

A :class:`Curve` is one axis. A :class:`GemmTable` holds one curve over m per
measured (n, k); a query between (n, k) points blends the four surrounding
curves by the same log-log rule. A :class:`BatchTable` (attention) holds, per
measured sequence or context length, a curve over the batch size; rows of a
database often stop at smaller batches as the length grows (memory), and the
curve's rule above its last batch (linear in batch) covers those cells. An
:class:`AllreduceTable` holds a curve over bytes per TP size.

The module stays past 300 lines because every table applies the one interpolation rule
above; the rule and its tables are read, and tested
(tests/calibration/test_measured.py), together.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


def _bracket(xs: Sequence[float], x: float) -> tuple[int, float]:
    """(i, t): ``x`` lies between ``xs[i]`` and ``xs[i + 1]`` at fraction ``t`` in log space."""
    i = bisect.bisect_right(xs, x) - 1
    i = min(max(i, 0), len(xs) - 2)
    lo, hi = xs[i], xs[i + 1]
    return i, (math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo))


@dataclass(frozen=True, slots=True)
class Curve:
    """Latency (seconds) at increasing sizes, interpolated by the module's rule."""

    sizes: tuple[float, ...]
    seconds: tuple[float, ...]
    exponent_above: float = 1.0
    _logs: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.sizes or len(self.sizes) != len(self.seconds):
            raise ValueError("Curve needs as many latencies as sizes, at least one")
        if any(b <= a for a, b in zip(self.sizes, self.sizes[1:], strict=False)) or self.sizes[0] <= 0:
            raise ValueError(f"Curve sizes must be positive and increasing, got {self.sizes[:5]}...")
        if min(self.seconds) <= 0:
            raise ValueError("Curve latencies must be > 0")
        object.__setattr__(self, "_logs", tuple(math.log(s) for s in self.seconds))

    def __call__(self, size: float) -> float:
        xs = self.sizes
        if size <= xs[0]:
            return self.seconds[0]
        if size >= xs[-1]:
            return self.seconds[-1] * (size / xs[-1]) ** self.exponent_above
        i, t = _bracket(xs, size)
        if t == 0.0:  # on a grid point: its measured value, exactly
            return self.seconds[i]
        return math.exp(self._logs[i] + t * (self._logs[i + 1] - self._logs[i]))

    def to_list(self) -> list[list[float]]:
        return [list(self.sizes), list(self.seconds)]

    @classmethod
    def from_list(cls, data: Sequence[Sequence[float]], exponent_above: float = 1.0) -> Curve:
        sizes, seconds = data
        return cls(tuple(float(v) for v in sizes), tuple(float(v) for v in seconds), exponent_above)


def _blend(values: Sequence[tuple[float, float]]) -> float:
    """Weighted geometric mean of (weight, seconds) pairs (log-linear interpolation)."""
    total = sum(w for w, _ in values)
    return math.exp(sum(w * math.log(s) for w, s in values) / total)


def _axis_weights(xs: Sequence[float], x: float) -> list[tuple[float, float, float]]:
    """[(grid value, weight, extrapolation factor)] for ``x`` on the axis ``xs`` (linear above)."""
    if len(xs) == 1 or x <= xs[0]:
        return [(xs[0], 1.0, 1.0)]
    if x >= xs[-1]:
        return [(xs[-1], 1.0, x / xs[-1])]
    i, t = _bracket(xs, x)
    return [(xs[i], 1.0 - t, 1.0), (xs[i + 1], t, 1.0)]


@dataclass(frozen=True, slots=True)
class GemmTable:
    """BF16 GEMM latency by (m, n, k): one :class:`Curve` over m per measured (n, k)."""

    curves: Mapping[tuple[int, int], Curve]
    #: answer only the (n, k) shapes held (a per-model table such as Vidur's: its few shapes are
    #: no grid to blend or extrapolate across); other shapes get None, so the roofline
    exact: bool = False
    _ns: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _ks: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ns", tuple(sorted({n for n, _ in self.curves})))
        object.__setattr__(self, "_ks", tuple(sorted({k for _, k in self.curves})))

    def __call__(self, m: float, n: float, k: float) -> float | None:
        """Seconds of an (m x k) @ (k x n) GEMM, or None when the table cannot say."""
        exact = self.curves.get((int(n), int(k))) if n == int(n) and k == int(k) else None
        if exact is not None:
            return exact(m)
        if self.exact:
            return None
        parts = []
        for nv, nw, nf in _axis_weights(self._ns, n):
            for kv, kw, kf in _axis_weights(self._ks, k):
                curve = self.curves.get((nv, kv))
                if curve is None:  # a hole in the grid (or a table of a model's shapes only)
                    return None
                parts.append((nw * kw, curve(m) * nf * kf))
        return _blend(parts)

    def subset(self, shapes: Sequence[tuple[int, int]], m_grid: Sequence[int]) -> GemmTable:
        """Exact curves for the (n, k) ``shapes`` (interpolated once over this table at ``m_grid``;
        the same values the whole table gives at any m, the grid's curves sharing their m points)."""
        curves = {}
        for n, k in shapes:
            seconds = [self(m, n, k) for m in m_grid]
            if all(s is not None for s in seconds):
                curves[(n, k)] = Curve(tuple(float(m) for m in m_grid), tuple(seconds))  # type: ignore[arg-type]
        return GemmTable(curves, self.exact)

    def m_grid(self) -> tuple[float, ...]:
        """The m points most of the table's curves share."""
        counts: dict[tuple[float, ...], int] = {}
        for curve in self.curves.values():
            counts[curve.sizes] = counts.get(curve.sizes, 0) + 1
        return max(counts, key=lambda sizes: (counts[sizes], len(sizes)))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"{n},{k}": c.to_list() for (n, k), c in sorted(self.curves.items())}
        if self.exact:
            out["exact"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GemmTable:
        curves = {}
        for key, value in data.items():
            if key == "exact":
                continue
            n, k = (int(v) for v in key.split(","))
            curves[(n, k)] = Curve.from_list(value)
        return cls(curves, bool(data.get("exact", False)))


@dataclass(frozen=True, slots=True)
class BatchTable:
    """Attention latency of one head shape by (batch, length): a curve over batch per length."""

    rows: Mapping[int, Curve]
    exponent_above: float
    _lengths: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.rows:
            raise ValueError("BatchTable needs at least one row")
        object.__setattr__(self, "_lengths", tuple(sorted(self.rows)))

    def __call__(self, batch: float, length: float) -> float:
        ls = self._lengths
        if len(ls) == 1 or length <= ls[0]:
            return self.rows[ls[0]](batch)
        if length >= ls[-1]:
            return self.rows[ls[-1]](batch) * (length / ls[-1]) ** self.exponent_above
        i, t = _bracket(ls, length)
        return _blend(((1.0 - t, self.rows[ls[i]](batch)), (t, self.rows[ls[i + 1]](batch))))

    def to_dict(self) -> dict[str, Any]:
        return {"exponent_above": self.exponent_above,
                "rows": {str(length): c.to_list() for length, c in sorted(self.rows.items())}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BatchTable:
        return cls({int(k): Curve.from_list(v) for k, v in data["rows"].items()},
                   float(data["exponent_above"]))


#: attention head shapes: (query heads, KV heads, head dim) per GPU; encoders use KV heads = heads
HeadShape = tuple[int, int, int]


def _shape_key(shape: HeadShape) -> str:
    return ",".join(str(v) for v in shape)


def _parse_shape(key: str) -> HeadShape:
    h, kv, d = (int(v) for v in key.split(","))
    return h, kv, d


@dataclass(frozen=True, slots=True)
class AttentionTables:
    """:class:`BatchTable` per head shape, with the nearest-shape rule for shapes not measured.

    A shape missing from the database is read from the held shape of the same
    head dim nearest in (log heads, log KV heads), its latency scaled by the
    ratio of query heads (attention work is linear in heads); :meth:`lookup`
    says which shape answered.
    """

    tables: Mapping[HeadShape, BatchTable]
    #: shape asked -> the held shape that answers it, fixed when a profile keeps only its
    #: model's shapes (so the nearest shape is the one the whole database would choose)
    aliases: Mapping[HeadShape, HeadShape] = field(default_factory=dict)

    def lookup(self, shape: HeadShape) -> tuple[BatchTable, HeadShape] | None:
        if shape in self.tables:
            return self.tables[shape], shape
        if shape in self.aliases:
            held = self.aliases[shape]
            return self.tables[held], held
        h, kv, d = shape
        same_dim = [s for s in self.tables if s[2] == d]
        if not same_dim:
            return None
        near = min(same_dim, key=lambda s: (abs(math.log(s[0] / h)) + abs(math.log(s[1] / kv)), s))
        return self.tables[near], near

    def __call__(self, batch: float, length: float, shape: HeadShape) -> tuple[float, HeadShape] | None:
        found = self.lookup(shape)
        if found is None:
            return None
        table, held = found
        return table(batch, length) * shape[0] / held[0], held

    def subset(self, shapes: Sequence[HeadShape]) -> AttentionTables:
        """The tables that answer ``shapes`` (those this database would answer them with)."""
        tables, aliases = {}, {}
        for shape in shapes:
            found = self.lookup(shape)
            if found is not None:
                tables[found[1]] = found[0]
                if found[1] != shape:
                    aliases[shape] = found[1]
        return AttentionTables(tables, aliases)

    def to_dict(self) -> dict[str, Any]:
        return {"tables": {_shape_key(s): t.to_dict() for s, t in sorted(self.tables.items())},
                "aliases": {_shape_key(s): _shape_key(h) for s, h in sorted(self.aliases.items())}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AttentionTables:
        return cls({_parse_shape(k): BatchTable.from_dict(v) for k, v in data["tables"].items()},
                   {_parse_shape(k): _parse_shape(v) for k, v in data.get("aliases", {}).items()})


@dataclass(frozen=True, slots=True)
class AllreduceTable:
    """All-reduce latency by message bytes, one :class:`Curve` per TP size."""

    curves: Mapping[int, Curve]

    def __call__(self, nbytes: float, tp: int) -> float | None:
        curve = self.curves.get(tp)
        return None if curve is None else curve(nbytes)

    def to_dict(self) -> dict[str, Any]:
        return {str(tp): c.to_list() for tp, c in sorted(self.curves.items())}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AllreduceTable:
        return cls({int(k): Curve.from_list(v) for k, v in data.items()})


@dataclass(frozen=True, slots=True, kw_only=True)
class OpTables:
    """Every measured table of one GPU system and engine version, with where it came from."""

    source: str
    gemm: GemmTable
    context_attention: AttentionTables
    generation_attention: AttentionTables
    encoder_attention: AttentionTables
    allreduce: AllreduceTable

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "gemm": self.gemm.to_dict(),
                "context_attention": self.context_attention.to_dict(),
                "generation_attention": self.generation_attention.to_dict(),
                "encoder_attention": self.encoder_attention.to_dict(),
                "allreduce": self.allreduce.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpTables:
        try:
            return cls(source=str(data["source"]), gemm=GemmTable.from_dict(data["gemm"]),
                       context_attention=AttentionTables.from_dict(data["context_attention"]),
                       generation_attention=AttentionTables.from_dict(data["generation_attention"]),
                       encoder_attention=AttentionTables.from_dict(data["encoder_attention"]),
                       allreduce=AllreduceTable.from_dict(data["allreduce"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"measured op tables are malformed: {exc!r}") from None
