"""Every backend returns the same results in the same order; failures are one clear error.

The in-process backend, a local pool of two processes and a local Ray of
two jobs run the same tasks (``tests/parallel/tasks.py``); seeds belong to
the tasks, so the results are equal to the last bit whichever worker ran
which task. A task's exception comes back as itself; a worker that dies
is one :class:`BackendError`; leaving the block on an error ends the
workers at once.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from functools import partial

import pytest

from runtime.parallel import Backend, BackendError, BackendSettings, LocalPool, open_backend, run_tasks
from tests.parallel import tasks

SEEDS = list(range(8))


def test_results_come_in_task_order_and_from_the_tasks_seeds(backend: Backend) -> None:
    serial = [tasks.draw(s) for s in SEEDS]
    assert backend.map(tasks.draw, SEEDS) == serial


def test_tasks_of_different_kinds_run_in_one_map(backend: Backend) -> None:
    out = run_tasks(backend, [partial(tasks.draw, 5), partial(tasks.sleep_then, 0.0)])
    assert out == [tasks.draw(5), 0.0]


def test_a_task_error_is_raised_as_itself(backend: Backend) -> None:
    with pytest.raises(ValueError, match="bad item 2"):
        backend.map(tasks.fail_on_two, [0, 1, 2, 3])


def test_a_dying_worker_is_one_backend_error(backend: Backend) -> None:
    if backend.num_jobs == 1:
        pytest.skip("in process: a dying task would end the test run itself")
    if backend.name == "local":  # a broken pool stays broken: use a fresh one
        before = _children()
        with pytest.raises(BackendError, match="worker process died"), LocalPool(2, poll_s=0.05) as pool:
            pool.map(tasks.die_on_two, [0, 1, 2, 3])
        assert _children() == before
    else:
        with pytest.raises(BackendError, match="worker died"):
            backend.map(tasks.die_on_two, [0, 1, 2, 3])
        assert backend.map(tasks.draw, [1]) == [tasks.draw(1)]  # Ray replaces the worker


@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_leaving_on_an_error_ends_the_workers_at_once(start_method: str) -> None:
    """The lifeline ends a worker mid-task: a forked one too (it closed its copy of the write end)."""
    before, start = _children(), time.perf_counter()
    with pytest.raises(ValueError, match="fails at once"), LocalPool(
            2, poll_s=0.05, start_method=start_method) as pool:
        pool.map(tasks.sleep_then, [60.0, -1.0, 60.0])
    assert time.perf_counter() - start < 20.0  # not the 60 s the running task holds
    assert _children() == before


def _children() -> set[int]:
    """This process's live multiprocessing children (reaping the dead), by pid."""
    return {p.pid for p in multiprocessing.active_children() if p.pid is not None}


def test_a_forked_pool_runs_tasks_without_importing_them_again() -> None:
    with LocalPool(2, start_method="fork") as pool:
        assert pool.map(tasks.draw, [1, 2, 3]) == [tasks.draw(1), tasks.draw(2), tasks.draw(3)]


def test_poll_is_called_while_waiting() -> None:
    calls: list[int] = []
    with open_backend(BackendSettings(num_jobs=2, poll_s=0.05)) as pool:
        pool.map(tasks.sleep_then, [0.5, 0.5], poll=lambda: calls.append(1))
    assert len(calls) >= 2


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"name": "dask"}, "unknown backend 'dask'; known: local, ray"),
    ({"num_jobs": 0}, "jobs must be >= 1"),
    ({"address": "auto"}, "only the ray backend"),
    ({"name": "ray", "address": " "}, "address must be a non-empty string"),
    ({"poll_s": 0}, "poll_s must be > 0"),
])
def test_bad_settings_name_the_field(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BackendSettings(**kwargs)  # type: ignore[arg-type]


def test_ray_missing_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ModuleNotFoundError
    with pytest.raises(ValueError, match=r"Ray is not installed \(pip install 'easerve\[ray\]'\)"), \
            open_backend(BackendSettings(name="ray")):
        pass


def test_describe() -> None:
    assert BackendSettings().describe() == "local, 1 job"
    assert BackendSettings(num_jobs=2).describe() == "local, 2 jobs"
    assert BackendSettings(name="ray").describe() == "ray (local), all CPUs"
    assert BackendSettings(name="ray", address="auto", num_jobs=8).describe() == "ray at auto, 8 jobs"
