"""easerve_core stays pure: no simpy, torch or transformers, and no clock reads.

Two checks: a static scan of every module's imports and attribute uses, and a
fresh interpreter that imports every easerve_core module and then looks at
``sys.modules``. Adding ``import simpy`` (or ``time.monotonic()``) to any
policy module makes both fail.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import easerve_core

CORE = Path(easerve_core.__file__).parent
FORBIDDEN_MODULES = {"simpy", "torch", "transformers", "time", "live", "sim", "calibration"}
CLOCK_CALLS = {"time", "monotonic", "perf_counter", "now", "utcnow", "today", "sleep",
               "monotonic_ns", "time_ns", "perf_counter_ns"}


def core_modules():
    return sorted(p for p in CORE.rglob("*.py"))


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FORBIDDEN_MODULES:
                    found.append(f"{path.name}:{node.lineno} import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"{path.name}:{node.lineno} from {node.module}")
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
        "bad = sorted(m for m in ('simpy', 'torch', 'transformers') if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"easerve_core pulled in: {out.stdout.strip()}"
