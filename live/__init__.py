"""The live executor: real `transformers` models split into Encode, Prefill and Decode workers.

``run_trial(plan)`` runs one resolved plan (easerve_core.plan) on worker processes and
returns the same :class:`~easerve_core.result.RunResult` as the simulator;
``easerve live CONFIG.toml --out DIR`` is its command line. See docs/live.md.
Never imports simpy.
"""

from live.trial import Trial, run_trial

__all__ = ["Trial", "run_trial"]
