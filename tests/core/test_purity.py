"""easerve_core stays pure: no engines, no runtime, no clock reads and no file I/O.

Banned in the core (:data:`FORBIDDEN_MODULES`): the engines and the model
stack (simpy, torch, transformers, and our sim, live, calibration); the
runtime (ctypes, ray, sqlalchemy, multiprocessing, concurrent, Optuna's
storages, and our runtime package, which holds them); the front door
(easerve); clock reads (time, ``datetime.now()`` and kin); and file I/O:
the modules that read or write files (tomllib, pyarrow's I/O modules, shutil,
io, glob, tempfile, fileinput, os.path), builtin ``open``, every use of ``os``
but ``PathLike`` and ``fspath`` (which only name a path), the readers and
writers of pandas, numpy and pyarrow (:data:`DATA_IO`: ``read_parquet``,
``to_parquet``, ``np.load``, ``json.dump``, ...), and Path's I/O methods
called on any object (:data:`PATH_IO`: ``read_text``, ``write_text``,
``exists``, ``mkdir``, ``unlink``, ...; ``replace`` and ``rename`` in Path's
one-argument form, so ``text.replace(a, b)`` stays allowed). The scan cannot
tell a Path from another object, so these names are not the core's own
method names either. A ``Path`` may still be built, joined and resolved in
the core: that names a file, it does not read one.

The core takes data and returns data; the runtime reads and writes the bytes
(``runtime.files``, ``configs``, ``traces``, ``profiles``, ``results``).
Where validating a config needs what a file it names holds (a workload's
trace, whether a model spec exists), the caller hands in a reader
(``easerve_core.config.ConfigFiles``, ``easerve_core.workload.TraceReader``).

Two checks: a static scan of every module's imports, attribute uses and calls,
and a fresh interpreter that imports every easerve_core module and then looks at
``sys.modules``. Adding ``import simpy`` (or ``time.monotonic()``, or
``from optuna.storages import RDBStorage``, or ``path.read_text()``) to any
policy module makes the scan fail, and the interpreter check too where the
import loads an engine or the runtime. The interpreter check cannot ban ctypes,
concurrent, optuna.storages or the I/O modules: numpy, pandas and optuna load
them themselves; the scan bans the core's own imports and calls of them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import easerve_core

CORE = Path(easerve_core.__file__).parent
FORBIDDEN_MODULES = {
    "simpy", "torch", "transformers", "time", "live", "sim", "calibration",  # engines, clocks
    "ctypes", "ray", "sqlalchemy", "multiprocessing", "concurrent", "optuna.storages",  # runtime
    "runtime", "easerve",  # our runtime and front door
    "tomllib", "pyarrow.parquet", "pyarrow.csv", "pyarrow.json", "pyarrow.feather", "pyarrow.fs",
    "pyarrow.dataset", "pyarrow.ipc", "shutil", "io", "glob", "tempfile", "fileinput", "os.path",  # I/O
}
#: methods that touch the file system, on a Path or anything else (a name the core never uses
#: for its own methods: the scan cannot tell a Path from another object)
PATH_IO = {"read_text", "write_text", "read_bytes", "write_bytes", "open", "mkdir", "unlink",
           "iterdir", "glob", "rglob", "exists", "is_file", "is_dir", "is_symlink", "stat", "lstat",
           "rmdir", "touch", "chmod", "symlink_to", "hardlink_to", "readlink", "samefile"}
#: Path methods whose names strings, dates and frames share: banned as Path's one-argument form
#: (``path.replace(target)``), not ``text.replace(a, b)`` or ``moment.replace(tzinfo=None)``
PATH_MOVES = {"replace", "rename"}
#: readers and writers of pandas, numpy and pyarrow (called on a module, a frame or a table)
DATA_IO = {"read_parquet", "to_parquet", "read_csv", "to_csv", "read_json", "to_json",
           "read_feather", "to_feather", "read_pickle", "to_pickle", "read_table", "write_table",
           "read_excel", "to_excel", "read_hdf", "to_hdf", "load", "save", "savez", "savez_compressed",
           "dump", "loadtxt", "savetxt", "genfromtxt", "fromfile", "tofile", "memmap"}
#: of ``os``, the names that only name a path, used for typing and conversion
OS_ALLOWED = {"PathLike", "fspath"}
#: builtins that open files
OPEN_CALLS = {"open"}
#: top-level modules that importing the whole core must not load
NOT_LOADED = ("simpy", "torch", "transformers", "ray", "sqlalchemy", "runtime", "easerve",
              "live", "sim", "calibration")
CLOCK_CALLS = {"time", "monotonic", "perf_counter", "now", "utcnow", "today", "sleep",
               "monotonic_ns", "time_ns", "perf_counter_ns"}


def core_modules():
    return sorted(p for p in CORE.rglob("*.py"))


def forbidden(name: str) -> bool:
    """``name`` is a forbidden module or inside one (``optuna.storages.journal``, not ``optuna``)."""
    return any(name == banned or name.startswith(banned + ".") for banned in FORBIDDEN_MODULES)


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if forbidden(alias.name):
                    found.append(f"{path.name}:{node.lineno} import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            if forbidden(node.module):
                found.append(f"{path.name}:{node.lineno} from {node.module}")
            else:  # from optuna import storages
                found += [f"{path.name}:{node.lineno} from {node.module} import {alias.name}"
                          for alias in node.names if forbidden(f"{node.module}.{alias.name}")]
                if node.module == "os":  # from os import replace
                    found += [f"{path.name}:{node.lineno} from os import {alias.name}"
                              for alias in node.names if alias.name not in OS_ALLOWED]
        elif isinstance(node, ast.Attribute):
            found += [f"{path.name}:{node.lineno} {what}" for what in _attribute_use(node)]
        elif isinstance(node, ast.Call):
            found += [f"{path.name}:{node.lineno} {what}" for what in _io_call(node)]
    return sorted(found, key=lambda v: int(v.split(" ", 1)[0].rsplit(":", 1)[1]))  # by line, stable


def _attribute_use(node: ast.Attribute) -> list[str]:
    """A clock read, or a use of ``os`` beyond naming a path."""
    base = node.value
    if node.attr in CLOCK_CALLS:
        if isinstance(base, ast.Name) and base.id in {"time", "datetime", "date"}:
            return [f"{base.id}.{node.attr}"]
        if isinstance(base, ast.Attribute) and base.attr in {"datetime", "date"}:
            return [f"...{base.attr}.{node.attr}"]
    if isinstance(base, ast.Name) and base.id == "os" and node.attr not in OS_ALLOWED:
        return [f"os.{node.attr}"]
    return []


def _io_call(node: ast.Call) -> list[str]:
    """A call of builtin ``open``, a Path I/O method, or a data reader or writer."""
    func = node.func
    if isinstance(func, ast.Name) and func.id in OPEN_CALLS:
        return [f"{func.id}()"]
    if not isinstance(func, ast.Attribute):
        return []
    if func.attr in PATH_IO or func.attr in DATA_IO:
        return [f".{func.attr}()"]
    if func.attr in PATH_MOVES and len(node.args) == 1 and not node.keywords:
        return [f".{func.attr}(target)"]
    return []


def test_static_scan_finds_no_forbidden_import_or_clock():
    bad = [v for path in core_modules() for v in violations(path)]
    assert not bad, "easerve_core must stay pure:\n" + "\n".join(bad)


def test_scan_catches_what_it_should(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("import simpy\nimport time\nx = time.monotonic()\n"
                      "from datetime import datetime\ny = datetime.now()\n")
    assert len(violations(sample)) == 4
    runtime = tmp_path / "r.py"
    runtime.write_text(
        "import ctypes\nimport ray\nimport multiprocessing.connection\nimport sqlalchemy.orm\n"
        "from concurrent.futures import ProcessPoolExecutor\nimport optuna.storages\n"
        "from optuna.storages import RDBStorage\nfrom optuna.storages.journal import JournalFileBackend\n"
        "from optuna import storages, trial\nfrom runtime.has import run_search\n"
        "import runtime.parallel\nfrom easerve.cli import main\nimport easerve\n")
    assert [v.split(" ", 1)[1] for v in violations(runtime)] == [
        "import ctypes", "import ray", "import multiprocessing.connection", "import sqlalchemy.orm",
        "from concurrent.futures", "import optuna.storages", "from optuna.storages",
        "from optuna.storages.journal", "from optuna import storages", "from runtime.has",
        "import runtime.parallel", "from easerve.cli", "import easerve"]
    io_sample = tmp_path / "io.py"
    io_sample.write_text(
        "import tomllib\nimport shutil\nimport io\nimport glob\nimport tempfile\n"
        "import pyarrow.parquet as pq\nfrom pyarrow import parquet\nimport os.path\n"
        "from os import replace\nimport os\nx = os.replace\ny = os.path.relpath\n"
        "open('f')\np.read_text()\np.write_text('x')\np.read_bytes()\np.write_bytes(b'')\n"
        "p.open()\np.mkdir()\np.unlink()\np.iterdir()\np.glob('*')\np.exists()\np.is_file()\n"
        "p.is_dir()\np.stat()\np.rename(q)\np.replace(q)\np.rmdir()\np.touch()\n"
        "pd.read_parquet(p)\nframe.to_parquet(p)\nnp.load(p)\n")
    assert [v.split(" ", 1)[1] for v in violations(io_sample)] == [
        "import tomllib", "import shutil", "import io", "import glob", "import tempfile",
        "import pyarrow.parquet", "from pyarrow import parquet", "import os.path", "from os import replace",
        "os.replace", "os.path", "open()", ".read_text()", ".write_text()", ".read_bytes()",
        ".write_bytes()", ".open()", ".mkdir()", ".unlink()", ".iterdir()", ".glob()", ".exists()",
        ".is_file()", ".is_dir()", ".stat()", ".rename(target)", ".replace(target)", ".rmdir()",
        ".touch()", ".read_parquet()", ".to_parquet()", ".load()"]
    allowed = tmp_path / "ok.py"
    allowed.write_text("import optuna\nfrom optuna.trial import TrialState\nfrom optuna import pruners\n"
                       "import easerve_core.has\nfrom easerve_core import checks\nimport simulate\n"
                       "import timeit\nimport runtimes\nimport os\nimport pyarrow\n"
                       "def f(p: os.PathLike[str]) -> str:\n    return os.fspath(p)\n"
                       "q = Path('a') / 'b'\nr = q.resolve()\ns = 'a,b'.replace(',', ';')\n"
                       "t = moment.replace(tzinfo=None)\nu = json.loads(text)\nv = frame.rename(columns=m)\n"
                       "import iot\nimport globals_\n")
    assert violations(allowed) == []


def test_importing_every_core_module_loads_no_engine():
    names = []
    for path in core_modules():
        rel = path.relative_to(CORE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    code = (
        "import sys, importlib\n"
        f"for n in {names!r}: importlib.import_module(n)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {NOT_LOADED!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"easerve_core pulled in: {out.stdout.strip()}"
