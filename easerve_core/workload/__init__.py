"""Workloads: arrival processes and shapes, request-size mixes, traces and specs.

Everything random draws from an injected ``numpy.random.Generator``; the
same seed gives the same requests. See docs/workloads.md.
"""

from easerve_core.workload.arrivals import (
    ArrivalProcess,
    GammaArrivals,
    PoissonArrivals,
    RateSchedule,
    RateSegment,
)
from easerve_core.workload.formats import TRACE_FORMATS, load_trace
from easerve_core.workload.mixes import MIXES, RequestMix, mix
from easerve_core.workload.replay import RecordedTrace, TokenTrace, Trace
from easerve_core.workload.shapes import (
    SHAPES,
    DriftArrivals,
    SineArrivals,
    SpikeArrivals,
    StepArrivals,
)
from easerve_core.workload.sizes import AudioClip, ImageSize, RawSizes, VideoClip
from easerve_core.workload.spec import ARRIVALS, WorkloadSpec, generate
from easerve_core.workload.trace import read_trace, write_trace

__all__ = [
    "ARRIVALS",
    "MIXES",
    "SHAPES",
    "TRACE_FORMATS",
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
    "RequestMix",
    "SineArrivals",
    "SpikeArrivals",
    "StepArrivals",
    "TokenTrace",
    "Trace",
    "VideoClip",
    "WorkloadSpec",
    "generate",
    "load_trace",
    "mix",
    "read_trace",
    "write_trace",
]
