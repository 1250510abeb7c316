"""`runtime/` stands alone: no module imports Django, and its modules import each other without a cycle;
`dag/`'s modules do too.

The cycle check reads the import graph with `ast`, relative imports resolved, leaving out
`if TYPE_CHECKING:` blocks (never run). Importing `a.b.c` also runs the package `a.b`, so that is an
edge too. Two graphs: the module-level imports (what Python runs at import time), and those plus the
function-local ones, so that a cycle is not merely hidden by importing inside a function.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def module_names(package: Path) -> dict[str, Path]:
    """{"runtime.providers.base": path, "runtime.providers": .../__init__.py, ...}"""
    names = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_in(tree: ast.Module, *, local: bool):
    """The Import / ImportFrom statements run when the module is imported; with `local`, also those
    inside functions and classes. `if TYPE_CHECKING:` bodies are never run, so never included."""
    pending = list(tree.body)
    while pending:
        statement = pending.pop(0)
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            yield statement
        elif isinstance(statement, ast.If):
            pending.extend(statement.orelse if _is_type_checking(statement.test) else statement.body + statement.orelse)
        elif isinstance(statement, ast.Try):
            pending.extend(statement.body + statement.orelse + statement.finalbody
                           + [line for handler in statement.handlers for line in handler.body])
        elif isinstance(statement, (ast.With, ast.AsyncWith, ast.For, ast.While)):
            pending.extend(statement.body)
        elif local and isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            pending.extend(statement.body)


def imported_modules(name: str, path: Path, statement) -> list[str]:
    """Absolute names of the modules `statement` (in module `name`) imports."""
    if isinstance(statement, ast.Import):
        return [alias.name for alias in statement.names]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    if statement.level:
        base = package.split(".")
        base = base[:len(base) - statement.level + 1]
        target = ".".join(base + ([statement.module] if statement.module else []))
    else:
        target = statement.module
    # `from package import name` imports the submodule `package.name` when there is one.
    return [target] + [f"{target}.{alias.name}" for alias in statement.names]


def import_graph(package: Path, *, local: bool = False) -> dict[str, set[str]]:
    names = module_names(package)
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        edges = set()
        for statement in imports_in(ast.parse(path.read_text()), local=local):
            for target in imported_modules(name, path, statement):
                # the target and the packages above it that are not this module's own ancestors
                parts = target.split(".")
                for end in range(1, len(parts) + 1):
                    prefix = ".".join(parts[:end])
                    if prefix in names and prefix != name and not name.startswith(prefix + "."):
                        edges.add(prefix)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_no_runtime_module_imports_django():
    offenders = []
    for name, path in module_names(ROOT / "runtime").items():
        for node in ast.walk(ast.parse(path.read_text())):  # function-local imports count too
            modules = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            offenders += [f"{name} imports {module}" for module in modules
                          if module == "django" or module.startswith(("django.", "dag"))]
    assert offenders == [], "runtime/ is pure Python (the web half depends on it, never the reverse)"


def test_runtime_has_no_import_cycle():
    cycle = find_cycle(import_graph(ROOT / "runtime"))
    assert cycle is None, f"import cycle in runtime/: {' -> '.join(cycle)}"


def test_no_function_local_import_hides_a_cycle():
    cycle = find_cycle(import_graph(ROOT / "runtime", local=True))
    assert cycle is None, (f"import cycle in runtime/ through a function-local import: {' -> '.join(cycle)}; "
                           "move the name that causes it instead")


@pytest.mark.parametrize("local", [False, True], ids=["module-level", "with-function-local"])
def test_dag_has_no_import_cycle(local):
    cycle = find_cycle(import_graph(ROOT / "dag", local=local))
    assert cycle is None, (f"import cycle in dag/: {' -> '.join(cycle)}; move the name that causes it, or "
                           "hand it in from the module above")


def test_the_cycle_check_sees_relative_imports_and_skips_type_checking_and_local_ones(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from .a import A\n",
        "a.py": "from .sub import b\nA = 1\n",
        "sub/__init__.py": "",
        "sub/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import A\n"
                    "def f():\n    from .. import a\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    assert find_cycle(import_graph(package)) is None
    assert find_cycle(import_graph(package, local=True)) == ["pkg.a", "pkg.sub.b", "pkg.a"]
    (package / "sub" / "b.py").write_text("try:\n    from ..a import A\nexcept ImportError:\n    pass\n")
    assert find_cycle(import_graph(package)) == ["pkg.a", "pkg.sub.b", "pkg.a"]
