"""Traces as workloads: recorded requests, or token rows that take their items from a mix.

A :class:`Trace` is what a ``[workload]`` table's ``trace`` file becomes. It
answers ``draw(mix, rng) -> requests``, its ``mean_rate_hz`` and
``scaled(factor)`` (arrival times multiplied by ``factor``, for a rate
rescale). Two kinds (docs/workloads.md, "Trace files"):

* :class:`RecordedTrace`: our own trace format, every request complete; the
  mix and the generator are not used.
* :class:`TokenTrace`: a public LLM trace (Azure, BurstGPT, Mooncake) gives
  each request's arrival, LM input tokens and output tokens, and nothing
  multimodal. The mapping rule: each request (``0..n-1`` in arrival order)
  takes multimodal items drawn from the mix with the one generator (every
  request's item count first, then every item, in request order); its text
  prompt is the trace's input minus the items' LM tokens, at least 1; its
  output is the trace's output, at least 1. The trace's input is thus the
  LM's whole prefill whenever it exceeds the items; the mix's text ranges
  are not used.

The files are read by the runtime (``runtime.traces``: its table of formats,
``TRACE_FORMATS``, and ``load_trace``); a ``[workload]`` table is validated
with a :class:`TraceReader` handed in, so the core never opens one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from easerve_core import checks
from easerve_core.request import Request
from easerve_core.workload.mixes import RequestMix

DEFAULT_TRACE_FORMAT = "easerve"


class Trace(Protocol):
    @property
    def num_requests(self) -> int: ...

    @property
    def mean_rate_hz(self) -> float: ...

    def scaled(self, factor: float) -> Trace: ...

    def draw(self, mix: RequestMix, rng: np.random.Generator) -> list[Request]: ...

    def longest_input_tokens(self, mix: RequestMix) -> int:
        """The longest input (prompt and items) :meth:`draw` can give with ``mix``, on any seed."""
        ...


class TraceReader(Protocol):
    """Reads the trace file a ``[workload]`` table names, as ``trace_format`` (``field`` names
    that knob in the error); ``runtime.traces.load_trace`` is the one the commands pass."""

    def __call__(self, path: str, trace_format: str, *, field: str) -> Trace: ...


def _mean_rate_hz(arrivals: Sequence[float]) -> float:
    """Requests per second between the first and last arrival (``n`` if they coincide)."""
    span = arrivals[-1] - arrivals[0]
    return (len(arrivals) - 1) / span if span > 0 else float(len(arrivals))


@dataclass(frozen=True, slots=True)
class RecordedTrace:
    """Complete requests, sorted by arrival, replayed as they are."""

    requests: tuple[Request, ...]

    def __post_init__(self) -> None:
        if not self.requests:
            raise ValueError("a trace needs at least one request")

    @property
    def num_requests(self) -> int:
        return len(self.requests)

    @property
    def mean_rate_hz(self) -> float:
        return _mean_rate_hz([r.arrival_s for r in self.requests])

    def scaled(self, factor: float) -> RecordedTrace:
        factor = checks.positive("factor", factor)
        return RecordedTrace(tuple(replace(r, arrival_s=r.arrival_s * factor) for r in self.requests))

    def draw(self, mix: RequestMix, rng: np.random.Generator) -> list[Request]:
        return list(self.requests)

    def longest_input_tokens(self, mix: RequestMix) -> int:
        return max(r.input_tokens for r in self.requests)


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenTrace:
    """Arrivals (s, non-decreasing) with LM input and output tokens, one entry per request."""

    arrival_s: tuple[float, ...]
    input_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        if n == 0:
            raise ValueError("a trace needs at least one request")
        if len(self.input_tokens) != n or len(self.output_tokens) != n:
            raise ValueError("arrival_s, input_tokens and output_tokens must have one entry per request")
        if any(b < a for a, b in zip(self.arrival_s, self.arrival_s[1:], strict=False)):
            raise ValueError("arrival_s must be non-decreasing")
        checks.non_negative("arrival_s[0]", self.arrival_s[0])

    @property
    def num_requests(self) -> int:
        return len(self.arrival_s)

    @property
    def mean_rate_hz(self) -> float:
        return _mean_rate_hz(self.arrival_s)

    def scaled(self, factor: float) -> TokenTrace:
        factor = checks.positive("factor", factor)
        return replace(self, arrival_s=tuple(t * factor for t in self.arrival_s))

    def longest_input_tokens(self, mix: RequestMix) -> int:
        """A row's input, or one prompt token and the most items ``mix`` can draw (:meth:`draw`)."""
        return max(max(self.input_tokens), 1 + mix.longest_items_tokens)

    def rows_under_items(self, requests: Sequence[Request]) -> int:
        """How many of :meth:`draw`'s ``requests`` got items of at least the row's input: their
        prompt is the one token the rule keeps, more than the trace says (the module docstring)."""
        return sum(given <= r.mm_tokens for given, r in zip(self.input_tokens, requests, strict=True))

    def draw(self, mix: RequestMix, rng: np.random.Generator) -> list[Request]:
        """Requests ``0..n-1`` in arrival order, items from ``mix`` (the module's rule)."""
        out = []
        items_of = mix.draw_item_lists(self.num_requests, rng)
        rows = zip(self.arrival_s, self.input_tokens, self.output_tokens, items_of, strict=True)
        for i, (arrival, input_tokens, output_tokens, (items, tower)) in enumerate(rows):
            out.append(Request(
                request_id=i,
                arrival_s=arrival,
                modality=mix.modality,
                prompt_tokens=max(1, input_tokens - sum(items)),
                output_tokens=max(1, output_tokens),
                mm_tokens_per_item=items,
                encode_tokens_per_item=tower,
            ))
        return out
