"""sim: the SimPy model of an eight-GPU Encode/Prefill/Decode server.

The policies are easerve_core's objects; this package is the mechanism:
workers as SimPy processes (:mod:`sim.encode`, :mod:`sim.prefill`,
:mod:`sim.decode`, :mod:`sim.aggregated`), SM sharing (:mod:`sim.sharing`),
the interconnect (:mod:`sim.link`), and the entry point :func:`simulate`.
Baselines are named presets (:mod:`easerve_core.presets`). The model, its contention
and tie-break rules, and what it leaves out: docs/simulator.md.
Never imports torch, live or calibration: profiles are injected.
"""

from sim.engine import simulate
from sim.options import SimOptions
from sim.result import SimResult

__all__ = ["SimOptions", "SimResult", "simulate"]
