"""HAS's runtime: the Optuna storages its studies live in, and the driver that runs a search.

:mod:`~runtime.has.storage` opens a storage from one URL (an SQLite file, a
database server, a journal file, or memory) and prepares a study to resume;
:mod:`~runtime.has.search` (:func:`run_search`) runs a study to its planned
size as jobs on a backend (:mod:`runtime.parallel`), each job reading what
the study already evaluated through :mod:`~runtime.has.seen`. What a trial
is and how it is scored (the space, the screen, the objective, the ladder,
the recheck and the tables) is pure and lives in :mod:`easerve_core.has`.
Background: docs/has.md.
"""

from runtime.has.search import SAMPLERS, SearchSettings, make_sampler, run_search
from runtime.has.seen import SeenTrials
from runtime.has.storage import MEMORY, StudyState, normalize_url, open_storage, prepare_study

__all__ = [
    "MEMORY",
    "SAMPLERS",
    "SearchSettings",
    "SeenTrials",
    "StudyState",
    "make_sampler",
    "normalize_url",
    "open_storage",
    "prepare_study",
    "run_search",
]
