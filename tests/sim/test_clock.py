"""The simulator's clock: ``run_all`` (SimPy's ``step()`` inlined) matches SimPy's own ``run()``.

``sim.clock`` reads SimPy's internals in one place, its fast loop; these
exact-trace tests fail if a SimPy release changes what that loop relies on.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest
import simpy

from sim.clock import SimEnvironment


def _scenario(env: SimEnvironment, log: list[tuple[str, float]]) -> None:
    """Calls, timeouts, a process and an urgent call, several due at the same instants."""

    def note(name: str) -> Callable[[Any], None]:
        return lambda _event: log.append((name, env.now))

    def proc() -> Generator[simpy.Event, Any, None]:
        log.append(("proc start", env.now))
        yield env.timeout(1.0)
        log.append(("proc after 1", env.now))
        env.call_later(0.0, note("call from proc"))
        env.call_first(note("urgent from proc"))
        yield env.timeout(0.5)
        log.append(("proc after 1.5", env.now))

    env.call_later(1.0, note("call at 1"))
    env.process(proc())
    env.timeout(1.0).callbacks.append(note("timeout at 1"))
    env.call_later(0.0, note("call at 0"))
    env.call_first(note("urgent at 0"))
    env.call_later(1.5, note("call at 1.5"))


def _trace(loop: Callable[[SimEnvironment], None]) -> tuple[list[tuple[str, float]], int]:
    env, log = SimEnvironment(), []
    _scenario(env, log)
    loop(env)
    return log, env.num_events


def test_run_all_processes_the_events_of_run_in_the_same_order_and_count() -> None:
    fast = _trace(SimEnvironment.run_all)
    assert fast == _trace(lambda env: env.run())
    # urgent first in the order scheduled (the process's start was scheduled before the call)
    assert fast == ([("proc start", 0.0), ("urgent at 0", 0.0), ("call at 0", 0.0),
                     ("call at 1", 1.0), ("timeout at 1", 1.0), ("proc after 1", 1.0),
                     ("urgent from proc", 1.0), ("call from proc", 1.0),
                     ("call at 1.5", 1.5), ("proc after 1.5", 1.5)], 12)


def test_claim_now_only_when_nothing_else_is_due_now() -> None:
    env = SimEnvironment()
    assert env.claim_now() and env.num_events == 1  # empty schedule
    env.call_later(0.0, lambda _call: None)
    assert not env.claim_now() and env.num_events == 1
    env.run_all()
    env.call_later(1.0, lambda _call: None)
    assert env.claim_now()


@pytest.mark.parametrize("fast", [True, False])
def test_an_unhandled_failure_crashes_both_loops_alike(fast: bool) -> None:
    env = SimEnvironment()
    env.event().fail(KeyError("boom"))
    with pytest.raises(KeyError, match="boom") as info:
        env.run_all() if fast else env.run()
    assert isinstance(info.value.__cause__, KeyError)
