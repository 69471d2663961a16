"""The house rules that keep the package readable: imports flow one way (no circle, counting imports inside
functions), the loop stays one sitting, no module grows past one concern's size."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

PACKAGE = Path(__file__).resolve().parents[2] / "isaac_ppo"
MAX_LINES = 450
MAX_RUNNER_LINES = 250


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> Dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, known: Set[str]) -> Set[str]:
    """The package's modules this one imports, anywhere in it (a function-level import is an edge too)."""
    found: Set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        targets: List[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):  # (a parent package: itself)
                found.add(target)
    return found


def test_no_import_circle_in_the_package():
    modules = _modules()
    graph = {name: _imports(name, path, set(modules)) for name, path in modules.items()}
    circles = []

    def visit(node: str, trail: List[str], done: Set[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt in trail:
                circles.append(trail[trail.index(nxt):] + [nxt])
            elif nxt not in done:
                visit(nxt, trail + [nxt], done)
        done.add(node)

    done: Set[str] = set()
    for name in sorted(graph):
        if name not in done:
            visit(name, [name], done)
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_the_loop_and_every_module_stay_small():
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    assert sizes["isaac_ppo.runner"] < MAX_RUNNER_LINES, sizes["isaac_ppo.runner"]
    too_big = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not too_big, too_big


def test_every_module_opens_with_what_it_is_for():
    for name, path in _modules().items():
        doc = ast.get_docstring(ast.parse(path.read_text()))
        assert doc and len(doc.splitlines()[0]) > 20, f"{name} has no opening docstring naming its concern"
