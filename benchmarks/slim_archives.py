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

  python benchmarks/slim_archives.py --every 32 benchmarks/studies/anymal_cpu/confirm_30.tar.xz

--every N also thins each run's metrics.jsonl to every Nth training row, keeping every row that holds an
evaluation or a diagnostics probe and the run's last row: a long run of small iterations (Anymal at 256 x 16 logs
~3 rows a second, ~8,000 in 45 minutes) then carries its curves, every evaluation and its end (the figures a report
reads) at an Nth of the bytes; a kept row carries the collection and update seconds and divergences of the rows
dropped before it, so where-the-time-went sums stay whole. Training curves from a thinned pack are sampled every N
iterations. A run already thinned (its rows skip iterations) is left at its rows: a study appends each new run's
full rows to its archive, and thinning the pack again must thin that run only, not the others a second time
(issue 87's FrankaCubeStack pack was, once: its runs rebuilt from their folders, 2026-12-06).
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any

from isaac_ppo.lab import archive
from isaac_ppo.lab.report.clock import thinned

DIGITS = 9  # float32's round-trip precision


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.{DIGITS}g}")
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


def slim_rows(data: bytes, every: int = 1) -> bytes:
    """A JSONL file's rows with their floats at DIGITS significant digits, key order kept; with every > 1 the
    rows isaac_ppo.lab.report.clock.thinned keeps (every Nth, those holding an evaluation or diagnostics, the last,
    each carrying the summed seconds and divergences of the rows dropped before it)."""
    rows = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    if already_thinned(rows):
        every = 1
    return "".join(json.dumps(_rounded(row)) + "\n" for row in thinned(rows, every)).encode()


def already_thinned(rows: list) -> bool:
    """Rows that skip an iteration: a run thinned before (a run's own rows count its iterations one by one)."""
    iterations = [row["iteration"] for row in rows if "iteration" in row]
    return any(later - earlier > 1 for earlier, later in zip(iterations, iterations[1:]))


def slim(pack: str, every: int = 1) -> tuple:
    files = archive.read(pack)
    before = os.path.getsize(pack)
    archive.write(pack, {name: slim_rows(data, every if name.endswith("metrics.jsonl") else 1)
                         if name.endswith(".jsonl") else data for name, data in files.items()})
    return before, os.path.getsize(pack)


def main(argv: list) -> int:
    every, paths = 1, list(argv)
    if paths[:1] == ["--every"]:
        if len(paths) < 2 or not paths[1].isdigit() or int(paths[1]) < 1:
            print("slim_archives.py: --every takes a whole number of rows, 1 or more (8: every 8th training row)",
                  file=sys.stderr)
            return 2
        every, paths = int(paths[1]), paths[2:]
    missing = [path for path in paths if not path.endswith(archive.SUFFIX) or not os.path.isfile(path)]
    if not paths or missing:
        print(f"slim_archives.py: {missing[0] if missing else 'no archive named'}: name study archives "
              f"(NAME{archive.SUFFIX}) that exist", file=sys.stderr)
        return 2
    total = [0, 0]
    for path in paths:
        before, after = slim(path, every)
        total[0] += before
        total[1] += after
        print(f"{before:>9} -> {after:>9}  {path}")
    print(f"{total[0]:>9} -> {total[1]:>9}  in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
