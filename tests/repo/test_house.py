"""The house rules that keep the package readable: imports flow one way (no circle between modules, counting imports
inside functions, nor between the package's folders, tasks/ included: isaac_ppo.tasks), the two wings stay apart
(the lab may import the loop, never the reverse; the parts import neither), the top level stays a short list, the loop stays one sitting, no module grows past one concern's size."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "isaac_ppo"
TASKS = ROOT / "tasks"  # shipped as isaac_ppo.tasks
MAX_LINES = 450
MAX_RUNNER_LINES = 250
MAX_TOP_LEVEL_MODULES = 10  # beside its folders: the commands and a few parts every tier uses
LOOP, LAB = "isaac_ppo.loop", "isaac_ppo.lab"
COMMANDS = {"isaac_ppo.train", "isaac_ppo.export"}  # on top: they may import anything


def _module_name(path: Path) -> str:
    if TASKS in path.parents:
        parts = ["isaac_ppo", "tasks", *path.relative_to(TASKS).with_suffix("").parts]
    else:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> Dict[str, Path]:
    files = sorted(PACKAGE.rglob("*.py")) + sorted(TASKS.rglob("*.py"))
    return {_module_name(p): p for p in files}


def _graph() -> Dict[str, Set[str]]:
    modules = _modules()
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


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


def _circles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    circles: List[List[str]] = []

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
    return circles


def test_no_import_circle_in_the_package():
    circles = _circles(_graph())
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def _folder(name: str) -> str:
    """A module's room: its folder under isaac_ppo (isaac_ppo.envs, isaac_ppo.tasks, ...), or the module itself at
    the top level (isaac_ppo.errors)."""
    return ".".join(name.split(".")[:2])


def _folder_graph(graph: Dict[str, Set[str]]) -> Dict[str, Set[str]]:
    folders: Dict[str, Set[str]] = {}
    for name, targets in graph.items():
        here = _folder(name)
        folders.setdefault(here, set()).update(_folder(t) for t in targets if _folder(t) != here)
    for targets in list(folders.values()):
        for target in targets:
            folders.setdefault(target, set())
    return folders


def test_no_import_circle_between_folders():
    """A folder that imports another which imports it back is one room in two places (envs <-> tasks and config
    <-> tasks were, until tasks read their facts from the registry and the domains moved below both)."""
    folders = _folder_graph(_graph())
    assert "isaac_ppo.tasks" in folders and folders["isaac_ppo.tasks"]  # (tasks/ is in the graph, with its edges)
    circles = _circles(folders)
    assert not circles, "circles between folders: " + "; ".join(" -> ".join(c) for c in circles)


def test_the_folder_check_catches_a_circle():
    graph = _graph()
    graph["isaac_ppo.envs.make"] = graph["isaac_ppo.envs.make"] | {"isaac_ppo.tasks.base"}
    assert ["isaac_ppo.envs", "isaac_ppo.tasks", "isaac_ppo.envs"] in _circles(_folder_graph(graph))


def _wing_breaches(graph: Dict[str, Set[str]]) -> List[str]:
    """Imports against the tiers: the loop importing the lab, or a part (anything outside the commands, the loop
    and the lab: agent, envs, scheduler, diagnostics, io, config, tasks, ...) importing the loop or the lab."""
    breaches = []
    for name, targets in graph.items():
        if name in COMMANDS or _in(name, LAB):
            continue
        for target in sorted(targets):
            if _in(target, LAB) or (_in(target, LOOP) and not _in(name, LOOP)):
                breaches.append(f"{name} -> {target}")
    return sorted(breaches)


def test_the_lab_may_import_the_loop_and_nothing_below_imports_up():
    graph = _graph()
    assert any(_in(name, LAB) and any(_in(t, LOOP) for t in targets) for name, targets in graph.items())
    assert not _wing_breaches(graph), _wing_breaches(graph)


def test_the_wing_rule_catches_a_breach():
    """The check itself can fail: a loop module importing the lab, or a part importing the loop, is caught."""
    graph = _graph()
    graph["isaac_ppo.loop.runner"] = graph["isaac_ppo.loop.runner"] | {"isaac_ppo.lab.report"}
    graph["isaac_ppo.agent.ppo"] = graph["isaac_ppo.agent.ppo"] | {"isaac_ppo.loop.build"}
    assert _wing_breaches(graph) == ["isaac_ppo.agent.ppo -> isaac_ppo.loop.build",
                                     "isaac_ppo.loop.runner -> isaac_ppo.lab.report"]


def test_the_top_level_is_a_short_list():
    top = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_the_loop_and_every_module_stay_small():
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    assert sizes["isaac_ppo.loop.runner"] < MAX_RUNNER_LINES, sizes["isaac_ppo.loop.runner"]
    too_big = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not too_big, too_big


def test_every_module_opens_with_what_it_is_for():
    for name, path in _modules().items():
        doc = ast.get_docstring(ast.parse(path.read_text()))
        assert doc and len(doc.splitlines()[0]) > 20, f"{name} has no opening docstring naming its concern"


def test_every_package_ships_in_the_wheel():
    """Every folder with an __init__.py under isaac_ppo/ and tasks/ is in pyproject.toml's packages list: a folder
    left out installs from a checkout in editable mode and is missing from the wheel (a new task family's
    Quadcopter was, until the MuJoCo Warp image's build imported it, 2026-12-04)."""
    import re

    text = (ROOT / "pyproject.toml").read_text()
    listed = set(re.findall(r'"(isaac_ppo[\w.]*)"', text.split("packages = [", 1)[1].split("]", 1)[0]))
    folders = {_module_name(init) for init in list(PACKAGE.rglob("__init__.py")) + list(TASKS.rglob("__init__.py"))}
    assert folders - listed == set(), sorted(folders - listed)
