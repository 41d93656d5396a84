"""``easerve recipe BEST.toml --engine vllm|sglang|dynamo --out DIR``: the deployment as an engine's recipe.

Reads a config with a ``[deployment]`` table (e.g. the ``best.toml`` that
``easerve search`` writes) and writes the deployment as the engine's launch
commands and configs into ``--out``: ``launch.sh`` (one command per instance,
with ``CUDA_VISIBLE_DEVICES`` and ports, then the proxy or router),
``RECIPE.md`` (the engine version targeted, the knob-by-knob mapping, what has
no equivalent) and, for Dynamo, ``dgd.yaml``. The folder is written whole; an
existing, non-empty one is refused unless ``--force``. See docs/recipes.md.
"""

from __future__ import annotations

import argparse

from easerve.cli.common import add_config, add_force, add_out, command_parser
from easerve.cli.outputs import RunFolder
from easerve.recipes import ENGINES, build_recipe, write_recipe
from easerve.resources import find_config
from easerve_core.config import ExperimentConfig
from runtime.configs import DISK
from runtime.files import read_toml


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "recipe", doc=__doc__, func=run,
                       help="write a config's deployment as a vLLM, SGLang or Dynamo recipe")
    add_config(p, "TOML file with a [deployment] table (e.g. best.toml from easerve search)")
    p.add_argument("--engine", required=True, help=f"the engine: {' | '.join(sorted(ENGINES))}")
    add_out(p, "folder to write the recipe into")
    add_force(p)


def run(args: argparse.Namespace) -> int:
    if args.engine not in ENGINES:
        raise ValueError(f"--engine: unknown engine {args.engine!r}; known: {', '.join(sorted(ENGINES))}")
    path = find_config(args.config)
    data = read_toml(path, what="config")
    if not isinstance(data.get("deployment"), dict) or not data["deployment"]:
        raise ValueError(f"emit: the config has no [deployment] to write ({path})")
    config = ExperimentConfig.from_dict(data, base_dir=path.parent, files=DISK)
    given = config.workload_table.get("rate_hz")  # the target rate best.toml records, if any
    rate = float(given) if isinstance(given, int | float) and not isinstance(given, bool) else None
    # built first (every error before a folder is touched), written whole after
    build_recipe(args.engine, deployment=config.deployment, config=config, rate_hz=rate)
    folder = RunFolder(args.out, force=args.force)
    with folder as staging:
        written = write_recipe(args.engine, deployment=config.deployment, config=config, rate_hz=rate,
                               folder=staging)
    print(f"wrote {args.out}/: {', '.join(sorted(p.name for p in written))}")
    return 0
