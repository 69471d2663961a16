"""The README is a front door and the docs site builds: length, links, quick-start commands, nav, strict build.

Needs only pytest (mkdocs for the build test, which skips without it). mkdocs.yml's nav is read as text: every
`name: page.md` entry under `nav:`.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS_YML = ROOT / "mkdocs.yml"

README_MAX_LINES = 300
QUICK_START = (
    'pip install . && isaac-ppo-train task=Ant profile=cpu',
    'pip install ".[test]" && pytest -n auto',
)

# [text](target) and ![alt](target), target without spaces; an optional "title" after it
LINK = re.compile(r'!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')


def _without_code(text: str) -> str:
    """The text with fenced code blocks and inline code spans removed (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def relative_links(text: str) -> list:
    targets = []
    for target in LINK.findall(_without_code(text)):
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:, ...) or an anchor in the same file
        targets.append(target)
    return targets


def nav_pages(yml: str) -> list:
    """The .md files named in mkdocs.yml's nav: block (text parsing; no YAML library needed)."""
    pages, in_nav = [], False
    for line in yml.splitlines():
        if re.match(r"^nav\s*:", line):
            in_nav = True
            continue
        if in_nav and line.strip() and not line[0].isspace() and not line.lstrip().startswith("-"):
            break  # the next top-level key
        if in_nav:
            m = re.search(r"(?:^\s*-\s*|:\s*)([\w./-]+\.md)\s*$", line)
            if m:
                pages.append(m.group(1))
    return pages


def test_readme_is_at_most_300_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move detail into a page of docs/")


def test_readme_holds_the_two_quick_start_commands_verbatim():
    text = README.read_text(encoding="utf-8")
    for command in QUICK_START:
        assert command in text, f"README.md lost its quick-start command: {command}"


def test_every_relative_link_of_the_readme_resolves_to_a_file():
    links = relative_links(README.read_text(encoding="utf-8"))
    assert links, "no relative link found in README.md: the parser is broken, or the README lost its docs links"
    missing = []
    for target in links:
        path = target.split("#", 1)[0].split("?", 1)[0]
        if path and not (ROOT / path).exists():
            missing.append(target)
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_link_parser_finds_links_and_images_but_not_code():
    text = 'a [doc](docs/a.md#x) and ![img](b.png "t") [web](https://x.org) [here](#top)\n`[no](c.md)`\n' \
           '```\n[no](d.md)\n```\n'
    assert relative_links(text) == ["docs/a.md#x", "b.png"]


def test_every_nav_page_exists_and_every_docs_page_is_in_the_nav():
    pages = nav_pages(MKDOCS_YML.read_text(encoding="utf-8"))
    assert "index.md" in pages, f"mkdocs.yml's nav has no index.md (found {pages})"
    missing = [p for p in pages if not (DOCS / p).is_file()]
    assert not missing, f"mkdocs.yml's nav lists pages that docs/ does not hold: {missing}"
    on_disk = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    omitted = [p for p in on_disk if p not in pages]
    assert not omitted, f"pages of docs/ missing from mkdocs.yml's nav: {omitted}"
    assert len(pages) == len(set(pages)), f"a page is listed twice in the nav: {pages}"


def test_the_architecture_page_names_every_module():
    """docs/architecture.md is the map of the house: a module it does not name is a room a newcomer cannot find.
    Checked by file name inside the page's house block (a name such as common.py stands for each family's)."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    house = text.split("## The house", 1)[1].split("\n## ", 1)[0]
    modules = sorted(path.relative_to(ROOT).as_posix()
                     for package in ("isaac_ppo", "tasks") for path in (ROOT / package).rglob("*.py")
                     if path.name not in ("__init__.py", "__main__.py"))
    assert modules, "no modules found under isaac_ppo/ and tasks/"
    unnamed = [m for m in modules if not re.search(r"(?<![\w.])" + re.escape(Path(m).name), house)]
    assert not unnamed, f"docs/architecture.md's house map does not name: {unnamed}"


ARCHITECTURE = DOCS / "architecture.md"
# a file name as the architecture page writes it: common.py, envs/registry.py, tests/repo/test_house.py
PY_NAME = re.compile(r"(?<![\w./])(\w[\w./]*\.py)\b")
# a call the "One iteration" block names: scheduler.plan(, Runner.step(, ppo.absorb_batch_statistics(
CALL = re.compile(r"\b([A-Za-z_]\w*)\.([A-Za-z_]\w*)\(")


def _code_block_after(text: str, heading: str) -> str:
    """The first fenced code block of the section `heading` (a "## " heading) of a page."""
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]


def _package_files() -> list:
    """Every .py file of isaac_ppo/ and tasks/, relative to its package's folder (envs/registry.py, sim/batch.py)."""
    return sorted(path.relative_to(ROOT / package).as_posix()
                  for package in ("isaac_ppo", "tasks") for path in (ROOT / package).rglob("*.py"))


def missing_modules(text: str, files: list) -> list:
    """The .py names of `text` that name no file: a name resolves to a module of isaac_ppo/ or tasks/ (`files`,
    as _package_files gives them) whose path ends with it (common.py, lab/report/runs.py), or to a file at that path
    from the repository's root (tests/repo/test_house.py, benchmarks/gait_check.py)."""
    missing = []
    for name in sorted(set(PY_NAME.findall(text))):
        if not any(f == name or f.endswith("/" + name) for f in files) and not (ROOT / name).is_file():
            missing.append(name)
    return missing


HOUSE_TOKEN = re.compile(r"(\w[\w.]*)/ \(|(?<![\w./])(\w[\w./]*\.py)\b|[()]")


def misplaced_modules(house: str) -> list:
    """The .py names of the house block not at the place the block gives them: an entry's names sit in its folder
    (`  config/   schema.py, ...`: isaac_ppo/config/schema.py; a top-level `tasks/ ...`: tasks/), a name inside
    `sub/ (...)` in that subfolder (`report/ (runs.py, ...)`: isaac_ppo/lab/report/runs.py); a name with a folder of
    its own (envs/registry.py) is a path from the entry's folder, from isaac_ppo/ or from the repository's root."""
    misplaced = []
    parent = ROOT
    for line, text in _house_entries(house):
        label = line[:21].strip()
        if line.startswith("  ") and label.endswith(".py"):  # a module of isaac_ppo/ itself: `  train.py   ...`
            if not (ROOT / "isaac_ppo" / label).is_file():
                misplaced.append(f"isaac_ppo/{label}")
            continue
        base = (parent if line.startswith("  ") else ROOT) / label
        if not line.startswith("  "):
            parent = base
        folders = [(0, base)]  # (the paren depth a subfolder's names sit at, the folder)
        depth = 0
        for token in HOUSE_TOKEN.finditer(text):
            folder, name = token.group(1), token.group(2)
            if folder:
                depth += 1
                folders.append((depth, folders[-1][1] / folder))
            elif name:
                here = folders[-1][1]
                places = [here / name] + ([ROOT / "isaac_ppo" / name, ROOT / name] if "/" in name else [])
                if not any(place.is_file() for place in places):
                    misplaced.append((here / name).relative_to(ROOT).as_posix())
            elif token.group(0) == "(":
                depth += 1
            else:
                if folders[-1][0] == depth and depth > 0:
                    folders.pop()
                depth -= 1
    return misplaced


def _house_entries(house: str) -> list:
    """The house block's entries as (label line, description): a label in the first 21 columns, its description
    from there on and on the lines indented 21 columns below it (a bare `isaac_ppo/` is an entry with none); `# ...`
    lines skipped."""
    entries = []
    for line in house.splitlines():
        if line[:21].strip() and not line.lstrip().startswith("#"):
            entries.append([line, line[21:]])
        elif line.startswith(" " * 21) and entries:
            entries[-1][1] += " " + line.strip()
    return [(line, text) for line, text in entries]


def _definitions() -> tuple:
    """(every function and method name defined in isaac_ppo/, each class's own method names) by an AST scan."""
    names, methods = set(), {}
    for path in (ROOT / "isaac_ppo").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.ClassDef):
                methods.setdefault(node.name, set()).update(
                    item.name for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return names, methods


def missing_calls(text: str, names: set, methods: dict) -> list:
    """The object.method( calls of `text` whose method is defined nowhere in isaac_ppo/ (a Class.method( call: not
    in that class itself, when the class is one of the package's)."""
    missing = []
    for owner, method in CALL.findall(text):
        known = methods[owner] if owner in methods else names
        if method not in known:
            missing.append(f"{owner}.{method}(")
    return sorted(set(missing))


def test_every_file_the_architecture_page_names_exists():
    """A module renamed or deleted leaves the map pointing at nothing: every .py name on the page (the house block,
    the iteration block, the prose) must be a module of isaac_ppo/ or tasks/, or a file at that path."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    house = _code_block_after(text, "The house")
    assert len(PY_NAME.findall(house)) > 50, "the house block names almost no .py file: the parser or the page broke"
    missing = missing_modules(text, _package_files())
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"
    misplaced = misplaced_modules(house)
    assert not misplaced, f"docs/architecture.md's house block places modules where they are not: {misplaced}"


def test_every_call_of_the_iteration_block_is_defined():
    """The "One iteration" block is the loop as the Runner runs it: each object.method( it names must be a function
    defined in isaac_ppo/ (and a Runner.method( one of the Runner's own)."""
    block = _code_block_after(ARCHITECTURE.read_text(encoding="utf-8"), "One iteration")
    calls = CALL.findall(block)
    assert len(calls) >= 15, f"the iteration block names only {len(calls)} calls: the parser or the page broke"
    assert ("scheduler", "plan") in calls and ("ppo", "update") in calls, calls
    names, methods = _definitions()
    assert "Runner" in methods and "step" in methods["Runner"], "the AST scan found no Runner.step"
    missing = missing_calls(block, names, methods)
    assert not missing, f"docs/architecture.md's iteration block names calls isaac_ppo/ does not define: {missing}"


def test_the_map_checks_can_fail():
    """Each check of the map on pages made to break it: a name of nothing, a module placed in the wrong folder (a
    module that moved: config/domains.py), a call of a method nobody defines (batches.next)."""
    files = ["envs/registry.py", "lab/report/runs.py", "sim/batch.py"]
    text = "registry.py envs/registry.py report/runs.py --batch.py--> sim_batch.py config/domains.py tests/nope.py " \
           "--gone.py-->"
    assert missing_modules(text, files) == ["config/domains.py", "gone.py", "sim_batch.py", "tests/nope.py"]
    assert missing_modules("tests/repo/test_docs.py", []) == []
    house = ("isaac_ppo/\n  errors.py          UserError\n  gone.py            no more\n"
             "  config/            schema.py (typed (dataclasses)), domains.py (moved to isaac_ppo/), files.py\n"
             "  lab/               study.py, report/ (runs.py (folders), groups.py, study.py), tune.py,\n"
             "                     clock.py\n"
             "tasks/               base.py, sim/ (batch.py, warp.py), sim_batch.py, envs/registry.py\n")
    assert misplaced_modules(house) == ["isaac_ppo/gone.py", "isaac_ppo/config/domains.py",
                                        "isaac_ppo/lab/report/study.py", "isaac_ppo/lab/clock.py", "tasks/sim_batch.py"]
    names, methods = {"plan", "take", "step"}, {"Runner": {"step"}}
    text = "plan = scheduler.plan(k); batches.take(k); batches.next(plan); Runner.step(); Runner.take(); evaluator(x)"
    assert missing_calls(text, names, methods) == ["Runner.take(", "batches.next("]


def test_the_nav_parser_reads_nested_entries():
    yml = "site_name: x\nnav:\n  - Home: index.md\n  - Part:\n      - A page: a.md\n      - b/c.md\ntheme:\n  name: mkdocs\n"
    assert nav_pages(yml) == ["index.md", "a.md", "b/c.md"]


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs is not installed (pip install 'isaac-ppo[docs]'; the test extra has it)")
def test_the_site_builds_strictly(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(MKDOCS_YML),
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
