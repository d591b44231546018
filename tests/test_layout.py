"""
The package's shape: imports among jsonrpc_app's modules point one way (no
cycle, counting imports inside functions and under ``if TYPE_CHECKING:`` too),
and no module grows past the size one reader can hold.

Print the import graph with:
    python -m tests.test_layout
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jsonrpc_app"

# A module longer than this is doing more than one job (issue 12).
MAX_LINES = 600


def _module_name(path, package):
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(package=PACKAGE):
    return {
        _module_name(path, package): path
        for path in sorted(package.rglob("*.py"))
        if "migrations" not in path.parts
    }


def _resolve(module, is_package, node):
    """The absolute module names an ImportFrom/Import node names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".")
        if not is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    # "from . import x" and "from .pkg import name" may name submodules.
    return [prefix] + ["%s.%s" % (prefix, alias.name) for alias in node.names]


def import_graph(package=PACKAGE):
    """{module: sorted modules of the package it imports, at any depth of its code}."""
    modules = _modules(package)
    graph = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        targets = set()
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for name in _resolve(module, path.name == "__init__.py", node):
                if name in modules and name != module:
                    targets.add(name)
        graph[module] = sorted(targets)
    return graph


def _cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
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
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def _without_package_inits(graph):
    # A package's __init__ importing its own submodules (to re-export them)
    # and a submodule importing a sibling through the package are one arrow
    # pointing down, not a cycle; everything else counts.
    return {
        module: [t for t in targets if not module.startswith(t + ".")]
        for module, targets in graph.items()
    }


def test_no_import_cycle_among_the_packages_modules():
    assert _cycles(_without_package_inits(import_graph())) == []


def test_an_import_inside_a_function_or_for_type_checkers_that_closes_a_circle_is_a_cycle(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .low import x\n")
    (package / "low.py").write_text("def f():\n    from .sub import high\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "high.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from .. import low\n"
        "if TYPE_CHECKING:\n    from .. import other\n"
        "def g():\n    from ..low import f\n"
    )
    (package / "other.py").write_text("from .sub import high\n")
    graph = _without_package_inits(import_graph(package))
    assert graph["pkg.sub.high"] == ["pkg.low", "pkg.other"]
    assert graph["pkg.other"] == ["pkg.sub", "pkg.sub.high"]
    assert _cycles(graph) == [["pkg.low", "pkg.other", "pkg.sub.high"]]


def test_no_module_is_longer_than_one_reader_can_hold():
    long = {
        module: n
        for module, path in _modules().items()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


if __name__ == "__main__":
    for module, targets in _without_package_inits(import_graph()).items():
        print("%s -> %s" % (module, ", ".join(targets) or "(nothing of the package)"))
