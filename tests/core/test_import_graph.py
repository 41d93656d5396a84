"""No import circle between first-party modules, not even a type-only one.

The graph is read from the source (``ast``), not from an interpreter: every
``import`` and ``from ... import`` in a module counts, at the top, inside a
function, or under ``if TYPE_CHECKING:`` (a type-only circle still means two
modules that cannot be read, moved or tested one without the other). An edge
``a -> b`` joins two modules of the packages in :data:`PACKAGES`; ``from pkg
import name`` points at ``pkg/name.py`` when that is a module, else at
``pkg/__init__.py``. Importing ``a.b.c`` also runs ``a/__init__`` and
``a/b/__init__``, but those implicit edges are left out: a package's
``__init__`` that re-exports its modules would otherwise close a circle with
every one of them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the first-party packages (``runtime`` once it exists)
PACKAGES = ("easerve_core", "sim", "live", "calibration", "easerve", "runtime")

#: circles left in place, each a frozenset of its modules, with why. Keep it short: break a
#: circle (move the shared piece down, or into a small module of its own) before adding one.
ALLOWED: dict[frozenset[str], str] = {}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        if (ROOT / package / "__init__.py").exists():
            for path in sorted((ROOT / package).rglob("*.py")):
                out[_module_name(path)] = path
    return out


def _targets(node: ast.Import | ast.ImportFrom, here: str, is_package: bool,
             modules: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:  # relative: from the module's package, up level - 1 more
        package = here.split(".") if is_package else here.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([base] if base else [])])
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        yield sub if sub in modules else base


def import_graph() -> dict[str, set[str]]:
    """Each first-party module and the first-party modules it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges.update(t for t in _targets(node, name, is_package, modules) if t in modules)
        edges.discard(name)
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each strongly connected component of more than one module (Tarjan).

    A component is a tangle of modules that all reach each other; breaking the circle shown
    may leave a smaller one in it, which the next run shows."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:  # recursion depth is bounded by the module count
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_one_circle(graph, component) for component in found]


def _one_circle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest circle through the component's first module (breadth-first), first module repeated."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in parents:
                    parents[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no circle in {sorted(component)}")


def test_no_import_circle_between_first_party_modules() -> None:
    graph = import_graph()
    assert len(graph) > 100  # the scan found the packages
    found = [c for c in circles(graph) if frozenset(c) not in ALLOWED]
    assert not found, "import circles, one per tangle (break them; tests/core/test_import_graph.py):\n" + \
        "\n".join(" -> ".join(c) for c in found)


def test_the_allow_list_holds_only_circles_that_still_exist() -> None:
    present = {frozenset(c) for c in circles(import_graph())}
    assert set(ALLOWED) <= present, "a circle in ALLOWED is gone: take it off the list"


def test_the_scan_sees_a_type_only_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c", "a"]]
    tree = ast.parse("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from easerve_core import deployment\n")
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0
                and n.module == "easerve_core")
    assert list(_targets(node, "easerve_core.placement", False, _modules())) == ["easerve_core.deployment"]
