"""Every flag and environment variable a recipe uses is one read in that engine's own source.

The lists are ``flags_<engine>.txt`` beside this file: a header naming the
source files, repository and commit each flag was read in, then one flag
(``--name``) or environment variable (``env NAME``) a line.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.recipes.cases import CASES, ENGINE_NAMES, case_recipe

HERE = Path(__file__).parent
ENV_WORD = re.compile(r"^([A-Z_][A-Z0-9_]*)=")


def verified(engine: str) -> tuple[set[str], set[str]]:
    """(flags, environment variables) listed in ``flags_<engine>.txt``."""
    flags, env = set(), set()
    for line in (HERE / f"flags_{engine}.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("env "):
            env.add(line.split()[1])
        else:
            flags.add(line.strip())
    return flags, env


def commands(script: str) -> list[list[str]]:
    """The launch script's commands (continuation lines joined), as shell words, control lines left out."""
    joined = script.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "if ", "fi", "set ", "trap ", "PIDS", "wait", "NODE_RANK=")):
            continue
        out.append(shlex.split(line.rstrip("&").strip()))
    return out


def yaml_args(text: str) -> list[str]:
    """Every item of every ``args:`` list in dgd.yaml."""
    out, collecting = [], False
    for line in text.splitlines():
        if line.strip() == "args:":
            collecting = True
        elif collecting and line.strip().startswith("- "):
            out.append(json.loads(line.strip()[2:]))
        else:
            collecting = False
    return out


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_flag_lists_name_their_sources(engine: str) -> None:
    lines = (HERE / f"flags_{engine}.txt").read_text().splitlines()
    header = [line for line in lines if line.startswith("#")]
    text = "\n".join(header)
    assert "Repository: https://github.com/" in text
    assert "@ " in text  # each source file names the commit it was read at


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_every_flag_is_verified(engine: str, case: str) -> None:
    recipe = case_recipe(engine, case)
    flags, env = verified(engine)
    used_flags, used_env = set(), set()
    cmds = commands(recipe.files["launch.sh"])
    assert cmds, "launch.sh has no commands"
    for words in cmds:
        while words and ENV_WORD.match(words[0]):
            used_env.add(ENV_WORD.match(words[0]).group(1))  # type: ignore[union-attr]
            words = words[1:]
        used_flags |= {w for w in words if w.startswith("--")}
    if "dgd.yaml" in recipe.files:
        used_flags |= {w for w in yaml_args(recipe.files["dgd.yaml"]) if w.startswith("--")}
    assert used_flags - flags == set(), f"{engine} flags not in flags_{engine}.txt"
    assert used_env - env == set(), f"{engine} environment variables not in flags_{engine}.txt"
