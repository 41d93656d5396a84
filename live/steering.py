"""The online controller in a live trial: the front end's observations in, fast knobs out.

:class:`LiveSteering` wraps an :class:`easerve_core.controller.Controller` for
:class:`live.trial.Trial`: it hears of every issued request and every settled
one (met the plan's SLO or not) and the number still open, and when the
controller decides, it turns the decision into the fast knobs the running
encode workers can take without moving weights
(:func:`easerve_core.policies.fast_knobs`: B, s, the batching mode and its
knobs, the rate hint). Re-roling a live worker (another allocation) is left
to the simulator (docs/controller.md); the decision's allocation is recorded,
not applied.
"""

from __future__ import annotations

from typing import Any

from easerve_core.controller import Controller, Decision
from easerve_core.deployment import Deployment
from easerve_core.policies import fast_knobs
from easerve_core.request import Record, Status
from easerve_core.slo import SLO, request_meets_slo


def _met(record: Record, slo: SLO | None) -> bool:
    return request_meets_slo(slo, ok=record.status == Status.OK.value, arrival_s=record.arrival_s,
                             first_token_s=record.first_token_s, finish_s=record.finish_s,
                             output_tokens=record.output_tokens)


class LiveSteering:
    """A live trial's controller (see the module docstring)."""

    def __init__(self, controller: Controller, deployment: Deployment, slo: SLO | None) -> None:
        self.controller = controller
        self.deployment = deployment
        self.slo = slo
        self.generation = 0
        self.log: list[dict[str, Any]] = []

    def arrived(self, now: float) -> None:
        self.controller.arrive(now)

    def update(self, now: float, settled: list[Record], num_open: int) -> Deployment | None:
        """Offer what settled; the fast-knob deployment to send when the controller decided."""
        for record in settled:
            self.controller.finish(now, met_slo=_met(record, self.slo))
        self.controller.queue(now, num_open)
        decision = self.controller.poll(now)
        return None if decision is None else self._apply(decision)

    def _apply(self, decision: Decision) -> Deployment:
        self.deployment = fast_knobs(self.deployment, decision.deployment)
        self.generation += 1
        self.log.append({"at_s": decision.at_s, "from_band": decision.from_band, "band": decision.band,
                         "reason": decision.reason, "rate_hz": decision.rate_hz,
                         "planned": decision.deployment.label(), "applied": self.deployment.label(),
                         "generation": self.generation})
        return self.deployment
