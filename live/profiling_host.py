"""Host-side measurements: transfers between processes, core contention, in-process overheads.

What a CPU host adds to the stage latencies of :mod:`live.profiling`, each
measured in isolation (docs/calibration.md):

* :func:`measure_transfer`: one-way latency of a message carrying a tensor of
  N bytes through a ``torch.multiprocessing`` queue to another process (the
  tensor moves to shared memory when pickled, as every live hand-off does);
  the sender stamps ``time.monotonic()`` before ``put``, the receiver after
  ``get``.
* :func:`measure_contention`: k processes each running a one-thread torch
  loop at once (or, on a GPU host, a model's stages on the device); the speed
  of each relative to running alone, for k = 1..K. The host's effective core
  count (the GPU's capacity in processes) is fitted to ``min(1, cores / k)``.
* :func:`measure_colocation`: Encode and Prefill on two threads of one
  process (an encode worker with local Prefill) against each alone.
* :func:`measure_step_overhead`: the per-step work of the live decode loop
  outside the timed step (poll the inbox, check the front end, emit the
  stage-log event).
"""

from __future__ import annotations

import os
import queue
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.multiprocessing as tmp

from live.events import StageRow
from runtime.parallel.lifeline import die_with_parent, lifeline

#: bytes per float32 element
_FLOAT_BYTES = 4
#: side of the square matrix the contention loop multiplies
_SPIN_SIDE = 128
#: head start the parent gives the children before a contention round begins
_START_LEAD_S = 0.1


def _context(start_method: str) -> Any:
    ctx = tmp.get_context(start_method)
    if start_method == "forkserver":
        ctx.set_forkserver_preload(["live.profiling_host"])
    return ctx


def _echo(inbox: Any, outbox: Any, parent: Any) -> None:
    """Child: stamp each message's receipt and send the stamp back (and die with its parent)."""
    die_with_parent(parent)
    while True:
        msg = inbox.get()
        if msg is None:
            return
        sent_s, tensor = msg
        outbox.put((sent_s, time.monotonic(), int(tensor.numel())))


def measure_transfer(byte_sizes: Sequence[int], *, reps: int = 7,
                     start_method: str = "forkserver") -> list[dict[str, Any]]:
    """One-way latency per message size (median over ``reps``, fresh tensor each time)."""
    ctx = _context(start_method)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    with lifeline(ctx) as parent:
        child = ctx.Process(target=_echo, args=(inbox, outbox, parent), daemon=True, name="easerve-echo")
        child.start()
        return _transfer_rounds(byte_sizes, reps, inbox, outbox, child)


def _transfer_rounds(byte_sizes: Sequence[int], reps: int, inbox: Any, outbox: Any,
                     child: Any) -> list[dict[str, Any]]:
    rows = []
    try:
        for size in [min(byte_sizes), *byte_sizes]:  # the first round warms the path up
            times = []
            for _ in range(reps):
                tensor = torch.randn(max(1, size // _FLOAT_BYTES))
                inbox.put((time.monotonic(), tensor))
                sent_s, got_s, _ = outbox.get(timeout=30)
                times.append(got_s - sent_s)
                del tensor  # held until the receiver had it (pitfall P8)
            rows.append({"bytes": int(size), "latency_s": statistics.median(times),
                         "spread_frac": _spread(times), "reps": reps})
    finally:
        inbox.put(None)
        child.join(timeout=10)
        if child.is_alive():
            child.terminate()
            child.join()
    return rows[1:]


def _spread(samples: Sequence[float]) -> float:
    med = statistics.median(samples)
    return (max(samples) - min(samples)) / med if med > 0 else 0.0


def _matmul_work() -> Callable[[], Any]:
    """The default contention work: a one-thread CPU matmul loop."""
    state = {"a": torch.randn(_SPIN_SIDE, _SPIN_SIDE)}

    def step() -> None:
        state["a"] = torch.tanh(state["a"] @ state["a"])

    return step


def _spin(commands: Any, results: Any, make_work: Callable[[], Callable[[], Any]] | None,
          parent: Any) -> None:
    """Child: build the work, say ready, then on each (start_at, duration) count its calls in that window."""
    die_with_parent(parent)
    torch.set_num_threads(1)
    step = (make_work or _matmul_work)()
    results.put("ready")
    while True:
        cmd = commands.get()
        if cmd is None:
            return
        start_at, duration_s = cmd
        while time.monotonic() < start_at:
            pass
        count, end = 0, start_at + duration_s
        while time.monotonic() < end:
            step()
            count += 1
        results.put(count)


def measure_contention(max_procs: int, *, duration_s: float = 0.5, reps: int = 3,
                       start_method: str = "forkserver",
                       make_work: Callable[[], Callable[[], Any]] | None = None,
                       ready_timeout_s: float = 120.0) -> list[dict[str, Any]]:
    """Per-process speed (vs alone, and in calls per second) with k = 1..max_procs processes busy at once.

    Each child process runs ``make_work()`` once (a picklable module-level
    factory; default: a one-thread CPU matmul) and then counts calls of the
    function it returned. On a GPU host the work is a stage of the model on
    the device, so the speeds say how the processes share the one GPU.
    """
    ctx = _context(start_method)
    with lifeline(ctx) as parent:  # the children end if this process dies
        commands = [ctx.Queue() for _ in range(max_procs)]
        results = ctx.Queue()
        procs = [ctx.Process(target=_spin, args=(c, results, make_work, parent), daemon=True,
                             name=f"easerve-spin-{i}")
                 for i, c in enumerate(commands)]
        for p in procs:
            p.start()
        rates: dict[int, list[float]] = {k: [] for k in range(1, max_procs + 1)}
        try:
            for _ in procs:  # every child has built its work before a window starts
                if results.get(timeout=ready_timeout_s) != "ready":
                    raise RuntimeError("a contention child answered before it was ready")
            for _ in range(reps):
                for k in range(1, max_procs + 1):
                    start_at = time.monotonic() + _START_LEAD_S
                    for c in commands[:k]:
                        c.put((start_at, duration_s))
                    counts = [results.get(timeout=60) for _ in range(k)]
                    rates[k].append(statistics.mean(counts) / duration_s)
        finally:
            for c in commands:
                c.put(None)
            for p in procs:
                p.join(timeout=10)
                if p.is_alive():
                    p.terminate()
                    p.join()
    alone = statistics.median(rates[1])
    return [{"procs": k, "speed_frac": statistics.median(v) / alone, "rate_hz": statistics.median(v),
             "reps": reps} for k, v in rates.items()]


def fit_cores(rows: Sequence[dict[str, Any]], *, step: float = 0.01) -> float:
    """The core count C whose ``min(1, C/k)`` fits the measured speeds best (least squares)."""
    top = max(r["procs"] for r in rows)
    grid = [1.0 + i * step for i in range(round((top - 1.0) / step) + 1)]

    def loss(c: float) -> float:
        return sum((min(1.0, c / r["procs"]) - r["speed_frac"]) ** 2 for r in rows)

    return min(grid, key=loss)


def _loop_times(fn: Callable[[], Any], stop: threading.Event, out: list[float]) -> None:
    torch.set_num_threads(1)
    while not stop.is_set():
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)


def measure_colocation(first: Callable[[], Any], second: Callable[[], Any], *,
                       duration_s: float = 1.0) -> dict[str, float]:
    """Speed of each callable on two threads of this process, relative to running alone."""
    def run(fns: Sequence[Callable[[], Any]]) -> list[float]:
        stop = threading.Event()
        outs: list[list[float]] = [[] for _ in fns]
        threads = [threading.Thread(target=_loop_times, args=(f, stop, o), daemon=True)
                   for f, o in zip(fns, outs, strict=True)]
        for t in threads:
            t.start()
        time.sleep(duration_s)
        stop.set()
        for t in threads:
            t.join()
        return [statistics.median(o) for o in outs]

    alone = [run([first])[0], run([second])[0]]
    together = run([first, second])
    speeds = [a / b for a, b in zip(alone, together, strict=True)]
    return {"first_speed_frac": speeds[0], "second_speed_frac": speeds[1],
            "speed_frac": statistics.mean(speeds)}


def measure_step_overhead(step: Callable[[], Any], *, iterations: int = 200,
                          start_method: str = "forkserver") -> float:
    """Median extra seconds per decode-loop iteration over the bare ``step`` (module docstring).

    Each iteration does what the live decode worker does around one step:
    poll its inbox, check the front end, read the batch's context, run the
    step, emit the stage-log event (pickled on the queue's feeder thread,
    which competes with the next step for the interpreter). The overhead is
    the median iteration minus the median bare step, so it holds both the
    work between steps and what the feeder takes from the step itself.
    """
    ctx = _context(start_method)
    inbox, events = ctx.Queue(), ctx.Queue()
    mask = torch.ones(4, 64, dtype=torch.long)
    pid = os.getpid()
    bare, loop = [], []
    for _ in range(iterations):
        t0 = time.perf_counter()
        step()
        bare.append(time.perf_counter() - t0)
    for i in range(iterations):
        begin = time.perf_counter()
        try:
            inbox.get_nowait()
        except queue.Empty:
            os.kill(pid, 0)
        tokens = int(mask.sum())
        step()
        now = time.monotonic()
        events.put(StageRow(worker=("decode", 0), stage="decode", index=0, group="decode", start_s=now,
                            end_s=now, batch_size=4, tokens=tokens + i, sm_share=1.0))
        loop.append(time.perf_counter() - begin)
    events.cancel_join_thread()
    inbox.cancel_join_thread()
    return max(0.0, statistics.median(loop) - statistics.median(bare))


def measure_join(make_state: Callable[[], Any], batch_factory: Callable[[], Any], *,
                 reps: int = 9) -> float:
    """Median seconds to join one prefilled request to a running decode batch and let it leave.

    The live decode worker joins between steps (its cache grows by a
    ``torch.cat`` per layer) and drops a finished row (an index select), on
    the loop every running request waits for.
    """
    times = []
    for i in range(reps):
        batch = batch_factory()
        state = make_state()
        start = time.perf_counter()
        batch.join(("join", i), state, 1)
        batch.leave([("join", i)])
        times.append(time.perf_counter() - start)
    return statistics.median(times)
