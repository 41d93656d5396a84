"""Partitioner contract: every mode grants shares in (0, 1] through one interface."""

from __future__ import annotations

import threading

import pytest
import torch

from easerve_core.sm_share import SMShareTable
from live.partition import (
    PARTITIONERS,
    CpuThreadBackend,
    DynamicPartitioner,
    make_partitioner,
)

TABLE = SMShareTable({1: 0.25, 4: 0.5, 8: 1.0})


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []

    def apply(self, role: str, share: float) -> None:
        self.calls.append((role, share))


@pytest.mark.parametrize("mode", sorted(PARTITIONERS))
def test_contract_shares_are_fractions_and_applied(mode):
    part = make_partitioner(mode, total_threads=4, table=TABLE)
    assert part.name == mode
    for size in (1, 3, 8, 20):
        with part.encode_slot(size) as enc:
            assert 0.0 < enc <= 1.0
            with part.prefill_slot() as pre:
                assert 0.0 < pre <= 1.0
                if mode in ("static", "dynamic") and enc < 1.0:
                    assert enc + pre == pytest.approx(1.0)
    with pytest.raises(ValueError, match="batch_size"), part.encode_slot(0):
        pass


def test_dynamic_follows_the_table_and_gives_prefill_the_rest():
    backend = Recorder()
    part = DynamicPartitioner(backend, table=TABLE)
    with part.prefill_slot() as idle_share:
        assert idle_share == 1.0  # encode idle: prefill gets everything
    with part.encode_slot(3) as share:
        assert share == 0.5  # next larger profiled size
        with part.prefill_slot() as pre:
            assert pre == 0.5
    assert backend.calls == [("prefill", 1.0), ("encode", 0.5), ("prefill", 0.5)]


def test_static_split_and_validation():
    part = make_partitioner("static", static_share=0.75, total_threads=4)
    with part.encode_slot(1) as enc, part.prefill_slot() as pre:
        assert (enc, pre) == (0.75, 0.25)
    with pytest.raises(ValueError, match="encode_share"):
        make_partitioner("static", static_share=1.0)


def test_cpu_backend_sets_threads_of_the_calling_thread_only():
    backend = CpuThreadBackend(4)
    assert [backend.threads_for(s) for s in (0.1, 0.25, 0.5, 1.0)] == [1, 1, 2, 4]
    seen = {}

    def worker() -> None:
        backend.apply("encode", 0.25)
        seen["inner"] = torch.get_num_threads()

    before = torch.get_num_threads()
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["inner"] == 1
    assert torch.get_num_threads() == before


def test_unknown_and_unbuilt_backends_fail_loudly():
    with pytest.raises(ValueError, match="known: "):
        make_partitioner("round-robin")
    with pytest.raises(ValueError, match="known: "):
        make_partitioner("static", backend="mps")
    with pytest.raises(ValueError, match="green-context"):
        make_partitioner("dynamic", backend="green-context")
