"""The package's modules import each other one way: data -> sim -> environment -> policy -> training.

Every import counts, wherever it is written: at module level, inside a function, or under
``if TYPE_CHECKING:``; a cycle among any of them fails.
"""
from __future__ import annotations

import ast
from pathlib import Path

import ppo_training

PACKAGE_DIR = Path(ppo_training.__file__).resolve().parent
PACKAGE = "ppo_training"


def module_names() -> dict[str, Path]:
    """``dotted name -> file`` for every module of the package (``pkg/__init__.py`` is ``pkg``)."""
    out = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of the package that ``name`` imports anywhere in its source.

    ``from X import y`` is an edge to ``X.y`` when that is a module, else to ``X``; parent
    packages that Python initialises on the way are not counted.
    """
    is_pkg = path.name == "__init__.py"
    package = name.split(".") if is_pkg else name.split(".")[:-1]
    deps: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            deps |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in modules:
                    deps.add(sub)
                elif target in modules:
                    deps.add(target)
    deps.discard(name)
    return deps


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as ``[a, b, ..., a]``, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for root in sorted(graph):
        if state.get(root):
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_graph_sees_function_level_and_type_checking_imports(tmp_path):
    # The checker itself: a cycle hidden in a function or under TYPE_CHECKING is still a cycle.
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    probe = tmp_path / "a.py"
    probe.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import X\n"
                     "def f():\n    from ppo_training.c import Y\n")
    modules = {"ppo_training.sim.a": probe, "ppo_training.sim.b": probe, "ppo_training.c": probe}
    assert imports_of("ppo_training.sim.a", probe, modules) == {"ppo_training.sim.b", "ppo_training.c"}


def test_graph_covers_the_package():
    graph = import_graph()
    assert {"ppo_training.sim.engine", "ppo_training.controllers.base", "ppo_training.training",
            "ppo_training.controllers.policy"} <= set(graph)
    assert "ppo_training.sim.control" in graph["ppo_training.sim.engine"]


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_engine_does_not_import_controllers():
    graph = import_graph()
    engine_side = {m for m in graph if m.startswith("ppo_training.sim")}
    for m in engine_side:
        bad = {d for d in graph[m] if d.startswith("ppo_training.controllers")}
        assert not bad, f"{m} imports {bad}"
