"""The two named Prefill/Decode worker choices (easerve_core.worker_choice)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import cycle

import pytest

from easerve_core.worker_choice import ENGINE_WORKER_CHOICE, RoundRobin, WorkerChoice, least_loaded


@dataclass
class W:
    index: int
    load_tokens: int


def test_least_loaded_takes_the_fewest_tokens_and_the_lowest_index_on_a_tie():
    workers = [W(0, 5), W(1, 3), W(2, 3)]
    assert least_loaded(workers) is workers[1]
    assert least_loaded([W(0, 0), W(1, 0)]).index == 0


@pytest.mark.parametrize("n", [0, 1, 3])
def test_round_robin_turns_as_a_cycle_and_skips_the_dead(n):
    dead = {1}
    rr, turn = RoundRobin(n), cycle(range(n))

    def old() -> int | None:  # the live front end's former loop over itertools.cycle
        for _ in range(n):
            index = next(turn)
            if index not in dead:
                return index
        return None

    got = [rr.pick(lambda i: i not in dead) for _ in range(7)]
    assert got == [old() for _ in range(7)]
    assert RoundRobin(2).pick(lambda i: False) is None


def test_each_engine_names_its_choice():
    assert ENGINE_WORKER_CHOICE == {"sim": WorkerChoice.LEAST_LOADED_AT_HANDOFF,
                                    "live": WorkerChoice.ROUND_ROBIN_AT_ISSUE}
