"""The answer as a recipe: a chosen deployment written as a serving engine's launch commands and configs.

:data:`ENGINES` is the one table of engines (``dynamo``, ``sglang``,
``vllm``); :func:`build_recipe` builds a :class:`Recipe` (file name -> text)
with no I/O, and :func:`write_recipe` writes it into a folder the caller
made. Every recipe has a ``launch.sh`` (one command per instance, with
``CUDA_VISIBLE_DEVICES`` and ports, then the proxy or router) and a
``RECIPE.md`` (the engine version, the knob-by-knob mapping and what has no
equivalent); Dynamo's adds ``dgd.yaml``. The text is deterministic: no
dates, no paths of this machine. Engine flags and their sources:
docs/recipes.md.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from easerve.recipes import dynamo, sglang, vllm
from easerve.recipes.common import Recipe, Topology, topology
from easerve_core.config import ExperimentConfig
from easerve_core.deployment import Deployment

__all__ = ["ENGINES", "Recipe", "build_recipe", "write_recipe"]

#: engine name -> the function that writes its recipe from the laid-out deployment
ENGINES: dict[str, Callable[[Topology], Recipe]] = {
    "dynamo": dynamo.build,
    "sglang": sglang.build,
    "vllm": vllm.build,
}


def _engine(engine: str) -> Callable[[Topology], Recipe]:
    if engine not in ENGINES:
        raise ValueError(f"emit: unknown engine {engine!r}; known: {', '.join(sorted(ENGINES))}")
    return ENGINES[engine]


def build_recipe(engine: str, *, deployment: Deployment, config: ExperimentConfig,
                 rate_hz: float | None) -> Recipe:
    """The recipe of ``deployment`` (on ``config``'s cluster and model) for ``engine``; no I/O.

    ``rate_hz`` is the target rate the deployment was chosen for (None: the
    deployment's ``rate_hint_hz``). Raises ``ValueError`` naming the field:
    an unknown engine, an aggregated deployment, a deployment that does not
    fit the cluster.
    """
    build = _engine(engine)
    return build(topology(deployment, config, rate_hz))


def write_recipe(engine: str, *, deployment: Deployment, config: ExperimentConfig, rate_hz: float | None,
                 folder: Path) -> list[Path]:
    """Build the recipe (validating everything first), then write its files into ``folder``.

    Returns the paths written.

    ``folder`` must exist (the caller creates it, e.g. a
    :class:`easerve.cli.outputs.RunFolder` staging folder); each file is
    written whole.
    """
    recipe = build_recipe(engine, deployment=deployment, config=config, rate_hz=rate_hz)
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"emit: folder {folder} is not an existing folder")
    written = []
    for name, text in recipe.files.items():
        path = folder / name
        path.write_text(text)
        if name.endswith(".sh"):
            path.chmod(0o755)
        written.append(path)
    return written
