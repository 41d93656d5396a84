"""Golden recipes: every engine's files for every case in tests/recipes/cases.py, byte for byte.

To regenerate after a deliberate change, run
``EASERVE_UPDATE_GOLDEN=1 PYTHONPATH=$PWD .venv/bin/python -m pytest -q tests/recipes/test_golden.py``
and review the diff under tests/recipes/golden/<engine>/<case>/.

Each file is stored as its name plus ``.golden`` (``launch.sh.golden``): the
files are expected output, data rather than source, so the ending keeps tools
that read source (linters, the duplicate counter) off them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.recipes.cases import CASES, ENGINE_NAMES, case_recipe

GOLDEN = Path(__file__).parent / "golden"
UPDATE_ENV = "EASERVE_UPDATE_GOLDEN"
SUFFIX = ".golden"


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_recipe_matches_golden(engine: str, case: str) -> None:
    recipe = case_recipe(engine, case)
    folder = GOLDEN / engine / case
    if os.environ.get(UPDATE_ENV, "") not in ("", "0"):
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.iterdir():
            stale.unlink()
        for name, text in recipe.files.items():
            (folder / f"{name}{SUFFIX}").write_text(text)
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{name}{SUFFIX}" for name in recipe.files)
    for name, text in recipe.files.items():
        golden = (folder / f"{name}{SUFFIX}").read_text()
        assert golden == text, f"{engine}/{case}/{name} differs from its golden file"
