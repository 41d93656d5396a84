"""Outputs checked before the work and written whole: run folders and single files.

Every command checks where it will write before it starts (a 30 s live
trial must not end in "cannot write"): the folder is created, a probe file
written and removed. Then:

* a **run folder** (``sim``, ``live``, ``validate``, ``reproduce``) is
  written into a temporary sibling (``.NAME.tmp-*``) and renamed into place
  when the command succeeds, so a reader never sees a mixed set and a
  failed or interrupted run leaves nothing. An existing, non-empty ``--out``
  is refused unless ``--force`` is given, which replaces it whole (no stale
  file of an earlier run survives);
* a **study folder** (``search``) is the study's home (its default storage
  lives there, so a rerun resumes): it may exist; each output file in it is
  replaced atomically;
* a **file** (``calibrate``, ``profile``, ``workload``) may not be a folder;
  it is written through a temporary file and a rename, replacing an earlier one;
* **tables into a study folder** (``controller-eval --out``: :func:`write_tables`)
  are written beside the folder's files and moved in one by one, each replacing
  an earlier run's table of its name.

Folders this module created for a run that then failed are removed again
when empty. Missing parent folders of ``--out`` are created, with a notice
(one line on stderr, docs/cli.md) naming them: when a run folder is written,
or, for a file or study folder, when its output is checked.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import pandas as pd

from easerve_core.checks import notice
from runtime.files import staged_into


def _created_parents(path: Path) -> list[Path]:
    """The missing folders above (and including) ``path``, outermost first."""
    missing = []
    for p in [path, *path.parents]:
        if p.exists():
            break
        missing.append(p)
    return list(reversed(missing))


def _check_folder(folder: Path, flag: str, target: Path) -> None:
    """``folder`` (for ``target``) can be created and written: every existing place on its path is a
    folder, and the nearest existing one takes a probe file. Nothing is left behind."""
    for place in (folder, *folder.parents):
        if place.exists() and not place.is_dir():
            what = "exists and is not a folder" if place == target else f"{place} is a file, not a folder"
            raise ValueError(f"{flag} {target}: {what}")
    base = next(p for p in (folder, *folder.parents) if p.exists())
    try:
        fd, name = tempfile.mkstemp(dir=base, prefix=".easerve-probe-")
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        where = "not writable" if base == target else f"{base} is not writable"
        raise ValueError(f"{flag} {target}: {where} ({exc.strerror or exc})") from None


def _make_folder(folder: Path, flag: str, target: Path) -> list[Path]:
    """Create ``folder`` and its parents; the folders created, outermost first."""
    created = _created_parents(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{flag} {target}: cannot create {folder} ({exc.strerror or exc})") from None
    return created


def _note_missing(folder: Path, flag: str, target: Path) -> None:
    """A notice naming the folders above ``target`` that do not exist (and will be created)."""
    missing = _created_parents(folder)
    if missing:
        notice(f"{flag} {target}: creating the missing folder{'s' if len(missing) > 1 else ''} "
               + ", ".join(str(m) for m in missing))


def _remove_empty(folders: list[Path]) -> None:
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:
            return


def check_file(path: Path, flag: str = "--out") -> None:
    """A file output: not a folder, and its folder can be created and written (nothing is created)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{flag} {path}: is a folder; give a file name")
    _check_folder(path.parent, flag, path)
    _note_missing(path.parent, flag, path)


def check_study_folder(path: Path, flag: str = "--out") -> None:
    """A study folder: a folder that can be created and written; it may hold an earlier run of the study."""
    path = Path(path)
    _check_folder(path, flag, path)
    _note_missing(path.parent, flag, path)


def write_tables(folder: Path, frames: Mapping[str, pd.DataFrame]) -> None:
    """Each frame as ``folder/NAME.csv``: written into a staging folder inside ``folder``, then moved
    in one by one (a reader never sees half a table; the staging folder is removed whatever happens)."""
    with staged_into(folder) as staging:
        for name, frame in frames.items():
            frame.to_csv(staging / f"{name}.csv", index=False)


class RunFolder:
    """A run folder written whole or not at all (see the module docstring).

    Construct it before the work (it checks the target and creates nothing);
    ``with`` it around the writing, which goes into the staging folder it yields.
    """

    def __init__(self, path: Path, *, force: bool = False, flag: str = "--out") -> None:
        self.path = Path(path)
        self.flag = flag
        here = Path.cwd().resolve()
        if self.path.resolve() in (here, *here.parents):  # "." or ".." or "/": no sibling to stage in,
            # and replacing it would take the working folder with it
            raise ValueError(f"{flag} {self.path}: is the working folder or holds it; "
                             "name a folder for the run")
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"{flag} {self.path}: exists and is not a folder")
        if self.path.is_dir() and any(self.path.iterdir()) and not force:
            raise ValueError(f"{flag} {self.path}: exists and is not empty; pass --force to replace it")
        _check_folder(self.path.parent, flag, self.path)
        self.staging: Path | None = None
        self._created: list[Path] = []

    def __enter__(self) -> Path:
        _note_missing(self.path.parent, self.flag, self.path)
        self._created = _make_folder(self.path.parent, self.flag, self.path)
        self.staging = Path(tempfile.mkdtemp(dir=self.path.parent, prefix=f".{self.path.name}.tmp-"))
        return self.staging

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        assert self.staging is not None
        if kind is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
            _remove_empty(self._created)
            return
        old = None
        try:
            if self.path.exists():
                old = Path(tempfile.mkdtemp(dir=self.path.parent, prefix=f".{self.path.name}.old-"))
                os.replace(self.path, old / self.path.name)
            os.replace(self.staging, self.path)
        except OSError:  # the earlier run goes back in place; neither sibling is left behind
            if old is not None and (old / self.path.name).exists() and not self.path.exists():
                os.replace(old / self.path.name, self.path)
            shutil.rmtree(self.staging, ignore_errors=True)
            raise
        finally:
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
