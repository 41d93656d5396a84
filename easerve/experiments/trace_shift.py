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
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

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


def trace_arrivals(path: str | os.PathLike[str], trace_format: str) -> tuple[float, ...]:
    """The arrival times (s from the first row, sorted) of a public trace file."""
    checks.one_of("trace_format", trace_format, list(FORMATS))
    trace = load_trace(path, trace_format)
    assert isinstance(trace, TokenTrace)  # every format of FORMATS reads as one
    return trace.arrival_s


def trace_shift(arrival_s: Sequence[float], *, capacity_hz: float, name: str = "trace-rate",
                model: str = "image", mix: str = "llava-image", load_frac: float = 0.6,
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
    return Shift(name=name, model=model, signal="requests", phases=tuple(phases), load_frac=load_frac,
                 why=WHY, arrivals_s=tuple(float(t) for t in kept))
