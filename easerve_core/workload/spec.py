"""Workload specs: a mix, an arrival process and a request count, as data.

:class:`WorkloadSpec` is what a config file's ``[workload]`` table becomes;
:func:`generate` turns it into requests with an injected generator. Keys of
the table (docs/workloads.md):

``mix``            a preset name (``llava-image``, ``qwen-video``, ...)
``num_requests``   how many requests (ignored for a trace)
``arrival``        ``poisson`` | ``gamma`` | ``schedule`` | ``trace`` | a shape
                   (``sine`` | ``step`` | ``spike`` | ``drift``, see ``shapes``)
``rate_hz``        mean rate for ``poisson`` and ``gamma`` (and ``sine``, the
                   base rate of ``spike``)
``cv``             coefficient of variation of gaps (``gamma``, ``schedule``)
``burstiness``     alternatively vLLM's Gamma shape, ``1 / cv**2``
``schedule``       ``[[duration_s, rate_hz], ...]`` for ``schedule``
``trace``          a trace file for ``trace`` (``arrival`` may then be left out),
                   read by the reader passed to :meth:`WorkloadSpec.from_dict`
``trace_format``   ``easerve`` (default: our CSV/JSONL by suffix) | ``azure`` |
                   ``burstgpt`` | ``mooncake``; a public trace's requests draw
                   their multimodal items from the mix (``replay``)
shape fields       ``amplitude_frac``, ``period_s``, ``phase_frac`` (sine);
                   ``rate_before_hz``, ``rate_after_hz``, ``at_s`` (step);
                   ``spike_rate_hz``, ``start_s``, ``duration_s`` (spike);
                   ``start_rate_hz``, ``end_rate_hz``, ``duration_s`` (drift)
``prompt_tokens``, ``output_tokens``, ``items_per_request``: [min, max]
                   overrides of the preset's ranges
``item_tokens``, ``item_weights``: override the preset's per-item LM tokens
                   (e.g. for small live models) and their weights
``images``, ``videos``, ``audio_s`` (with ``image_weights``, ``video_weights``,
                   ``audio_weights``): raw item sizes instead of LM tokens
                   (``sizes``); the model's processor rule turns them into
                   tokens (``calibration.sizes``) before requests are drawn.
                   Without ``mix`` the mix is the modality's preset
                   (:data:`RAW_SIZE_MIXES`) for its text lengths
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from easerve_core import checks, limits
from easerve_core.request import Request
from easerve_core.settings import refuse_unknown
from easerve_core.workload.arrivals import (
    ArrivalProcess,
    GammaArrivals,
    PoissonArrivals,
    RateSchedule,
)
from easerve_core.workload.mixes import RequestMix, mix
from easerve_core.workload.replay import DEFAULT_TRACE_FORMAT, Trace, TraceReader
from easerve_core.workload.shapes import SHAPES, required_fields, shape_fields
from easerve_core.workload.sizes import KEYS as SIZE_KEYS
from easerve_core.workload.sizes import WEIGHT_KEYS, RawSizes

ARRIVALS = ("poisson", "gamma", "schedule", "trace", *SHAPES)
_CLASSIC_FIELDS = {"rate_hz", "cv", "burstiness", "schedule"}
_SHAPE_FIELDS = {name for kind in SHAPES for name in shape_fields(kind)} - _CLASSIC_FIELDS
_KEYS = {"mix", "num_requests", "arrival", "trace", "trace_format", "prompt_tokens",
         "output_tokens", "items_per_request", "item_tokens", "item_weights", "item_encode_tokens",
         *SIZE_KEYS, *WEIGHT_KEYS, *_CLASSIC_FIELDS, *_SHAPE_FIELDS}
#: the mix a raw-size key draws text lengths from when the table names none
RAW_SIZE_MIXES = {"images": "llava-image", "videos": "qwen-video", "audio_s": "ultravox-audio"}


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadSpec:
    """A workload as data. A ``trace``, when set, replaces the arrivals (and, when it
    is recorded, the mix too). ``sizes``, when set, are raw item sizes: the mix
    takes their LM tokens once :meth:`with_size_tokens` gives them, and until
    then the workload draws no requests."""

    mix: RequestMix
    arrivals: ArrivalProcess | None
    num_requests: int
    mix_name: str = "custom"
    trace: Trace | None = None
    sizes: RawSizes | None = None

    def __post_init__(self) -> None:
        limits.at_most("num_requests", checks.integer("num_requests", self.num_requests, minimum=1),
                       limits.MAX_NUM_REQUESTS, "about 2 KB each while a run lasts; split longer studies")
        if self.trace is None and self.arrivals is None:
            raise ValueError("a workload needs arrivals or a trace")
        if self.arrivals is not None and self.trace is None:
            rate = self.arrivals.mean_rate_hz
            if self.num_requests > rate * limits.MAX_ARRIVAL_S:  # the requests' arrival times are bounded
                raise ValueError(f"rate_hz {rate:g}: {self.num_requests:,} requests would arrive over about "
                                 f"{self.num_requests / rate:,.3g} s, more than {limits.MAX_ARRIVAL_S:,} s "
                                 f"({limits.ARRIVAL_WHY}); raise the rate")

    @property
    def mean_rate_hz(self) -> float:
        if self.trace is not None:
            return self.trace.mean_rate_hz
        assert self.arrivals is not None
        return self.arrivals.mean_rate_hz

    def with_rate(self, rate_hz: float) -> WorkloadSpec:
        """The same workload at another mean rate (a trace is time-scaled)."""
        rate_hz = checks.positive("rate_hz", rate_hz)
        if self.trace is not None:
            return replace(self, trace=self.trace.scaled(self.trace.mean_rate_hz / rate_hz))
        assert self.arrivals is not None
        return replace(self, arrivals=self.arrivals.with_rate(rate_hz))

    @property
    def longest_input_tokens(self) -> int:
        """The longest input (prompt and items) :func:`generate` can draw, on any seed: what a
        stream drawn for another seed (a HAS trial, a sweep point) may hold."""
        if self.trace is not None:
            return self.trace.longest_input_tokens(self.mix)
        return self.mix.longest_input_tokens

    @property
    def needs_size_tokens(self) -> bool:
        """Whether raw sizes still wait for the model's processor rule."""
        return self.sizes is not None and not self.sizes.is_resolved

    def with_size_tokens(self, tokens: tuple[int, ...], rule: str,
                         encode_tokens: tuple[int, ...] = ()) -> WorkloadSpec:
        """The workload with its raw sizes resolved to ``tokens`` (one per item) by ``rule``;
        ``encode_tokens``: each item's tokens before the model cuts or pools features (empty: neither)."""
        if self.sizes is None:
            raise ValueError("the workload gives no raw sizes to resolve")
        sizes = self.sizes.resolved(tokens, rule, encode_tokens)
        try:
            mix = self.mix.with_items(sizes.tokens, sizes.weights, sizes.encode_tokens)
        except ValueError as exc:
            raise ValueError(f"workload.{sizes.key} ({rule}): {exc}") from None
        return replace(self, mix=mix, sizes=sizes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, traces: TraceReader | None = None) -> WorkloadSpec:
        """The ``[workload]`` table ``data``; ``traces`` reads its ``trace`` file (the core opens
        none: the runtime passes ``runtime.traces.load_trace``)."""
        refuse_unknown(data, _KEYS, "workload", list_known=False)
        kind = checks.one_of("workload.arrival", _arrival_kind(data), ARRIVALS)
        sizes = RawSizes.from_table(data)
        mix_name = str(data.get("mix", "llava-image" if sizes is None else RAW_SIZE_MIXES[sizes.key]))
        base = mix(mix_name)
        if sizes is not None:
            _check_sizes(sizes, data, base)
        overrides: dict[str, Any] = {k: _seq(f"workload.{k}", data[k]) for k in (
            "prompt_tokens", "output_tokens", "items_per_request", "item_tokens", "item_weights",
            "item_encode_tokens") if k in data}
        if "item_tokens" in overrides:  # the preset's weights and pooling were for its own choices
            overrides.setdefault("item_weights", ())
            overrides.setdefault("item_encode_tokens", ())
        req_mix = replace(base, **overrides) if overrides else base
        if kind == "trace":
            _refuse_foreign_fields(kind, data)
            trace = _trace(data, traces)
            return cls(mix=req_mix, arrivals=None, num_requests=trace.num_requests,
                       mix_name=mix_name, trace=trace, sizes=sizes)
        num = checks.integer("workload.num_requests", data.get("num_requests", 500), minimum=1)
        limits.at_most("workload.num_requests", num, limits.MAX_NUM_REQUESTS,
                       "about 2 KB each while a run lasts; split longer studies")
        return cls(mix=req_mix, arrivals=_arrivals(kind, data), num_requests=num, mix_name=mix_name,
                   sizes=sizes)


def _check_sizes(sizes: RawSizes, data: Mapping[str, Any], base: RequestMix) -> None:
    """Raw sizes replace the preset's item tokens, and must be of the mix's modality."""
    for key in ("item_tokens", "item_weights", "item_encode_tokens"):
        if key in data:
            raise ValueError(f"workload.{key}: give LM tokens or workload.{sizes.key} (raw sizes), not both")
    if base.modality is not sizes.modality:
        raise ValueError(f"workload.{sizes.key} are {sizes.modality} items, but mix {data['mix']!r} is "
                         f"{base.modality}; leave mix out or name a mix of modality {sizes.modality}")


def _arrivals(kind: str, data: Mapping[str, Any]) -> ArrivalProcess:
    _refuse_foreign_fields(kind, data)
    if kind in SHAPES:
        return _shape(kind, data)
    cv = _cv(data)
    if kind == "schedule":
        raw = data.get("schedule")
        if not isinstance(raw, list | tuple) or not raw:
            raise ValueError("workload.schedule must be [[duration_s, rate_hz], ...]")
        try:
            segs = tuple((float(d), float(r)) for d, r in raw)
        except (TypeError, ValueError):
            raise ValueError(f"workload.schedule is malformed: {raw!r}") from None
        return RateSchedule(segments=segs, cv=cv)  # type: ignore[arg-type]
    if "rate_hz" not in data:
        raise ValueError("workload.rate_hz is required")
    rate = checks.positive("workload.rate_hz", data["rate_hz"])
    return PoissonArrivals(rate_hz=rate) if kind == "poisson" else GammaArrivals(rate_hz=rate, cv=cv)


def _refuse_foreign_fields(kind: str, data: Mapping[str, Any]) -> None:
    """A shape takes only its own fields; the older kinds take none of the shapes' own."""
    own = set(shape_fields(kind)) if kind in SHAPES else _CLASSIC_FIELDS
    pool = _CLASSIC_FIELDS | _SHAPE_FIELDS if kind in SHAPES else _SHAPE_FIELDS
    foreign = sorted((set(data) & pool) - own)
    if foreign:
        raise ValueError(f"workload.{foreign[0]} is not a field of arrival {kind!r}"
                         f" (its fields: {', '.join(sorted(own))})")


def _shape(kind: str, data: Mapping[str, Any]) -> ArrivalProcess:
    missing = [name for name in required_fields(kind) if name not in data]
    if missing:
        raise ValueError(f"workload.{missing[0]} is required for arrival {kind!r}")
    try:
        return SHAPES[kind](**{name: data[name] for name in shape_fields(kind) if name in data})
    except ValueError as exc:  # the shape's messages start with the field's name
        raise ValueError(f"workload.{exc}") from None


def _arrival_kind(data: Mapping[str, Any]) -> Any:
    """``arrival``; a ``trace`` file alone means ``trace``, and is refused beside another kind."""
    kind = data.get("arrival", "trace" if "trace" in data else "poisson")
    if kind != "trace":
        for key in ("trace", "trace_format"):
            if key in data:
                raise ValueError(f"workload.{key} is only for arrival 'trace', got arrival {kind!r}")
    return kind


def _trace(data: Mapping[str, Any], traces: TraceReader | None) -> Trace:
    if "trace" not in data:
        raise ValueError("workload.trace must name a file when arrival is 'trace'")
    if traces is None:
        raise ValueError("workload.trace: no trace reader given to read it "
                         "(pass runtime.traces.load_trace as traces)")
    fmt = data.get("trace_format", DEFAULT_TRACE_FORMAT)
    return traces(data["trace"], fmt, field="workload.trace_format")


def _seq(name: str, value: Any) -> tuple[Any, ...]:
    if not isinstance(value, list | tuple):
        raise ValueError(f"{name} must be a list, got {value!r}")
    return tuple(value)


def _cv(data: Mapping[str, Any]) -> float:
    if "cv" in data and "burstiness" in data:
        raise ValueError("give workload.cv or workload.burstiness, not both")
    if "burstiness" in data:
        return float(checks.positive("workload.burstiness", data["burstiness"]) ** -0.5)
    return checks.positive("workload.cv", data.get("cv", 1.0))


def generate(spec: WorkloadSpec, rng: np.random.Generator) -> list[Request]:
    """The spec's requests, arrival-ordered, ids 0..n-1 (a recorded trace keeps its own).

    A public trace draws its requests' multimodal items from the mix with ``rng``.
    """
    if spec.needs_size_tokens:
        assert spec.sizes is not None
        raise ValueError(f"workload.{spec.sizes.key}: raw sizes need the model's processor rule to become "
                         "LM tokens; load the config with its model (calibration.sizes.resolve_sizes)")
    if spec.trace is not None:
        return spec.trace.draw(spec.mix, rng)
    assert spec.arrivals is not None
    times = spec.arrivals.sample(spec.num_requests, rng)
    return [spec.mix.draw(i, float(t), rng) for i, t in enumerate(times)]
