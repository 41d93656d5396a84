"""Where HAS studies live: Optuna storages, opened from one URL string.

``open_storage`` accepts:

* a plain file path (``study.db``): an SQLite file, the default;
* any SQLAlchemy URL Optuna's ``RDBStorage`` takes (``sqlite:///x.db``,
  ``postgresql+psycopg://user@host/db`` with the ``postgres`` extra,
  ``mysql+pymysql://...``): many workers on many machines share one database;
* ``journal:PATH`` or a path ending in ``.journal`` / ``.log``: Optuna's
  ``JournalStorage`` on a file (NFS-friendly, no database server);
* ``memory:``: a study held in this process only (Optuna's
  ``InMemoryStorage``), for throw-away studies run by one worker: nothing
  persists, nothing resumes, and there is no database round trip per trial
  (the evaluation's HAS studies, about three times faster than an SQLite
  file at the same trials).

A storage that cannot be opened raises ``ValueError`` naming the URL.
:func:`prepare_study` creates or loads a study and makes a rerun resume:
trials left RUNNING by a killed process are marked FAIL (run it only when
no other worker of the same study is alive), and the count of COMPLETE
trials says how many are left to run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from easerve_core.has.trials import finished_trials

_JOURNAL_PREFIX = "journal:"
#: the storage URL of a study held in this process only
MEMORY = "memory:"
_JOURNAL_SUFFIXES = (".journal", ".log")
#: seconds an SQLite writer waits for a lock before failing (parallel workers)
SQLITE_TIMEOUT_S = 60.0


def normalize_url(url: str) -> str:
    """The storage URL a rerun must repeat: plain paths become absolute."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"storage must be a non-empty URL or path, got {url!r}")
    url = url.strip()
    if url == MEMORY:
        return url
    if url.startswith(_JOURNAL_PREFIX):
        return _JOURNAL_PREFIX + str(Path(url[len(_JOURNAL_PREFIX):]).expanduser().resolve())
    if "://" in url:
        return url
    path = Path(url).expanduser().resolve()
    if path.suffix in _JOURNAL_SUFFIXES:
        return _JOURNAL_PREFIX + str(path)
    return f"sqlite:///{path}"


def open_storage(url: str) -> BaseStorage:
    """Open the storage named by ``url`` (see the module docstring)."""
    url = normalize_url(url)
    if url == MEMORY:
        return InMemoryStorage()
    try:
        if url.startswith(_JOURNAL_PREFIX):
            path = Path(url[len(_JOURNAL_PREFIX):])
            if not path.parent.is_dir():
                raise FileNotFoundError(f"no folder {path.parent}")
            return JournalStorage(JournalFileBackend(str(path)))
        kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}} if url.startswith("sqlite") else {}
        return RDBStorage(url, engine_kwargs=kwargs)
    except Exception as exc:  # drivers raise their own types; all mean "unreachable"
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"storage {url!r} is unreachable: {reason}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class StudyState:
    """What a (re)opened study holds."""

    study_name: str
    num_complete: int
    num_failed_stale: int
    num_waiting: int


def prepare_study(storage: BaseStorage, study_name: str, *, fail_stale: bool = True) -> StudyState:
    """Create or load a maximising study; mark stale RUNNING trials FAIL (if ``fail_stale``)."""
    study = optuna.create_study(
        storage=storage, study_name=study_name, direction="maximize", load_if_exists=True
    )
    stale = 0
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)) if fail_stale else []
    for trial in running:
        if storage.set_trial_state_values(trial._trial_id, TrialState.FAIL):
            stale += 1
    complete = len(finished_trials(study))
    waiting = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
    return StudyState(study_name=study_name, num_complete=complete,
                      num_failed_stale=stale, num_waiting=waiting)
