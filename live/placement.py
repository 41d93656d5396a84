"""Whether this host can run a plan's workers, asked before any process starts.

A live trial starts one process per worker and a queue per (reader, writer)
pair; a deployment the host cannot hold used to fail after seconds of
start-up ("too many open files"). :func:`check_placement` refuses it first,
with one line naming the reason:

* ``tp > 1`` groups: the live executor runs workers of one device each
  (tensor parallelism is not implemented live; the simulator models it), so
  it refuses rather than ignore a TP;
* ``device = "cuda"`` without a CUDA device;
* file descriptors: every worker reads one queue per writer (its inbox and
  its acks) and the front end reads one per worker, each queue a pipe of
  :data:`FDS_PER_QUEUE` descriptors; the soft ``RLIMIT_NOFILE`` is raised
  toward the hard one when that helps;
* the forkserver start method hands a new process at most
  ``multiprocessing.forkserver.MAXFDS_TO_SEND`` (256) descriptors; a worker
  receives only the queues it reads or writes (:func:`queues_per_worker`,
  about four per worker of the trial): beyond 30 workers the trial starts
  its workers with ``spawn`` instead (slower to start, no such limit), and says so;
* host memory: each worker process holds about :data:`WORKER_BASE_BYTES`
  (torch and transformers loaded; 306-314 MB anonymous RSS measured for the
  tiny and small models on this CPU host, 2026-12-01) plus its weights twice
  (the loaded model and the loading copy), against ``MemAvailable``.

Every worker of a CPU host shares the host's cores, and on one CUDA device
all workers share it; the run records that (``RunResult.meta["placement"]``).
"""

from __future__ import annotations

import resource
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

from easerve_core.deployment import Deployment

#: a queue is a pipe: a read end and a write end
FDS_PER_QUEUE = 2
#: descriptors a process holds besides the queues (stdio, libraries, the weights' files)
BASE_FDS = 256
#: one worker process with torch and transformers loaded (see the module docstring)
WORKER_BASE_BYTES = 300 * 2**20
_GROUPS = ("encode", "prefill", "decode")


def num_workers(deployment: Deployment) -> int:
    return sum(getattr(deployment, g).num_workers for g in _GROUPS)


def queues_needed(workers: int) -> int:
    """Queues of a trial with ``workers`` worker processes (live.transport.Channels.build)."""
    writers = workers + 1  # every worker and the front end
    return workers * writers + writers * writers + writers


def _raise_fd_limit(needed: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return soft
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft
    return target


def mem_available_bytes() -> int | None:
    """``MemAvailable`` of /proc/meminfo, or None where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def queues_per_worker(workers: int) -> int:
    """Queues one worker is handed (live.transport.Channels.for_worker): its inbox and its acks
    from every writer, and its own queue into each other worker's inbox and acks, the front end's
    acks and the events."""
    writers = workers + 1
    return 2 * writers + (workers - 1) + workers + 1


def start_method(workers: int, wanted: str) -> str:
    """``wanted``, unless it is the forkserver and a worker's queues exceed what it can hand over."""
    passed = FDS_PER_QUEUE * queues_per_worker(workers) + 4  # the forkserver's own four
    return "spawn" if wanted == "forkserver" and passed >= forkserver.MAXFDS_TO_SEND else wanted


def check_placement(deployment: Deployment, *, device: str, weights_bytes: int = 0,
                    cuda_available: bool | None = None, wanted_start: str = "forkserver") -> dict[str, Any]:
    """Refuse a deployment this host cannot run (see the module docstring); else describe its placement.

    Without torch loaded yet (``easerve live`` asks before its slow imports),
    ``cuda_available`` is None and ``weights_bytes`` 0: the device and the
    weights are checked again by the trial itself.
    """
    for group in _GROUPS:
        tp = getattr(deployment, group).tp
        if tp > 1 and getattr(deployment, group).num_workers:
            raise ValueError(f"deployment.{group}.tp = {tp}: the live executor runs workers of one device "
                             "each (no tensor parallelism live); use tp = 1 or simulate it")
    if device == "cuda" and cuda_available is False:
        raise ValueError("live.device = 'cuda': no CUDA device on this host")
    n = num_workers(deployment)
    fds = FDS_PER_QUEUE * queues_needed(n) + BASE_FDS
    limit = _raise_fd_limit(fds)
    if fds > limit:
        raise ValueError(f"deployment: {n} worker processes need about {fds:,} file descriptors for their "
                         f"queues, this host allows {limit:,} (ulimit -n); use fewer workers")
    need = n * (WORKER_BASE_BYTES + 2 * weights_bytes)
    free = mem_available_bytes()
    if free is not None and need > free:
        raise ValueError(f"deployment: {n} worker processes need about {need / 2**30:.1f} GiB of host "
                         f"memory, {free / 2**30:.1f} GiB is available; use fewer workers")
    return {"device": device, "workers": n, "shared": "host cores" if device == "cpu" else "one CUDA device",
            "fds": fds, "memory_bytes": need, "start_method": start_method(n, wanted_start)}
