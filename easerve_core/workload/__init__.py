"""Workloads: arrival processes and shapes, request-size mixes, traces and specs.

Everything random draws from an injected ``numpy.random.Generator``; the
same seed gives the same requests. Files are read and written by
``runtime.traces``. See docs/workloads.md.
"""

from easerve_core.workload.arrivals import (
    ArrivalProcess,
    GammaArrivals,
    PoissonArrivals,
    RateSchedule,
    RateSegment,
    ReplayedGaps,
)
from easerve_core.workload.mixes import MIXES, RequestMix, mix
from easerve_core.workload.replay import DEFAULT_TRACE_FORMAT, RecordedTrace, TokenTrace, Trace, TraceReader
from easerve_core.workload.shapes import (
    SHAPES,
    DriftArrivals,
    SineArrivals,
    SpikeArrivals,
    StepArrivals,
)
from easerve_core.workload.sizes import AudioClip, ImageSize, RawSizes, VideoClip
from easerve_core.workload.spec import ARRIVALS, WorkloadSpec, generate
from easerve_core.workload.trace import format_trace, parse_trace

__all__ = [
    "ARRIVALS",
    "DEFAULT_TRACE_FORMAT",
    "MIXES",
    "SHAPES",
    "ArrivalProcess",
    "AudioClip",
    "DriftArrivals",
    "GammaArrivals",
    "ImageSize",
    "PoissonArrivals",
    "RateSchedule",
    "RateSegment",
    "RawSizes",
    "RecordedTrace",
    "ReplayedGaps",
    "RequestMix",
    "SineArrivals",
    "SpikeArrivals",
    "StepArrivals",
    "TokenTrace",
    "Trace",
    "TraceReader",
    "VideoClip",
    "WorkloadSpec",
    "format_trace",
    "generate",
    "mix",
    "parse_trace",
]
