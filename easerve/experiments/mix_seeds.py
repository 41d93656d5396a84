"""The mix shifts over several seeds: each (seed, shift) study is one task on the pool.

``easerve controller-eval --mix-shifts --seeds N,M,... --jobs J`` runs every
shift once per seed. The studies are independent, so the pool's tasks are the
(seed, shift) pairs, each a whole :func:`~easerve.experiments.mix_control.shift_study`
in its worker (HAS's searches, then the five systems, one after the other).
That keeps J workers busier than a pool inside each study, whose five systems
are uneven tasks. A study draws only from its own seed, so each seed's tables are
the same bytes as :func:`~easerve.experiments.mix_control.mix_shift_tables` at
that seed gives, in this process or on a pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import pandas as pd

from easerve.experiments.mix_control import mix_tables, shift_study
from easerve.experiments.shifts import Shift
from runtime.parallel import Backend, run_tasks


def seeds_tables(shifts: Sequence[Shift], seeds: Sequence[int], *, backend: Backend,
                 **settings: Any) -> list[tuple[dict[str, pd.DataFrame], list[dict[str, Any]]]]:
    """For each of ``seeds`` in order, its frames (:data:`~easerve.experiments.mix_control.MIX_TABLES`)
    and its studies, one a shift; ``settings`` go to every
    :func:`~easerve.experiments.mix_control.shift_study` (each runs in its task's process)."""
    tasks = [partial(shift_study, shift, seed=seed, **settings) for seed in seeds for shift in shifts]
    done = run_tasks(backend, tasks)
    runs = [done[i * len(shifts):(i + 1) * len(shifts)] for i in range(len(seeds))]
    return [(mix_tables(studies), studies) for studies in runs]
