"""The README is a front door and the docs site builds: length, links, quick-start commands, nav, strict build.

Needs only pytest (mkdocs for the build test, which skips without it). mkdocs.yml's nav is read as text: every
`name: page.md` entry under `nav:`.
"""
from __future__ import annotations

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
