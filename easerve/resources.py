"""Files that ship inside the package, and the checkout they may come from.

The example configs live in ``easerve/configs/`` (the repository's
``configs/`` is a link to them), so an installed wheel runs ``easerve
reproduce`` with no checkout. :data:`REPO_ROOT` is the folder that holds the
package; its ``docs/`` (the committed results) exists only in a checkout.
"""

from __future__ import annotations

from pathlib import Path

from calibration.sizes import resolve_sizes
from easerve_core.checks import notice
from easerve_core.config import ExperimentConfig
from runtime.configs import load_experiment

#: the example configs shipped with the package
CONFIGS_DIR = Path(__file__).resolve().parent / "configs"
#: the folder holding the package: the repository root in a checkout
REPO_ROOT = Path(__file__).resolve().parents[1]


def config_path(name: str) -> Path:
    """A shipped example config by file name (``llava34b_rtx6000ada.toml``; a ``configs/`` prefix is ok)."""
    path = CONFIGS_DIR / Path(name).name
    if not path.is_file():
        known = ", ".join(sorted(p.name for p in CONFIGS_DIR.glob("*.toml")))
        raise ValueError(f"no shipped config {name!r}; known: {known}")
    return path


def find_config(path: str | Path) -> Path:
    """``path`` if it exists; else the shipped example of that file name (``easerve sim NAME.toml``
    works from any folder once the package is installed); else a one-line error listing them."""
    given = Path(path)
    if given.exists():
        return given
    name = given.name if given.suffix else f"{given.name}.toml"
    if given.parent == Path(".") and (CONFIGS_DIR / name).is_file():
        return CONFIGS_DIR / name
    known = ", ".join(sorted(p.name for p in CONFIGS_DIR.glob("*.toml")))
    raise ValueError(f"config file not found: {given}; known shipped examples: {known}")


def load_config(path: str | Path, *, runs_deployment: bool = False) -> ExperimentConfig:
    """:func:`runtime.configs.load_experiment` on :func:`find_config`'s file.

    ``runs_deployment``: the command runs the config's own deployment, so a
    config without ``[deployment]`` gets a notice that the defaults run
    (docs/cli.md); commands that search deployments leave it False. Raw item
    sizes in ``[workload]`` come back as LM tokens of the config's model
    (:func:`calibration.sizes.resolve_sizes`).
    """
    config = resolve_sizes(load_experiment(find_config(path)))
    if runs_deployment and not config.deployment_given:
        notice(f"{path}: no [deployment] table; running the default deployment {config.deployment.label()}")
    return config
