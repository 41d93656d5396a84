"""Inputs mutated at random (seeded) are refused in one short line, or taken whole: traces, model
specs, shift files, shipped configs (composed and simulated), raw item sizes, GPU specs, models'
config.json and processor files (imported and priced), benchmark result files, ``[live]`` tables,
command lines (a valid one mutated and run: exit 0, or 2 with one line and nothing written), profiles
(loaded, priced and simulated on), the controller's plan tables (run by ``sim --controller``) and
stage samples (fitted), a stand-in engine's benchmark files refit end to end (``calibrate
--from-bench``: exit 0, or 2 with one line and nothing written), and an earlier report's live trial
damaged and judged again (``validate --live-from``) or refit (``calibrate --from-runs``), likewise.

Each finding of the first runs is a case here now: a trace whose header opened a quote printed
the whole file as its column names; spec values divided by zero or filled the host's memory
(``tests/calibration/test_specs.py`` and ``tests/core/test_trace_formats.py`` hold them by name).
The cases run in a child process whose address space is capped, so a regression that allocates
without bound fails the test instead of the machine.
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MEMORY_BYTES = 4 << 30
#: kinds that need more address space: ``recorded`` runs one live trial, whose worker processes
#: (torch) map about 6 GB each before they touch it
MEMORY_BYTES_OF = {"recorded": 8 << 30, "runs": 8 << 30}


def _capped(limit: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.parametrize(("kind", "cases"), [("traces", 1500), ("specs", 300), ("shifts", 1000),
                                             ("configs", 300), ("sizes", 1000), ("gpus", 300),
                                             ("models", 1000), ("bench", 1500), ("live", 1000),
                                             ("cli", 1000), ("profiles", 1000), ("tables", 500),
                                             ("samples", 500), ("refits", 200), ("recorded", 100),
                                             ("runs", 60)])
def test_mutated_inputs_are_refused_in_one_line_or_taken(kind: str, cases: int) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.core.mutation", kind, str(cases), "2026"], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False,
                          preexec_fn=_capped(MEMORY_BYTES_OF.get(kind, MEMORY_BYTES)))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    found = re.search(rf"{kind}: {cases} cases, (\d+) taken, 0 kind\(s\) of failure", done.stdout)
    assert found is not None, done.stdout[-1000:]
    assert 0 < int(found.group(1)) < cases  # the cases reach both outcomes: refused and taken
