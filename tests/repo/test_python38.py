"""Python 3.8 compatibility of what the Isaac Gym image imports (isaac_ppo/ and tasks/), and dependency ranges
that admit the releases that exist for Python 3.8.

Isaac Gym Preview 4 runs on Python 3.8 only, so the GPU image (docker/Dockerfile.isaacgym) is Python 3.8 while
development and CI run a newer Python. vermin (PyPI) checks the code against 3.8 in two passes:
- every file, with annotations unevaluated: a module with `from __future__ import annotations` (PEP 563) never
  evaluates them on 3.8, so `list[int]` or `X | None` there is fine;
- with --eval-annotations, the files whose annotations 3.8 does evaluate: modules without that import, and
  modules handing dataclasses to OmegaConf.structured or typing.get_type_hints (they read the annotations).
A small AST check adds what vermin does not see (`list[int]` outside annotations, an alias for instance), and
where a real Python 3.8 is installed every file must compile under it.

The dependency ranges were checked against the index with pip 23.0.1 on Python 3.8.18 (2026-11-21): a dry-run
resolution of `.[video,test]` under torch==2.4.1, numpy==1.23.5 picked hydra-core 1.3.2, omegaconf 2.3.0,
hydra-joblib-launcher 1.2.0, hydra-submitit-launcher 1.2.0 (submitit 1.5.4), matplotlib 3.7.5,
tensorboard 2.14.0, imageio 2.35.1, imageio-ffmpeg 0.5.1, and no mujoco. Those versions are below.
"""
from __future__ import annotations

import ast
import glob
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("isaac_ppo", "tasks")


def sources() -> List[Path]:
    files = sorted(p for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py"))
    assert files, "no sources found"
    return files


def vermin(args: List[str]) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("vermin") is None:
        pytest.fail("vermin is missing: it is a test dependency (PyPI vermin), install it with "
                    "pip install '.[test]' (or pip install vermin)")
    # -t=3.8-: every file must run on 3.8; --violations: report only what breaks that, exit status 1 then;
    # --no-config-file: no setup.cfg or vermin.ini changes the rules; union-types: `X | Y` of types at runtime
    run_vermin = "import sys, vermin; sys.argv[0] = 'vermin'; sys.exit(vermin.main())"  # no `python -m vermin`
    command = [sys.executable, "-c", run_vermin, "-t=3.8-", "--violations", "--no-tips", "--no-config-file",
               "--feature", "union-types", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def analysed(result: subprocess.CompletedProcess) -> int:
    match = re.search(r"Analyzing (\d+) files", result.stdout)
    return int(match.group(1)) if match else (1 if "Analyzing using" in result.stdout else 0)


def test_vermin_finds_nothing_that_needs_more_than_python_38() -> None:
    result = vermin(list(SOURCE_DIRS))
    assert result.returncode == 0, f"code that Python 3.8 cannot run:\n{result.stdout}{result.stderr}"
    assert analysed(result) == len(sources()), result.stdout


def evaluates_annotations(path: Path) -> bool:
    text = path.read_text()
    future = re.search(r"^from __future__ import (\([^)]*|.*)\bannotations\b", text, re.MULTILINE)
    return not future or bool(re.search(r"OmegaConf\.structured|get_type_hints", text))


def test_vermin_on_annotations_that_python_38_evaluates() -> None:
    files = [p for p in sources() if evaluates_annotations(p)]
    assert ROOT / "isaac_ppo" / "config" / "schema.py" in files, "the OmegaConf schemas' annotations are read at runtime"
    result = vermin(["--eval-annotations", *(str(p.relative_to(ROOT)) for p in files)])
    assert result.returncode == 0, f"annotations Python 3.8 cannot evaluate:\n{result.stdout}{result.stderr}"
    assert analysed(result) == len(files), result.stdout


BUILTIN_GENERICS = {"list", "dict", "tuple", "set", "frozenset", "type"}


def runtime_builtin_generics(tree: ast.AST) -> List[int]:
    """Lines subscripting a builtin type (`list[int]`, Python 3.9+) outside annotations."""
    annotations = set()
    for node in ast.walk(tree):
        for child in (getattr(node, "annotation", None), getattr(node, "returns", None)):
            if child is not None:
                annotations.update(id(n) for n in ast.walk(child))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Subscript) and id(node) not in annotations
            and isinstance(node.value, ast.Name) and node.value.id in BUILTIN_GENERICS]


def test_no_builtin_generics_outside_annotations() -> None:
    assert runtime_builtin_generics(ast.parse("A = list[int]\ndef f(x: list[int]) -> dict[str, int]: ...")) == [1]
    problems = {str(p.relative_to(ROOT)): lines for p in sources()
                if (lines := runtime_builtin_generics(ast.parse(p.read_text(), str(p))))}
    assert not problems, f"list[...]/dict[...] evaluated at runtime (Python 3.9+; use typing.List): {problems}"


def python38() -> Optional[str]:
    candidates = [os.environ.get("ISAAC_PPO_PYTHON38"), shutil.which("python3.8"),
                  *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            version = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 8))"],
                                     capture_output=True, text=True, timeout=60)
            if version.stdout.strip() == "True":
                return candidate
    return None


def test_every_file_compiles_under_a_real_python_38() -> None:
    interpreter = python38()
    if interpreter is None:
        pytest.skip("no Python 3.8 interpreter here (python3.8 on PATH, ~/.pyenv, or ISAAC_PPO_PYTHON38); "
                    "the vermin checks above still ran")
    # compile() in memory: no __pycache__ is written into the checkout
    script = (
        "import sys\n"
        "bad = []\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        compile(open(path, encoding='utf-8').read(), path, 'exec', dont_inherit=True)\n"
        "    except SyntaxError as error:\n"
        "        bad.append(f'{path}:{error.lineno}: {error.msg}')\n"
        "print('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([interpreter, "-c", script, *map(str, sources())], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, f"syntax Python 3.8 rejects:\n{result.stdout}{result.stderr}"


# --- dependency ranges ---------------------------------------------------------------------------------------

# The newest release of each dependency that installs on Python 3.8 (the GPU image), with the NGC torch builds
# of the NGC PyTorch tags that have Python 3.8. numpy: Isaac Gym needs < 1.24.
PYTHON38_RELEASES = {
    "torch": ["2.4.1", "1.10.0a0+3fd9dcf", "1.14.0a0+44dac51", "2.0.0a0+1767026"],
    "numpy": ["1.23.5"],
    "hydra-core": ["1.3.2"],
    "omegaconf": ["2.3.0"],
    "tensorboard": ["2.14.0"],
    "matplotlib": ["3.7.5"],
    "hydra-joblib-launcher": ["1.2.0"],
    "hydra-submitit-launcher": ["1.2.0"],
    "imageio": ["2.35.1"],
    "imageio-ffmpeg": ["0.5.1"],
}
EXTRAS_IN_THE_GPU_IMAGE = ("video",)


def project() -> Dict:
    try:
        import tomllib  # Python >= 3.11
    except ImportError:
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            tomllib = None  # type: ignore[assignment]
    if tomllib is not None:
        with open(ROOT / "pyproject.toml", "rb") as f:
            return tomllib.load(f)["project"]
    # without a TOML reader: the installed package's metadata, which pyproject.toml produced
    meta = importlib.metadata.metadata("isaac-ppo")
    requirements = [Requirement(r) for r in importlib.metadata.requires("isaac-ppo") or []]
    extras: Dict[str, List[str]] = {}
    for r in requirements:
        for extra in re.findall(r'extra == "([^"]+)"', str(r.marker or "")):
            extras.setdefault(extra, []).append(f"{r.name}{r.specifier}")
    return {"requires-python": meta["Requires-Python"],
            "dependencies": [str(r) for r in requirements if "extra ==" not in str(r.marker or "")],
            "optional-dependencies": extras}


def environment(python: str) -> Dict[str, str]:
    return {"python_version": python, "python_full_version": f"{python}.0", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "sys_platform": "linux", "platform_system": "Linux",
            "platform_machine": "x86_64", "os_name": "posix", "extra": ""}


def active(requirement: Requirement, python: str) -> bool:
    return requirement.marker is None or requirement.marker.evaluate(environment(python))


def test_requires_python_admits_38() -> None:
    assert Version("3.8.18") in SpecifierSet(project()["requires-python"])


def test_dependency_ranges_admit_the_releases_for_python_38() -> None:
    meta = project()
    requirements = [Requirement(r) for r in meta["dependencies"]]
    for extra in EXTRAS_IN_THE_GPU_IMAGE:
        requirements += [Requirement(r) for r in meta["optional-dependencies"][extra]]
    for requirement in requirements:
        if not active(requirement, "3.8"):
            continue
        name = requirement.name.lower().replace("_", "-")
        assert name in PYTHON38_RELEASES, (
            f"new dependency {requirement}: add the newest release that installs on Python 3.8 to this test")
        for version in PYTHON38_RELEASES[name]:
            # pip accepts an installed pre-release (the NGC torch) for a plain `>=` range
            assert requirement.specifier.contains(version, prereleases=True), (
                f"{requirement} refuses {name} {version}, a release for Python 3.8 (the Isaac Gym image)")


def test_mujoco_is_required_from_python_310_only() -> None:
    requirements = [Requirement(r) for r in project()["dependencies"]]
    mujoco = [r for r in requirements if r.name.lower() == "mujoco"]
    assert len(mujoco) == 1 and mujoco[0].marker is not None, "mujoco with a python_version marker"
    for python in ("3.8", "3.9"):
        assert not active(mujoco[0], python), f"mujoco (Python >= 3.10 only) would be required on {python}"
    for python in ("3.10", "3.11", "3.12", "3.13"):
        assert active(mujoco[0], python), f"the embedded backend needs mujoco on {python}"
    assert mujoco[0].specifier.contains("3.17.0") and not mujoco[0].specifier.contains("3.16.0")
    assert Marker("python_version >= '3.10'").evaluate(environment("3.10"))  # string order would say "3.10" < "3.8"
