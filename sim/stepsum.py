"""Decode time between batch changes without one event per token.

Between two changes (a join or a leave) a decode batch of ``n`` sequences
runs steps whose summed context grows by ``n`` per step, so step ``j`` takes
``f(n, C + j * n)`` with ``f = profile.decode_step_s``. :class:`StepClock`
sums ``k`` such steps and answers the inverse question (how many steps fit
in an elapsed time) so the simulator advances a batch to its next change in
one timeout.

When ``f`` is affine in the context over the span, which the roofline model
is (a maximum of affine terms is convex, so four probes on one line prove
the whole span is on it), the sum is closed form: ``k f0 + (f1 - f0) k(k-1)/2``.
Otherwise it is a loop over numbers (no events), of length ``k``.
"""

from __future__ import annotations

from easerve_core.profile import StageProfile

#: relative distance from the line under which four probes count as affine
AFFINE_REL_TOL = 1e-9


class StepClock:
    """Sums of consecutive decode-step latencies for one worker's profile."""

    def __init__(self, profile: StageProfile) -> None:
        self._f = profile.decode_step_s
        # The last line proved: (n, ctx, steps it holds for, f0, slope). A segment asks
        # about one (n, ctx) several times (plan, then cut), and a line proved over k
        # steps holds over any fewer.
        self._line: tuple[int, int, int, float, float] = (0, -1, 0, 0.0, 0.0)

    def _affine(self, n: int, ctx: int, k: int) -> tuple[float, float] | None:
        ln, lctx, lk, lf0, lslope = self._line
        if ln == n and lctx == ctx and k <= lk:
            return lf0, lslope
        line = self._probe(n, ctx, k)
        if line is not None:
            self._line = (n, ctx, k, line[0], line[1])
        return line

    def _probe(self, n: int, ctx: int, k: int) -> tuple[float, float] | None:
        f = self._f
        f0 = f(n, ctx)
        if k <= 2:
            return (f0, (f(n, ctx + n) - f0) if k == 2 else 0.0)
        slope = f(n, ctx + n) - f0
        for j in (k - 1, (k - 1) // 2):
            fj = f(n, ctx + j * n)
            if abs(fj - (f0 + j * slope)) > AFFINE_REL_TOL * max(abs(fj), 1e-300):
                return None
        return f0, slope

    def span_s(self, n: int, ctx: int, k: int) -> float:
        """Seconds for ``k`` steps of ``n`` sequences starting at summed context ``ctx``."""
        if k <= 0:
            return 0.0
        line = self._affine(n, ctx, k)
        if line is not None:
            f0, slope = line
            return k * f0 + slope * (k * (k - 1) / 2)
        f = self._f
        return sum(f(n, ctx + j * n) for j in range(k))

    def steps_to_reach(self, n: int, ctx: int, k: int, elapsed_s: float) -> int:
        """The fewest steps (1..k) whose span reaches ``elapsed_s``: the next step boundary."""
        line = self._affine(n, ctx, k)
        if line is None:
            f, total, j = self._f, 0.0, 0
            while j < k:
                total += f(n, ctx + j * n)
                j += 1
                if total >= elapsed_s:
                    break
            return j
        f0, slope = line
        lo, hi = 1, k
        while lo < hi:
            mid = (lo + hi) // 2
            if mid * f0 + slope * (mid * (mid - 1) / 2) >= elapsed_s:
                hi = mid
            else:
                lo = mid + 1
        return lo
