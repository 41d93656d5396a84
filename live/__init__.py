"""The live executor: real `transformers` models split into Encode, Prefill and Decode workers.

``run_trial(plan)`` runs one resolved plan (easerve_core.plan) on worker processes and
returns the same :class:`~easerve_core.result.RunResult` as the simulator;
``easerve live CONFIG.toml --out DIR`` is its command line. See docs/live.md.
Never imports simpy.

The options (:mod:`live.options`) and the placement check (:mod:`live.placement`)
import without torch, so a command can refuse a bad deployment before the
seconds torch and transformers take to load; :func:`run_trial` and
:class:`Trial` load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from live.trial import Trial, run_trial

__all__ = ["Trial", "run_trial"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from live import trial

        return getattr(trial, name)
    raise AttributeError(f"module 'live' has no attribute {name!r}")
