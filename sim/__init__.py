"""sim: the SimPy model of an eight-GPU Encode/Prefill/Decode server.

The policies are easerve_core's objects; this package is the mechanism:
workers as loops of SimPy events (:mod:`sim.worker`, :mod:`sim.encode`,
:mod:`sim.prefill`, :mod:`sim.decode`, :mod:`sim.aggregated`) on one
environment (:mod:`sim.clock`), SM sharing (:mod:`sim.sharing`),
the interconnect (:mod:`sim.link`), and the entry point :func:`simulate`,
which runs one :class:`easerve_core.plan.RunPlan`. Baselines are named
presets (:mod:`easerve_core.presets`). The model, its contention and
tie-break rules, and what it leaves out: docs/simulator.md.
Never imports torch, live or calibration: profiles are injected.

The options (:mod:`sim.options`, :mod:`sim.host_effects`) import without
SimPy, so the calibration loop and the live command can build them; the
engine (:func:`simulate`, :class:`SimResult`) loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.options import SimOptions

if TYPE_CHECKING:
    from sim.engine import simulate
    from sim.result import SimResult

__all__ = ["SimOptions", "SimResult", "simulate"]


def __getattr__(name: str) -> Any:
    if name == "simulate":
        from sim.engine import simulate

        return simulate
    if name == "SimResult":
        from sim.result import SimResult

        return SimResult
    raise AttributeError(f"module 'sim' has no attribute {name!r}")
