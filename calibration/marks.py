"""Marked spec files: every number beside its source and a mark (V read in a source, D derived,
G guess; docs/profiles.md). :func:`read_spec_file` reads one into plain values and a provenance
map, the way :mod:`calibration.specs` loads model and GPU specs and ``easerve gpu import`` checks
a file; :func:`strip_marks` does it for a table already in memory (the model importer).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def strip_marks(node: Any, path: str, provenance: dict[str, str]) -> Any:
    """Replace every ``{"value", "mark", "source"}`` leaf by its value, noting the source."""
    if isinstance(node, Mapping):
        if "value" in node and "mark" in node:
            if node["mark"] not in ("V", "D", "G"):
                raise ValueError(f"{path}: mark must be V, D or G, got {node['mark']!r}")
            provenance[path] = f"[{node['mark']}] {node.get('source', '')}"
            return node["value"]
        return {k: strip_marks(v, f"{path}.{k}" if path else k, provenance)
                for k, v in node.items() if k != "marks"}
    return node


def read_spec_file(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """(plain values, provenance) of one marked spec file; a file that is not JSON is a ValueError."""
    try:
        raw = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"spec {path} is not JSON: {exc}") from None
    if not isinstance(raw, Mapping):
        raise ValueError(f"spec {path} is not a JSON object")
    provenance: dict[str, str] = {}
    return strip_marks(raw, "", provenance), provenance
