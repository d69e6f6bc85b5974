"""The house has no import circle: drawn from the source, the imports among
scrapy_neardup's modules (the facade, ``crawler`` and ``dedup``) form no cycle.

The graph is read from each module's syntax tree, not by importing it, and
counts every ``import`` statement wherever it stands: at module level and
inside functions (a function-level import only postpones a circle to the
first call). Imports under ``if TYPE_CHECKING:`` never run, but a reader
follows them as any other: the house is checked with and without them. Not
counted: names given as strings to ``importlib`` (the facade's lazy re-exports,
``jit``'s table of warm-ups): they are looked up on first use, not while
the modules load.

A package's ``__init__`` re-exporting its own submodules counts as an edge
from the package to each child only. Importing ``a.b.c`` also runs the
``__init__`` of ``a`` and ``a.b`` first, but that implicit child -> parent
step is not an edge: ``from . import sibling`` in a child names the sibling
module, not the package around it. (``from .. import name`` where ``name`` is
not a module does import the package, and counts as an edge to it.)

``jit``, which the stages import to ask whether their kernels are ready,
imports none of them: it finds each group's warm-up by name (tested too).

Run as a script to print the graph's cycles:
``.venv/bin/python tests/test_import_graph.py``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections import deque
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# installed package name -> its folder in the repository (pyproject.toml's package-dir)
PACKAGES = {"scrapy_neardup": ROOT / "scrapy_neardup", "scrapy_neardup.crawler": ROOT / "crawler",
            "scrapy_neardup.dedup": ROOT / "dedup"}


def modules(packages: dict[str, Path]) -> dict[str, tuple[Path, bool]]:
    """{dotted module name: (its file, whether it is a package's ``__init__``)}."""
    found: dict[str, tuple[Path, bool]] = {}
    for package, folder in packages.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if "__pycache__" in parts:
                continue
            is_init = parts[-1] == "__init__"
            name = ".".join((package, *(parts[:-1] if is_init else parts)))
            found[name] = (path, is_init)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, type_checking: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of the tree, at any depth; under ``if TYPE_CHECKING:``
    only with ``type_checking``."""
    out: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node.test) and not type_checking:
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def import_graph(packages: dict[str, Path] = PACKAGES, type_checking: bool = False) -> dict[str, set[str]]:
    """{module: the modules of ``packages`` it imports}. O(total source size)."""
    known = modules(packages)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, (path, is_init) in known.items():
        here = name if is_init else name.rpartition(".")[0]  # the package relative imports start from
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path)), type_checking):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                    source = f"{base}.{node.module}" if node.module else base
                else:
                    source = node.module or ""
                # ``from P import x``: the submodule P.x if there is one, else P itself
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source for a in node.names]
            for target in targets:
                while target and target not in known:  # ``import a.b.c`` of a name inside a module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module
    (each holds at least one cycle), by Tarjan's algorithm. O(V + E)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
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
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One shortest cycle through the component's first module (breadth-first), to name in a message."""
    start, inside = component[0], set(component)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(graph[v] & inside):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if w not in came_from:
                came_from[w] = v
                queue.append(w)
    return component


def describe(graph: dict[str, set[str]]) -> list[str]:
    """A line for each circle: its modules, and one cycle through them."""
    return [f"{len(c)} modules: {', '.join(c)}\n    e.g. {' -> '.join(shortest_cycle(graph, c))}"
            for c in strongly_connected(graph)]


def test_the_graph_is_read_from_the_source(tmp_path):
    files = {
        "__init__.py": "from .a import f\nfrom .sub import thing\n",
        "a.py": "import os\nfrom . import b\n\ndef f():\n    from .sub.c import g\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\nelse:\n    import pkg.sub\n",
        "sub/__init__.py": "thing = 1\n",
        "sub/c.py": "from .. import a\nfrom .. import f\nimport pkg.sub.c.g\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    assert import_graph({"pkg": tmp_path}) == {
        "pkg": {"pkg.a", "pkg.sub"},  # a package's re-exports: parent -> child
        "pkg.a": {"pkg.b", "pkg.sub.c"},  # ``from . import b``, and an import inside a function
        "pkg.b": {"pkg.sub"},  # not the import under TYPE_CHECKING, but its ``else``
        "pkg.sub": set(),
        "pkg.sub.c": {"pkg.a", "pkg"},  # a sibling module by name; a name of the package: the package
    }


def test_jit_imports_none_of_the_stages():
    """They import it to ask ``ready``; it finds their warm-ups by name."""
    assert import_graph()["scrapy_neardup.dedup.jit"] == set()


def test_jit_warms_a_group_by_its_name_alone():
    """In a fresh process that imports ``jit`` only, ``warm("store")`` loads
    the store's warm-up module, runs it and marks the group ready."""
    code = textwrap.dedent("""
        import sys
        import scrapy_neardup.dedup.jit as jit
        jit.defer()
        before = [m for m in sys.modules if m.endswith(".warmup")]
        jit.warm("store")
        print(before, jit.ready("store"), jit.ready("fingerprint"), "scrapy_neardup.dedup.store.warmup" in sys.modules)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["[]", "True", "False", "True"]


def test_the_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert shortest_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


@pytest.mark.parametrize("type_checking", [False, True], ids=["run", "read"])
def test_no_module_imports_one_that_imports_it_back(type_checking):
    circles = describe(import_graph(type_checking=type_checking))
    assert not circles, "import circles:\n" + "\n".join(circles)


if __name__ == "__main__":
    graph = import_graph()
    print(f"{len(graph)} modules, {sum(map(len, graph.values()))} imports")
    print("\n".join(describe(graph)) or "no circle")
