"""FanIn: one queue per writer, so a writer killed mid-put cannot block the others."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import time

import pytest

from live.fanin import FanIn


def _flood(fan: FanIn, me: tuple[str, int], count: int) -> None:
    for i in range(count):
        fan.put(me, (me, i))
    time.sleep(30)  # stay alive (holding nothing) until killed or terminated


def test_items_from_every_writer_arrive_round_robin():
    ctx = mp.get_context("spawn")
    fan = FanIn(ctx, [("a", 0), ("b", 0)])
    try:
        for i in range(3):
            fan.put(("a", 0), ("a", i))
            fan.put(("b", 0), ("b", i))
        got = [fan.get(timeout=2.0) for _ in range(6)]
        assert sorted(got) == sorted([("a", i) for i in range(3)] + [("b", i) for i in range(3)])
        with pytest.raises(queue.Empty):
            fan.get(timeout=0.05)
    finally:
        fan.close()


def test_a_killed_writer_does_not_block_the_others():
    ctx = mp.get_context("spawn")
    victim, survivor = ("decode", 1), ("decode", 0)
    fan = FanIn(ctx, [victim, survivor])
    procs = {w: ctx.Process(target=_flood, args=(fan, w, 2000), daemon=True) for w in (victim, survivor)}
    try:
        procs[victim].start()
        time.sleep(0.3)  # the victim is mid-stream: its feeder thread holds its own queue's lock
        os.kill(procs[victim].pid, signal.SIGKILL)
        procs[victim].join()
        procs[survivor].start()
        seen = 0
        deadline = time.monotonic() + 20.0
        while seen < 2000 and time.monotonic() < deadline:
            try:
                item = fan.get(timeout=1.0)
            except queue.Empty:
                continue
            if item[0] == survivor:
                seen += 1
        assert seen == 2000
    finally:
        for p in procs.values():
            if p.is_alive():
                p.kill()
            p.join(timeout=5)
        fan.close()
