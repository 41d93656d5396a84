"""Workload shifts where the best deployment moves: phases of mix and rate, and their request streams.

docs/controller.md, "Shifts where the optimum moves". A :class:`Shift` is a
model (a paper modality's setup), the controller's signal
(:data:`easerve_core.controller.SIGNALS`) and phases in time order, each a
request mix at a rate. The built-in ones (:data:`SHIFTS`) alternate two
phases, 300 s each, twice; a phase without a rate runs at ``load_frac`` of
what the screen says the best allocation carries for its mix
(:func:`easerve.experiments.shape_control.screened_capacity_hz`). A shift
file (TOML) gives its own::

    model = "image"
    signal = "output_tokens_mean"
    [[phase]]
    start_s = 0
    duration_s = 300
    rate_hz = 2.0
    mix = "llava-caption"

Phases must not overlap or go back in time, durations must be > 0, and the
mixes are :data:`PHASE_MIXES` or :data:`easerve_core.workload.mixes.MIXES`
(a ``ValueError`` names the field).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from easerve.experiments.paper import MODALITIES
from easerve_core import Request, checks
from easerve_core.controller import SIGNALS
from easerve_core.files import read_toml
from easerve_core.workload import GammaArrivals, RequestMix, WorkloadSpec, generate
from easerve_core.workload.mixes import MIXES

_LLAVA = MIXES["llava-image"]
#: the phases' mixes beyond the named presets (docs/workloads.md has the token counts)
PHASE_MIXES: Mapping[str, RequestMix] = {
    # captioning: a short prompt and a one-line caption (encode- and prefill-bound)
    "llava-caption": replace(_LLAVA, prompt_tokens=(16, 64), output_tokens=(16, 48)),
    # chat about an image with long answers (decode-bound)
    "llava-chat": replace(_LLAVA, output_tokens=(512, 1024)),
    # one 336x336 tile, no anyres grid (LLaVA-v1.6's base resolution: 576 LM tokens)
    "llava-small": replace(_LLAVA, item_tokens=(576,), item_weights=()),
    # anyres with the full 2x2 grid plus the base tile (672x672: 2,928 LM tokens)
    "llava-anyres": replace(_LLAVA, item_tokens=(2928,), item_weights=()),
}


def phase_mix(name: str) -> RequestMix:
    if name in PHASE_MIXES:
        return PHASE_MIXES[name]
    checks.one_of("mix", name, [*PHASE_MIXES, *MIXES])
    return MIXES[name]


@dataclass(frozen=True, slots=True, kw_only=True)
class Phase:
    """``mix`` at ``rate_hz`` (None: ``load_frac`` of its screened capacity) for ``duration_s``."""

    start_s: float
    duration_s: float
    mix: str
    rate_hz: float | None = None

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Shift:
    """A model, the controller's signal, and phases in time order (module docstring)."""

    name: str
    model: str
    signal: str
    phases: tuple[Phase, ...]
    load_frac: float = 0.6
    why: str = ""
    #: a shift replayed from a trace (:mod:`easerve.experiments.trace_shift`): its arrivals (s,
    #: non-decreasing); each phase's requests take these times, their content from its mix.
    #: Empty: Poisson arrivals at each phase's rate.
    arrivals_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        checks.one_of("model", self.model, list(MODALITIES))
        checks.one_of("signal", self.signal, list(SIGNALS))
        checks.fraction("load_frac", self.load_frac)
        if not self.phases:
            raise ValueError("phase: a shift needs at least one phase")
        for i, p in enumerate(self.phases):
            checks.non_negative(f"phase[{i}].start_s", p.start_s)
            checks.positive(f"phase[{i}].duration_s", p.duration_s)
            if p.rate_hz is not None:
                checks.positive(f"phase[{i}].rate_hz", p.rate_hz)
            phase_mix(p.mix)
            if i and p.start_s < self.phases[i - 1].end_s:
                raise ValueError(f"phase[{i}].start_s is {p.start_s:g} but phase[{i - 1}] runs to "
                                 f"{self.phases[i - 1].end_s:g}: phases must be in time order, "
                                 "not overlapping")
        if any(b < a for a, b in zip(self.arrivals_s, self.arrivals_s[1:], strict=False)):
            raise ValueError("arrivals_s: must be non-decreasing")

    @property
    def mixes(self) -> tuple[str, ...]:
        """The distinct mixes, in order of first appearance."""
        return tuple(dict.fromkeys(p.mix for p in self.phases))


def _alternating(a: str, b: str, *, rates_hz: tuple[float | None, float | None] = (None, None),
                 phase_s: float = 300.0, cycles: int = 2) -> tuple[Phase, ...]:
    return tuple(Phase(start_s=phase_s * k, duration_s=phase_s, mix=(a, b)[k % 2], rate_hz=rates_hz[k % 2])
                 for k in range(2 * cycles))


#: the built-in shifts, each with why the best allocation differs between its phases
SHIFTS: Mapping[str, Shift] = {
    "output-length": Shift(
        name="output-length", model="image", signal="output_tokens_mean",
        # chat's rate is set, not screened: the screen prices the typical request's decode and
        # over-states chat's capacity (HAS's best carries 0.95 of 1.28 req/s on 120 s streams)
        phases=_alternating("llava-caption", "llava-chat", rates_hz=(None, 0.8)),
        why="captioning spends its GPU time encoding and prefilling 2-3k-token images and almost none "
            "decoding; chat adds 512-1024 output tokens, so Decode holds far more KV and steps"),
    "image-video": Shift(
        name="image-video", model="video", signal="mm_tokens_mean",
        # the video phase's rate is set from the screen's capacities (8 x RTX 6000 Ada, moderate
        # SLO, the typical request), not screened at load_frac: the image phase's best allocation
        # at 0.6 of its capacity (1.89 req/s) is E2x2 P0x2 D1x4, whose only Prefill is local, in
        # what the encoders leave: 1.612 * (1 - r / 1.252) req/s of videos, so it carries r <=
        # 0.705 req/s of video; the old video pick E2x1 P1x2 D1x4 (one TP-2 Prefill worker) carries
        # 0.840; the cluster's most, 1.123 (one TP-2 Decode worker at the TPOT limit). At 0.9 req/s
        # (0.8 of that most) neither carries the videos; only allocations with two Prefill workers
        # or three encoders' slack do (E2x1 P2x2 D1x2, E2x1 P1x4 D1x2, E2x2 P1x2 D1x2, E3x2 P0x2
        # D1x2). The reverse does not hold: those carry the images at 1.89 req/s by the screen
        # (their TP-2 Decode worker: 3.145), so whether the image phase measurably prefers local
        # Prefill is left to the cross-check.
        phases=_alternating("qwen-image", "qwen-video-rmm16", rates_hz=(None, 0.9)),
        why="1.2-2.7k-token images leave the encoder light enough to co-locate Prefill; 5,760-token "
            "16-frame videos fill the encoder GPU (s = 1) and load Prefill four times as much: at "
            "0.9 req/s the image phase's local-Prefill allocation (0.705 req/s of videos) cannot "
            "carry them"),
    "resolution": Shift(
        name="resolution", model="image", signal="mm_tokens_mean",
        # loads kept (6.5 / 2.2 req/s): by the screen (8 x RTX 6000 Ada, moderate SLO) no pair of
        # rates separates the phases' picks. One TP-2 encoder carries 17.9 req/s of either
        # resolution (Encode never binds: anyres needs no more encoders); Prefill and Decode bind,
        # and the same four allocations (E1x2 P1x2 D1x4/D2x2, E2x2 P0x2 D1x4/D2x2) carry the most
        # of both mixes (10.3 req/s of tiles, 2.81 of anyres), so the tile phase's pick carries
        # every anyres rate the cluster carries at all.
        phases=_alternating("llava-small", "llava-anyres", rates_hz=(6.5, 2.2)),
        why="a 576-token tile encodes and prefills in a fifth of a 2,928-token anyres grid's time, "
            "so at each phase's rate the balance between Encode, Prefill and Decode moves"),
}


def load_shift(path: str | Path) -> Shift:
    """A shift from a TOML file (module docstring); ``ValueError`` names the field."""
    data = read_toml(path, what="shift file")
    known = {"name", "model", "signal", "phase", "load_frac"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown shift field(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    raw = data.get("phase")
    if not isinstance(raw, list) or not raw:
        raise ValueError("phase: give [[phase]] tables (start_s, duration_s, mix, rate_hz)")
    phases = []
    for i, p in enumerate(raw):
        if not isinstance(p, Mapping) or not {"start_s", "duration_s", "mix"} <= set(p):
            raise ValueError(f"phase[{i}]: needs start_s, duration_s and mix")
        extra = sorted(set(p) - {"start_s", "duration_s", "mix", "rate_hz"})
        if extra:
            raise ValueError(f"phase[{i}]: unknown field(s) {', '.join(extra)}")
        phases.append(Phase(start_s=float(p["start_s"]), duration_s=float(p["duration_s"]), mix=str(p["mix"]),
                            rate_hz=None if p.get("rate_hz") is None else float(p["rate_hz"])))
    return Shift(name=str(data.get("name", Path(path).stem)), model=str(data.get("model", "image")),
                 signal=str(data.get("signal", "requests")), phases=tuple(phases),
                 load_frac=float(data.get("load_frac", 0.6)))


def stream(shift: Shift, rates_hz: Sequence[float], *, seed: int = 0) -> tuple[Request, ...]:
    """The shift's requests: Poisson at each phase's rate (``rates_hz``, one per phase) from its
    mix, numbered in arrival order; one generator per phase, seeded ``seed``, phase index. A
    shift with ``arrivals_s`` takes its phases' arrivals from them (the same content rule)."""
    out: list[Request] = []
    given = np.asarray(shift.arrivals_s, dtype=float)
    for i, (phase, rate) in enumerate(zip(shift.phases, rates_hz, strict=True)):
        times = given[(given >= phase.start_s) & (given < phase.end_s)] - phase.start_s
        n = len(times) if given.size else max(1, round(rate * phase.duration_s))
        if n == 0:
            continue
        spec = WorkloadSpec(mix=phase_mix(phase.mix), arrivals=GammaArrivals(rate_hz=rate, cv=1.0),
                            num_requests=n, mix_name=phase.mix)
        for k, r in enumerate(generate(spec, np.random.default_rng([seed, i]))):
            at = float(times[k]) if given.size else r.arrival_s
            if at < phase.duration_s:
                out.append(replace(r, request_id=len(out), arrival_s=phase.start_s + at))
    return tuple(out)


def phase_of(shift: Shift, arrival_s: np.ndarray) -> np.ndarray:
    """Each arrival's phase index (the last phase started by then)."""
    starts = np.array([p.start_s for p in shift.phases])
    return np.maximum(0, np.searchsorted(starts, arrival_s, side="right") - 1)


def describe(shift: Shift) -> dict[str, Any]:
    return {"name": shift.name, "model": shift.model, "signal": shift.signal, "why": shift.why,
            "phases": [{"start_s": p.start_s, "duration_s": p.duration_s, "mix": p.mix, "rate_hz": p.rate_hz}
                       for p in shift.phases]}
