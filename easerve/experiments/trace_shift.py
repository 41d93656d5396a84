"""A shift replayed from a public trace's rate (Azure, BurstGPT): its arrivals, scaled to the cluster.

docs/controller.md, "The trace-rate shift". The trace
(:func:`runtime.traces.load_trace`, ``azure`` or
``burstgpt``) gives the arrival times only; every request's content comes
from one mix (the shift is a change of rate, not of mix), as
:func:`easerve.experiments.shifts.stream` draws it. Its time is scaled
(:meth:`~easerve_core.workload.replay.TokenTrace.scaled`, the rescale a
``[workload]`` trace gets) so the trace's mean rate is ``load_frac`` of what
the screen says the best allocation carries for the mix
(:func:`~easerve.experiments.shape_control.screened_capacity_hz`): a trace
from a cluster of any size then loads ours as the other shifts do. The
scaled trace is cut into windows ``phase_s`` long (at most
``max_phases``); a window whose rate is at least the windows' mean is
"high", the others "low"; a run of windows of one class is one phase. HAS
plans each class at its windows' mean rate (the plan table's two bands);
the stream keeps the trace's own arrivals, bursts within a window
included.

No public trace is in the tree (BurstGPT's CSVs are Git LFS objects, Azure's
are not vendored), so the built-in trace-rate shift (``easerve controller-eval
--mix-shifts trace-rate``) replays :func:`synthetic_arrivals`: a seeded, bursty
stream of quiet and busy segments, the same every run. A real trace file takes
its place with ``--trace FILE`` (``--trace-load F`` sets ``load_frac``); the
Azure traces of 2023, fetched from their repository, are run in
docs/results/controller_trace_azure/.

Each class is planned on the gaps inside its windows after the replayed ones
(``Shift.plan_gaps_s``, replayed by
:class:`~easerve_core.workload.ReplayedGaps`), where they hold at least one of
its phases at its rate: a trace's bursts are what its deployment must carry.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from easerve.experiments.setup import Setup, with_gaps
from easerve.experiments.shifts import Phase, Shift
from easerve_core import checks
from easerve_core.workload.replay import TokenTrace
from runtime.traces import load_trace

#: the public traces' formats a trace-rate shift reads (docs/workloads.md, "Trace files")
FORMATS = ("azure", "burstgpt", "mooncake")

#: why the best allocation may differ between the trace's quiet and busy windows
WHY = ("one mix at two rates: the busy windows need the allocation with the most capacity, the "
       "quiet ones any that keeps the SLO; a rate change moves the optimum only where the best "
       "allocation at the low rate is not also the best at the high one (the rate shift of "
       "docs/controller.md found one deployment best at both)")


#: the built-in trace-rate shift's name (``--mix-shifts``)
TRACE_RATE = "trace-rate"
#: the fraction of the mix's screened capacity a trace's mean rate is scaled to (``--trace-load``)
TRACE_LOAD_FRAC = 0.6
#: a trace's shift is planned, class by class, on the trace's own gaps from the windows after the
#: ones it replays (``Shift.plan_gaps_s``), not on Poisson streams at the class's mean rate: a
#: bursty trace's bursts are what its deployment must carry (docs/controller.md, "The trace-rate
#: shift"). Shifts without such gaps (every built-in one) are planned as before.
TRACE_PLANNING = True
#: the built-in stream (:func:`synthetic_arrivals`): quiet and busy segments of ``SYNTHETIC_SEGMENT_S``
#: at these rates (req/s before scaling; only their ratio and the burstiness survive the rescale)
SYNTHETIC_RATES_HZ = (1.0, 3.0, 1.0, 3.0)
SYNTHETIC_SEGMENT_S = 300.0
#: the inter-arrival times' coefficient of variation: 1.5, burstier than Poisson (1.0)
SYNTHETIC_CV = 1.5
SYNTHETIC_SEED = 7


def synthetic_arrivals(rates_hz: Sequence[float] = SYNTHETIC_RATES_HZ, *,
                       segment_s: float = SYNTHETIC_SEGMENT_S, cv: float = SYNTHETIC_CV,
                       seed: int = SYNTHETIC_SEED) -> tuple[float, ...]:
    """Arrival times (s) of a Gamma renewal process with coefficient of variation ``cv``, at each
    rate of ``rates_hz`` for ``segment_s`` in turn; each segment's process starts at its start."""
    checks.positive("segment_s", segment_s)
    checks.positive("cv", cv)
    shape = 1.0 / cv ** 2
    rng = np.random.default_rng(seed)
    out: list[float] = []
    for i, rate in enumerate(rates_hz):
        checks.positive(f"rates_hz[{i}]", rate)
        t, end = i * segment_s, (i + 1) * segment_s
        while True:
            t += float(rng.gamma(shape, 1.0 / (rate * shape)))
            if t >= end:
                break
            out.append(t)
    return tuple(out)


def trace_arrivals(path: str | os.PathLike[str], trace_format: str) -> tuple[float, ...]:
    """The arrival times (s from the first row, sorted) of a public trace file."""
    checks.one_of("trace_format", trace_format, list(FORMATS))
    trace = load_trace(path, trace_format)
    assert isinstance(trace, TokenTrace)  # every format of FORMATS reads as one
    return trace.arrival_s


def trace_shift(arrival_s: Sequence[float], *, capacity_hz: float, name: str = TRACE_RATE,
                model: str = "image", mix: str = "llava-image", load_frac: float = TRACE_LOAD_FRAC,
                phase_s: float = 300.0, max_phases: int = 6) -> Shift:
    """The shift of ``trace``'s arrivals (module docstring), signal ``requests``.

    ``arrival_s``: the trace's arrivals (:func:`trace_arrivals`); ``capacity_hz``: the screened
    capacity of ``mix`` on the cluster (the caller's, so this stays free of the setup).
    ``ValueError`` names the field when the scaled trace fills less than one window.
    """
    checks.positive("capacity_hz", capacity_hz)
    checks.fraction("load_frac", load_frac)
    checks.positive("phase_s", phase_s)
    checks.positive("max_phases", max_phases)
    raw = np.sort(np.asarray(arrival_s, dtype=float))
    if raw.size < 2 or raw[-1] <= raw[0]:
        raise ValueError("trace: needs at least two distinct arrival times")
    raw -= raw[0]
    mean_rate_hz = (raw.size - 1) / raw[-1]  # the rescale rule of easerve_core.workload.replay
    arrivals = raw * (mean_rate_hz / (load_frac * capacity_hz))
    num = min(max_phases, int(arrivals[-1] // phase_s))
    if num < 1:
        raise ValueError(f"trace: scaled to {load_frac * capacity_hz:.2f} req/s it spans "
                         f"{arrivals[-1]:.0f} s, less than one phase_s ({phase_s:g} s)")
    counts = np.histogram(arrivals, bins=num, range=(0.0, num * phase_s))[0]
    rates = counts / phase_s
    high = rates >= rates.mean()
    level = {h: round(float(rates[high == h].mean()), 2) for h in (False, True) if (high == h).any()}
    phases: list[Phase] = []
    for k in range(num):
        if phases and high[k] == high[k - 1]:
            last = phases[-1]
            phases[-1] = Phase(start_s=last.start_s, duration_s=last.duration_s + phase_s, mix=mix,
                               rate_hz=last.rate_hz)
        else:
            phases.append(Phase(start_s=k * phase_s, duration_s=phase_s, mix=mix,
                                rate_hz=max(level[bool(high[k])], 0.01)))
    kept = arrivals[arrivals < num * phase_s]
    later = _later_gaps(arrivals, num * phase_s, phase_s, float(rates.mean()))
    # a class is planned on its later gaps when they hold one of its phases at its rate, so a
    # cross-check stream (one phase long) repeats no stretch of the recording (from a late start
    # it wraps to the first gap: one more seam, like those between the class's windows)
    plan_gaps = tuple((max(level[h], 0.01), gaps) for h, gaps in sorted(later.items())
                      if h in level and len(gaps) >= level[h] * phase_s)
    return Shift(name=name, model=model, signal="requests", phases=tuple(phases), load_frac=load_frac,
                 why=WHY, arrivals_s=tuple(float(t) for t in kept), plan_gaps_s=plan_gaps)


def _later_gaps(arrivals: np.ndarray, start_s: float, phase_s: float,
                threshold_hz: float) -> dict[bool, tuple[float, ...]]:
    """The gaps inside each whole window of ``phase_s`` after ``start_s``, by class (busy: the
    window's rate at least ``threshold_hz``, the run's windows' mean): the part of the trace the
    run does not replay, to plan on."""
    rest = arrivals[arrivals >= start_s] - start_s
    found: dict[bool, list[float]] = {False: [], True: []}
    for k in range(int(rest[-1] // phase_s) if rest.size else 0):
        window = rest[(rest >= k * phase_s) & (rest < (k + 1) * phase_s)]
        if window.size >= 2:
            found[window.size / phase_s >= threshold_hz].extend(np.diff(window).tolist())
    return {busy: tuple(gaps) for busy, gaps in found.items() if len(gaps) >= 2}


def plan_setups(shift: Shift, setups: Mapping[str, Setup], kinds: Sequence[tuple[str, float]],
                trace_planning: bool = TRACE_PLANNING) -> dict[tuple[str, float], Setup]:
    """Each phase kind's setup to plan on: its mix's, with the arrivals of a trace's later windows
    of its class where the shift holds them (``Shift.plan_gaps_s``) and ``trace_planning`` says so."""
    gaps = dict(shift.plan_gaps_s) if trace_planning else {}
    return {(m, r): with_gaps(setups[m], gaps[r], r) if r in gaps else setups[m] for m, r in kinds}
