"""Host-side preprocessing: a FIFO queue of host threads in front of a worker's encoder.

Before an engine encodes a request's media, its host decodes the media and
runs the model's processor (resize, normalise, patch; audio features). That
work occupies a host thread, not the SMs, and it overlaps GPU work: while the
encoder runs one batch, the next requests are being preprocessed. The model
(docs/simulator.md, "Host preprocessing"):

* each encode worker and each aggregated instance has its own
  :class:`HostPreprocess` of ``SimOptions.num_preprocess_threads`` threads
  (1 by default: vLLM's one API-server process, our live encode worker's one
  receive loop);
* a request reaching the worker waits in FIFO order for the first free
  thread, holds it for ``profile.host_preprocess_s(items)`` and only then is
  offered to the worker's batcher (the aggregated engine's waiting queue);
* a request whose items cost no host time (text, or a profile without host
  preprocessing) is offered at once, with no event.

Service times are known at arrival, so the queue is a heap of the threads'
free times, as :class:`sim.link.Link` keeps its paths: one
:meth:`~sim.clock.SimEnvironment.call_later` per preprocessed request. Two
requests done at one instant are offered in the order they arrived.

Not modelled: the threads' competition for the host's cores with the stages
themselves (:mod:`sim.host`, ``[sim.host] num_host_cores``) and any batching
of preprocessing across requests.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Protocol

from easerve_core import StageProfile
from easerve_core.profile import HostPreprocessing
from sim.clock import SimEnvironment
from sim.job import Job
from sim.recorder import Recorder

#: what the stage hands a preprocessed job to: ``then(job, done_s)``
Then = Callable[[Job, float], None]


class HostPreprocess:
    """``num_threads`` host threads serving a FIFO queue (see the module docstring)."""

    def __init__(self, env: SimEnvironment, num_threads: int, seconds: Callable[[Sequence[int]], float],
                 *, recorder: Recorder, worker: int, stage: str) -> None:
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"num_threads must be an integer >= 1, got {num_threads!r}")
        self.env = env
        self.seconds = seconds
        self._free_at = [0.0] * num_threads  # a heap: when each thread frees
        self.num_pending = 0  # requests queued or being preprocessed
        self.num_done = 0
        self.busy_s = 0.0  # thread-seconds of work taken on
        self.rec = recorder
        self.worker = worker
        self._slot = recorder.queue_slot(f"{stage}-preprocess", worker)

    def submit(self, job: Job, now: float, then: Then) -> bool:
        """Queue ``job`` and call ``then(job, done_s)`` when preprocessed; False: it costs
        nothing, the caller offers it now."""
        work_s = self.seconds(job.items) if job.items else 0.0
        if work_s <= 0.0:
            return False
        start = max(now, self._free_at[0])
        end = start + work_s
        heapq.heapreplace(self._free_at, end)
        self.num_pending += 1
        self.busy_s += work_s
        self.rec.queue(self._slot, now, self.num_pending)
        env = self.env
        env.call_later(max(0.0, end - env.now), lambda _call: self._done(job, end, then))
        return True

    def _done(self, job: Job, end: float, then: Then) -> None:
        self.num_pending -= 1
        self.num_done += 1
        self.rec.queue(self._slot, end, self.num_pending)
        self.rec.log(end, "preprocessed", self.worker, (job,))
        then(job, end)


def make_preprocess(env: SimEnvironment, profile: StageProfile, num_threads: int, *,
                    recorder: Recorder, worker: int, stage: str) -> HostPreprocess | None:
    """The worker's preprocessing stage, or None when ``profile`` knows no host preprocessing
    (none at all, or an item of one token costs it nothing: the roofline's 0)."""
    if not isinstance(profile, HostPreprocessing) or not profile.host_preprocess_s([1]) > 0:
        return None
    return HostPreprocess(env, num_threads, profile.host_preprocess_s, recorder=recorder, worker=worker,
                          stage=stage)


class FrontWorker(Protocol):
    """What the front dispatcher needs of a worker: its index, its load, an offer."""

    index: int

    @property
    def load(self) -> int: ...

    def offer(self, job: Job, now: float) -> None: ...


class PreprocessedFront:
    """An aggregated instance as the front dispatcher sees it, behind its preprocessing stage.

    It offers each request to ``stage`` first and hands it to ``worker.offer``
    when done; its ``load`` counts the requests still being preprocessed.
    """

    def __init__(self, worker: FrontWorker, stage: HostPreprocess) -> None:
        self.worker = worker
        self.stage = stage
        self.index = worker.index

    @property
    def load(self) -> int:
        return self.worker.load + self.stage.num_pending

    def offer(self, job: Job, now: float) -> None:
        if not self.stage.submit(job, now, self.worker.offer):
            self.worker.offer(job, now)
