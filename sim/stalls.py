"""One-off worker stalls: a pause every worker process pays once, at a seeded batch number (opt-in).

The live CPU executor's stage logs show every worker process pausing once,
for about a quarter of a second, at a nearly fixed point in its life: a
Decode worker before its ~53rd step, a Prefill worker at its ~34th batch, an
encode worker at its ~32nd-57th batch (encode and local Prefill counted
together). A full ``gc.collect()`` in a process holding the model takes
0.18 s on this host; the pause is the interpreter's first full garbage
collection after start (docs/calibration.md, "Stalls"). No stage model
predicts it and it sets the P99 of TTFT and TPOT of a short run.

The model (``[sim.host] stall_s`` and the per-stage ranges of :class:`HostEffects`):
each worker draws, at build time, the batch number ``k`` its pause hits,
uniformly from its stage's ``[min, max]``, with a generator derived from the
run's seed (one stream for the stall model, draws in build order: encode
workers, Prefill, Decode), so the same seed gives the same records. With a
stage's ``stall_<stage>_frac`` below 1 each of its workers first draws whether
it pauses at all (on some hosts only some processes' first full collection is
long enough to see: docs/calibration.md); at 1 (default) there is no such draw. The
pause adds ``stall_s`` seconds of work to batch ``k`` (to the head of the
decode segment that starts at step ``k``); under the host model it drains at
the host's factor like any other work (it is CPU work: a collector walking
the heap). Off (``stall_s = 0``) no :class:`Stall` exists and no worker pays
anything.
"""

from __future__ import annotations

import numpy as np

from sim.host_effects import HostEffects

#: second entropy word of the stall model's generator (keeps its stream apart from the routers')
STALL_STREAM = 0x57A11


class Stall:
    """One worker's one-off pause: hits its batch (or step) number ``at``, then never again."""

    __slots__ = ("at", "count", "stall_s")

    def __init__(self, at: int, stall_s: float) -> None:
        if at < 0:
            raise ValueError(f"at must be >= 0, got {at!r}")
        if not stall_s > 0:
            raise ValueError(f"stall_s must be > 0, got {stall_s!r}")
        self.at = at
        self.stall_s = stall_s
        self.count = 0

    def next_batch_s(self) -> float:
        """Extra seconds of the batch about to start (counts it)."""
        n = self.count
        self.count = n + 1
        return self.stall_s if n == self.at else 0.0


class StallPlan:
    """Draws each worker's :class:`Stall` from the options' ranges with the run's seed."""

    def __init__(self, options: HostEffects, seed: int) -> None:
        self.options = options
        self._rng = np.random.default_rng([int(seed), STALL_STREAM])

    def draw(self, stage: str) -> Stall | None:
        """The next worker's stall, None if it does not pause; ``stage``: encode, prefill or decode."""
        unit = "steps" if stage == "decode" else "batches"
        frac = float(getattr(self.options, f"stall_{stage}_frac"))
        if frac < 1.0 and not self._rng.random() < frac:
            return None
        low = int(getattr(self.options, f"stall_{stage}_{unit}_min"))
        high = int(getattr(self.options, f"stall_{stage}_{unit}_max"))
        return Stall(int(self._rng.integers(low, high + 1)), self.options.stall_s)


def make_stall_plan(options: HostEffects, seed: int) -> StallPlan | None:
    """The run's stall plan, or None when ``stall_s`` is 0 (off)."""
    return StallPlan(options, seed) if options.stall_s > 0 else None
