"""easerve_core stays pure: no engines, no runtime, and no clock reads.

Banned in the core (:data:`FORBIDDEN_MODULES`): the engines and the model
stack (simpy, torch, transformers, and our sim, live, calibration); the
runtime (ctypes, ray, sqlalchemy, multiprocessing, concurrent, Optuna's
storages, and our runtime package, which holds them); the front door
(easerve); and clock reads (time, ``datetime.now()`` and kin).

Two checks: a static scan of every module's imports and attribute uses, and a
fresh interpreter that imports every easerve_core module and then looks at
``sys.modules``. Adding ``import simpy`` (or ``time.monotonic()``, or
``from optuna.storages import RDBStorage``) to any policy module makes the scan
fail, and the interpreter check too where the import loads an engine or the
runtime. The interpreter check cannot ban ctypes, concurrent or
optuna.storages: numpy, pandas and optuna load them themselves; the scan
bans the core's own imports of them.

Not banned yet, the next step of issue 30: file I/O. The core still reads and
writes files (easerve_core.files: TOML, JSON lines, atomic writes; config,
workload.trace and workload.importers load through it; result reads a run's
folder); when that moves out, this test bans ``tomllib``, ``open`` and
``Path.read_text`` / ``write_text`` in the core too.
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
}
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
        elif isinstance(node, ast.Attribute) and node.attr in CLOCK_CALLS:
            base = node.value
            if isinstance(base, ast.Name) and base.id in {"time", "datetime", "date"}:
                found.append(f"{path.name}:{node.lineno} {base.id}.{node.attr}")
            if isinstance(base, ast.Attribute) and base.attr in {"datetime", "date"}:
                found.append(f"{path.name}:{node.lineno} ...{base.attr}.{node.attr}")
    return found


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
    allowed = tmp_path / "ok.py"
    allowed.write_text("import optuna\nfrom optuna.trial import TrialState\nfrom optuna import pruners\n"
                       "import easerve_core.has\nfrom easerve_core import checks\nimport simulate\n"
                       "import timeit\nimport runtimes\n")
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
