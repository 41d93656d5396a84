"""Workloads: arrival processes, request-size mixes, traces and specs.

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
from easerve_core.workload.mixes import MIXES, RequestMix, mix
from easerve_core.workload.spec import ARRIVALS, WorkloadSpec, generate
from easerve_core.workload.trace import read_trace, write_trace

__all__ = [
    "ARRIVALS",
    "MIXES",
    "ArrivalProcess",
    "GammaArrivals",
    "PoissonArrivals",
    "RateSchedule",
    "RateSegment",
    "RequestMix",
    "WorkloadSpec",
    "generate",
    "mix",
    "read_trace",
    "write_trace",
]
