"""The import structure DESIGN.md asks for: cli -> server -> supervisor -> actors -> simulator ->
providers (server/, the service and its client, never imports cli/), with no module importing
one of an upper layer and no import circle (type-only imports count too).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("providers", "simulator", "actors", "supervisor", "server", "cli")


def module_name(path: Path) -> str:
    """The name `path` is imported by, under the import root: `grove.providers.base`."""
    parts = ["grove", *path.relative_to(ROOT).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    """`providers` for `grove.providers.base`."""
    return module.split(".")[1]


def project_modules() -> dict[str, Path]:
    return {module_name(path): path for layer in LAYERS for path in (ROOT / layer).rglob("*.py")}


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules `path` imports anywhere in it (top level, functions, TYPE_CHECKING)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module in modules and node.level == 0:
            # `from package import submodule` imports the submodule, not the package's names.
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
    return found


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Read once for the tests below, which only look at it."""
    modules = project_modules()
    return {name: frozenset(imports_of(path, modules) - {name}) for name, path in modules.items()}


def circles(graph: Mapping[str, AbstractSet[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles() -> None:
    assert circles(import_graph()) == []


def test_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_lower_layers_never_import_upper_ones() -> None:
    rank = {layer: position for position, layer in enumerate(LAYERS)}
    upward = [
        f"{source} imports {target}"
        for source, targets in import_graph().items()
        for target in targets
        if rank[layer_of(target)] > rank[layer_of(source)]
    ]
    assert upward == []


def test_the_service_never_imports_the_command_line() -> None:
    graph = import_graph()
    served = {name: targets for name, targets in graph.items() if layer_of(name) == "server"}
    assert served, "server/ was not scanned"
    assert [
        f"{source} imports {target}"
        for source, targets in served.items()
        for target in targets
        if layer_of(target) == "cli"
    ] == []
