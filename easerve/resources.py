"""Files that ship inside the package, and the checkout they may come from.

The example configs live in ``easerve/configs/`` (the repository's
``configs/`` is a link to them), so an installed wheel runs ``easerve
reproduce`` with no checkout. :data:`REPO_ROOT` is the folder that holds the
package; its ``docs/`` (the committed results) exists only in a checkout.
"""

from __future__ import annotations

from pathlib import Path

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
