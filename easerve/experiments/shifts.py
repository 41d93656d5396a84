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

The module stays a little past 300 lines because the built-in shifts, their mixes and the
notes on why each phase's best allocation differs are one table a reader checks together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from calibration.specs import model_spec
from easerve.experiments.paper import MODALITIES
from easerve_core import Request, checks
from easerve_core.controller import SIGNALS
from easerve_core.request import check_modality
from easerve_core.settings import refuse_unknown
from easerve_core.workload import GammaArrivals, RequestMix, WorkloadSpec, generate
from easerve_core.workload.mixes import MIXES
from runtime.files import read_toml

_LLAVA = MIXES["llava-image"]
#: the phases' mixes beyond the named presets (docs/workloads.md has the token counts)
PHASE_MIXES: Mapping[str, RequestMix] = {
    # captioning: a short prompt and a one-line caption (encode- and prefill-bound)
    "llava-caption": replace(_LLAVA, prompt_tokens=(16, 64), output_tokens=(16, 48)),
    # chat about an image with long answers (decode-bound)
    "llava-chat": replace(_LLAVA, output_tokens=(512, 1024)),
    # one 336x336 tile, no anyres grid (LLaVA-v1.6's base resolution: 576 LM tokens)
    "llava-small": _LLAVA.with_items((576,)),
    # anyres with the full 2x2 grid plus the base tile (672x672: 2,928 LM tokens)
    "llava-anyres": _LLAVA.with_items((2928,)),
    # resolution with the answers each size is asked for: long chat about a small image
    # (decode-bound) and a short answer read off an anyres 4-tile grid (encode- and prefill-bound)
    "llava-small-chat": replace(_LLAVA.with_items((576,)), output_tokens=(512, 1024)),
    "llava-anyres-short": replace(_LLAVA.with_items((2928,)), prompt_tokens=(16, 64),
                                  output_tokens=(16, 48)),
    # Qwen2.5-VL: chat about an image (long answers, decode-bound), then 16-frame clips captioned
    # in a line (encode- and prefill-bound)
    "qwen-image-chat": replace(MIXES["qwen-image"], output_tokens=(512, 1024)),
    "qwen-video-caption": replace(MIXES["qwen-video-rmm16"], prompt_tokens=(16, 64), output_tokens=(16, 48)),
}


def phase_mix(name: str, field: str = "mix") -> RequestMix:
    """The mix ``name`` (:data:`PHASE_MIXES` or a preset); unknown: a ``ValueError`` naming ``field``."""
    if name in PHASE_MIXES:
        return PHASE_MIXES[name]
    checks.one_of(field, name, [*PHASE_MIXES, *MIXES])
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
    #: for a trace's shift, each class's phase rate with the gaps between arrivals inside the
    #: trace's later windows of that class (:mod:`easerve.experiments.trace_shift`), which HAS
    #: and the cross-check plan that class on (:class:`~easerve_core.workload.ReplayedGaps`).
    #: Empty: Poisson streams at each phase's rate.
    plan_gaps_s: tuple[tuple[float, tuple[float, ...]], ...] = ()

    def __post_init__(self) -> None:
        checks.one_of("model", self.model, list(MODALITIES))
        checks.one_of("signal", self.signal, list(SIGNALS))
        checks.fraction("load_frac", self.load_frac)
        if not self.phases:
            raise ValueError("phase: a shift needs at least one phase")
        model = MODALITIES[self.model][0]
        takes = model_spec(model).modalities
        for i, p in enumerate(self.phases):
            checks.non_negative(f"phase[{i}].start_s", p.start_s)
            checks.positive(f"phase[{i}].duration_s", p.duration_s)
            if p.rate_hz is not None:
                checks.positive(f"phase[{i}].rate_hz", p.rate_hz)
            check_modality(phase_mix(p.mix, f"phase[{i}].mix").modality, takes, model=model,
                           field_name=f"phase[{i}].mix")
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


#: Loads of the shifts whose phases' bottleneck stages differ (image-video, resolution), set from
#: the simulator, not from the results: each phase's mix runs on the screen's best allocations for
#: either phase (``bench/mix_capacity.py``'s ``ALLOCATIONS``: B 8, s 0 where all Prefill is local,
#: else 0.5, or 1 where the encoders cannot hold the LM; one Poisson stream, seed 2000; moderate
#: SLO of the mix; 8 x RTX 6000 Ada), and a mix's capacity is the highest rate (bisected to 1%) at
#: which its best allocation keeps >= 90% of the requests within the SLO. Each phase then runs at
#: :data:`SIM_LOAD_FRAC` of it. The streams are 3,600 s long: the first constants were read off
#: 300 s streams, on which long chats had not yet filled the decoder, and over-stated tile chat's
#: capacity by 44% (5.906 req/s against 4.094; at the 4.76 req/s it set, the tile pick kept 0.58
#: of a 1,200 s stream within the SLO, and none after 900 s). Doubling the stream to 7,200 s moves
#: no capacity by more than 1.5% (the bench's table; docs/controller.md, "The shifts"). That the
#: best allocation moves at these rates: the screen's carriers of one phase never carry the other
#: (``tests/experiments/test_mix_shifts.py``), and the cross-check scores each pick on both.
SIM_CAPACITY_HZ: Mapping[str, float] = {
    "qwen-image-chat": 2.703,  # E2x2 P0x2 D1x4 s0 (E2x1 P1x2 D1x4 s1: 2.594); 300 s streams: 2.906
    "qwen-video-caption": 1.367,  # E3x2 P0x2 D1x2 s0 (E2x1 P2x2 D1x2 s1: 1.273); 300 s: 1.539
    "llava-small-chat": 4.094,  # E2x2 P0x2 D1x4 s0 and E1x2 P1x2 D1x4 s0.5; 300 s: 5.906
    "llava-anyres-short": 3.625,  # E3x2 P0x2 D1x2 s0 (E1x2 P2x2 D1x2 s0.5: 2.188); 300 s: 3.938
}
#: the fraction of :data:`SIM_CAPACITY_HZ` each such phase runs at
SIM_LOAD_FRAC = 0.85


def _at_load(a: str, b: str) -> tuple[Phase, ...]:
    """Mixes ``a`` and ``b`` alternating, each at :data:`SIM_LOAD_FRAC` of its :data:`SIM_CAPACITY_HZ`."""
    return _alternating(a, b, rates_hz=(round(SIM_LOAD_FRAC * SIM_CAPACITY_HZ[a], 2),
                                        round(SIM_LOAD_FRAC * SIM_CAPACITY_HZ[b], 2)))


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
        phases=_at_load("qwen-image-chat", "qwen-video-caption"),
        why="chat about images is decode-bound: it wants one TP-4 decoder (the screen's best, E2x1 "
            "P1x2 D1x4, carries 2.59 req/s; any allocation with one TP-2 decoder at most 1.30, 0.65 "
            "with three TP-2 stages before it); one-line captions of 5,760-token 16-frame clips are "
            "encode- and prefill-bound: they want that TP-4 decoder's GPUs as Prefill or encoders "
            "(E2x1 P2x2 D1x2: 1.25 req/s; the chat picks 0.88 at most)"),
    "resolution": Shift(
        name="resolution", model="image", signal="mm_tokens_mean",
        phases=_at_load("llava-small-chat", "llava-anyres-short"),
        why="long chat about a 576-token tile is decode-bound (one TP-4 decoder: 3.98 req/s by the "
            "screen; one TP-2 decoder 0.98); a short answer read off a 2,928-token anyres grid is "
            "prefill-bound (E3x2 P0x2 D1x2 or E1x2 P2x2 D1x2: 4.26 req/s; the tile pick's "
            "allocations 2.84 at most)"),
}

#: the first image-video and resolution shifts (docs/controller.md: on 8 x RTX 6000 Ada one
#: allocation carries both of each one's phases, so the cross-check keeps one deployment and the
#: controller never moves); ``easerve controller-eval --mix-shifts image-video-0.9,resolution-tiles``
EARLIER_SHIFTS: Mapping[str, Shift] = {
    "image-video-0.9": Shift(
        name="image-video-0.9", model="video", signal="mm_tokens_mean",
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
    "resolution-tiles": Shift(
        name="resolution-tiles", model="image", signal="mm_tokens_mean",
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

#: every shift ``--mix-shifts`` knows by name
KNOWN_SHIFTS: Mapping[str, Shift] = {**SHIFTS, **EARLIER_SHIFTS}


def at_rate_scale(shift: Shift, scale: float) -> Shift:
    """``shift`` with every phase's rate ``scale`` times as high (2 decimals), and ``load_frac``
    with it for phases whose rate comes from the screen: a what-if on load (``easerve
    controller-eval --rate-scale``). A shift replayed from a trace keeps its trace's arrivals, so
    scaling it is a ``ValueError``."""
    checks.positive("rate_scale", scale)
    if shift.arrivals_s:
        raise ValueError(f"rate_scale: shift {shift.name!r} replays a trace's arrivals, which set its "
                         "rates; leave it out, or scale the trace")
    phases = tuple(replace(p, rate_hz=None if p.rate_hz is None else round(p.rate_hz * scale, 2))
                   for p in shift.phases)
    return replace(shift, phases=phases, load_frac=shift.load_frac * scale)


def load_shift(path: str | Path) -> Shift:
    """A shift from a TOML file (module docstring); ``ValueError`` names the field."""
    data = read_toml(path, what="shift file")
    refuse_unknown(data, sorted({"name", "model", "signal", "phase", "load_frac"}), "shift")
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
        at = f"phase[{i}]"
        rate = None if p.get("rate_hz") is None else _field(p, "rate_hz", at, number=True)
        phases.append(Phase(start_s=_field(p, "start_s", at, number=True), mix=_field(p, "mix", at),
                            duration_s=_field(p, "duration_s", at, number=True), rate_hz=rate))
    top = {"name": Path(path).stem, "model": "image", "signal": "requests", "load_frac": 0.6, **data}
    return Shift(name=_field(top, "name"), model=_field(top, "model"), signal=_field(top, "signal"),
                 phases=tuple(phases), load_frac=_field(top, "load_frac", number=True))


def _field(table: Mapping[str, Any], key: str, where: str = "", *, number: bool = False) -> Any:
    """``table[key]``, a number or a name; anything else is a ``ValueError`` naming the field."""
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float) if number else str):
        raise ValueError(f"{where + '.' if where else ''}{key} must be {'a number' if number else 'a name'}, "
                         f"got {value!r}")
    return float(value) if number else value


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
