"""Repack study archives with each JSONL row's floats written at 9 significant digits, what float32 needs to come
back exact: the learner's statistics are float32 tensors, printed by json at double precision (17 digits), whose
last 8 are noise of the conversion that xz cannot compress. A float64 quantity (a mean over episodes) keeps 9
digits, 5 more than any report prints. Everything else in the pack stays byte for byte (members, order, metadata:
isaac_ppo/lab/archive.py writes it).

  python benchmarks/slim_archives.py benchmarks/studies/**/*.tar.xz

Run on 2026-12-04 over every archive under benchmarks/studies/ (issue 84: benchmarks/ under 10 MB): 6.76 MB ->
4.47 MB; every study's report regenerated from the slimmed packs has the same tables, byte for byte, as from the
full packs, and its JSON the same numbers to 4.3e-7 of their value (benchmarks/history/studies.md, "The archives
slimmed").
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any

from isaac_ppo.lab import archive

DIGITS = 9  # float32's round-trip precision


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.{DIGITS}g}")
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


def slim_rows(data: bytes) -> bytes:
    """A JSONL file's rows with their floats at DIGITS significant digits, key order kept."""
    rows = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    return "".join(json.dumps(_rounded(row)) + "\n" for row in rows).encode()


def slim(pack: str) -> tuple:
    files = archive.read(pack)
    before = os.path.getsize(pack)
    archive.write(pack, {name: slim_rows(data) if name.endswith(".jsonl") else data for name, data in files.items()})
    return before, os.path.getsize(pack)


def main(paths: list) -> int:
    total = [0, 0]
    for path in paths:
        before, after = slim(path)
        total[0] += before
        total[1] += after
        print(f"{before:>9} -> {after:>9}  {path}")
    print(f"{total[0]:>9} -> {total[1]:>9}  in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
