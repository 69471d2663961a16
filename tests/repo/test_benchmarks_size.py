"""benchmarks/ stays light to clone: what the next commit holds there sums under 10 MB, and no file is held twice.

What is measured is what the next commit would hold under benchmarks/: the paths `git ls-files` lists there that are
still on disk (a file removed but not yet committed is not counted), plus the untracked files git does not ignore
there (what `git add benchmarks` would bring), each at its size in the working tree. What grows it: report figures
(recompress a PNG in place, e.g. `pngquant 64 --strip`, same name and pixel size), logs nothing reads by name (xz
them: NAME.jsonl.xz), a file two studies share (keep one, point the other study's config at it). Needs git and a
checkout (.git): skips in an sdist or an unpacked wheel.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDER = "benchmarks"
LIMIT_BYTES = 10 * 1000 * 1000  # 10 MB: decimal megabytes (10,000,000 bytes), not MiB
HASHED_FROM_BYTES = 100 * 1000  # copies are looked for among files of 100 kB and more (the ones that weigh)
LARGEST_SHOWN = 10


def _git_paths(root: Path, *options: str) -> List[str]:
    done = subprocess.run(["git", "ls-files", "-z", *options, "--", FOLDER], cwd=root, capture_output=True,
                          timeout=120)
    if done.returncode != 0:
        pytest.skip(f"git ls-files failed here ({done.stderr.decode(errors='replace').strip()})")
    return [os.fsdecode(p) for p in done.stdout.split(b"\0") if p]


def next_commit_files(root: Path) -> Dict[str, int]:
    """Path (relative to root, '/'-separated) -> size in bytes of each file the next commit would hold under
    benchmarks/: tracked and still on disk, or untracked and not ignored. A symbolic link counts as git stores it
    (its target's name); a folder (a submodule's gitlink) is not a file."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the files git tracks cannot be listed")
    if not (root / ".git").exists():  # (a folder, or a file in a worktree)
        pytest.skip(f"{root} is not a git checkout (an sdist or an unpacked wheel): no tracked files to measure")
    sizes: Dict[str, int] = {}
    for rel in _git_paths(root) + _git_paths(root, "--others", "--exclude-standard"):
        try:
            status = os.lstat(root / rel)
        except FileNotFoundError:
            continue  # removed from the working tree, its removal not yet committed
        if stat.S_ISREG(status.st_mode) or stat.S_ISLNK(status.st_mode):
            sizes[rel] = status.st_size
    return sizes


def copies(root: Path, sizes: Dict[str, int], smallest: int = HASHED_FROM_BYTES) -> List[List[str]]:
    """Groups of two or more files of at least `smallest` bytes with the same content (sha256; only files of one
    size are hashed against each other)."""
    by_size: Dict[int, List[str]] = defaultdict(list)
    for rel, size in sizes.items():
        if size >= smallest and not os.path.islink(root / rel):
            by_size[size].append(rel)
    groups = []
    for same_size in by_size.values():
        if len(same_size) < 2:
            continue
        by_hash: Dict[str, List[str]] = defaultdict(list)
        for rel in same_size:
            by_hash[hashlib.sha256((root / rel).read_bytes()).hexdigest()].append(rel)
        groups += [sorted(group) for group in by_hash.values() if len(group) > 1]
    return sorted(groups)


def test_the_files_under_benchmarks_sum_under_10_mb():
    sizes = next_commit_files(ROOT)
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda item: (-item[1], item[0]))[:LARGEST_SHOWN]
    shown = "\n".join(f"  {size:>12,}  {rel}" for rel, size in largest)
    assert total < LIMIT_BYTES, (
        f"{FOLDER}/ holds {total:,} bytes in {len(sizes)} files, {total - LIMIT_BYTES:,} over the limit of "
        f"{LIMIT_BYTES:,} bytes (10 MB, decimal); its {len(largest)} largest:\n{shown}\n"
        "(see this module's docstring for what shrinks it)")


def test_no_two_files_under_benchmarks_are_byte_identical():
    sizes = next_commit_files(ROOT)
    found = copies(ROOT, sizes)
    assert not found, (f"files under {FOLDER}/ held twice (each group byte-identical; keep one and point the other "
                       "reader at it): " + "; ".join(", ".join(group) for group in found))


def test_the_measure_counts_what_the_next_commit_holds(tmp_path):
    """Tracked and on disk: counted; tracked but removed: not; untracked: counted; ignored: not; a copy: found."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True, timeout=60)

    git("init", "-q")
    (tmp_path / FOLDER / "logs").mkdir(parents=True)
    (tmp_path / ".gitignore").write_text(f"/{FOLDER}/ignored.bin\n")
    (tmp_path / FOLDER / "kept.png").write_bytes(b"p" * 300)
    (tmp_path / FOLDER / "removed.png").write_bytes(b"r" * 200)
    (tmp_path / "outside.txt").write_bytes(b"o" * 50)
    git("add", "-A")
    git("commit", "-q", "-m", "x")
    (tmp_path / FOLDER / "removed.png").unlink()
    (tmp_path / FOLDER / "logs" / "new.jsonl").write_bytes(b"n" * 300)
    (tmp_path / FOLDER / "ignored.bin").write_bytes(b"i" * 1000)
    sizes = next_commit_files(tmp_path)
    assert sizes == {f"{FOLDER}/kept.png": 300, f"{FOLDER}/logs/new.jsonl": 300}
    assert copies(tmp_path, sizes, smallest=1) == []
    (tmp_path / FOLDER / "logs" / "new.jsonl").write_bytes(b"p" * 300)
    assert copies(tmp_path, sizes, smallest=1) == [[f"{FOLDER}/kept.png", f"{FOLDER}/logs/new.jsonl"]]
    assert copies(tmp_path, sizes, smallest=301) == []
