"""benchmarks/slim_archives.py: a study archive repacked with its rows' floats at float32's round-trip digits and,
with --every N, each run's metrics.jsonl thinned to every Nth training row, every evaluation row and the last row
kept; other members byte for byte; bad arguments one line and exit 2, the pack untouched."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from isaac_ppo.lab import archive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "slim_archives.py")
EVALUATED = (5, 13)


def rows(n: int) -> bytes:
    lines = []
    for i in range(n):
        row = {"iteration": i, "env_steps": 4096 * (i + 1), "kl": 0.1 + i / 3,  # i / 3: 17 digits printed
               "collect_s": 0.25, "update_s": 0.125, "diverged": i % 3}
        if i in EVALUATED:
            row["eval"] = {"return_mean": 30.0 + i / 7, "env_steps": 4096 * (i + 1)}
        lines.append(json.dumps(row))
    return ("\n".join(lines) + "\n").encode()


def a_pack(tmp_path) -> str:
    pack = str(tmp_path / "study.tar.xz")
    archive.write(pack, {"arm/seed_0/metrics.jsonl": rows(20),
                         "arm/seed_0/metrics.json": b'{"kl": 0.3333333333333333}',
                         "arm/seed_0/.hydra/overrides.yaml": b"- seed=0\n"})
    return pack


def slim(*args: str):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, cwd=ROOT)


def test_every_keeps_each_nth_row_every_evaluation_and_the_last(tmp_path):
    pack = a_pack(tmp_path)
    done = slim("--every", "4", pack)
    assert done.returncode == 0, done.stderr
    files = archive.read(pack)
    kept = [json.loads(line) for line in files["arm/seed_0/metrics.jsonl"].decode().splitlines()]
    assert [row["iteration"] for row in kept] == [0, 4, 5, 8, 12, 13, 16, 19]
    assert [row["iteration"] for row in kept if "eval" in row] == list(EVALUATED)
    # a kept row carries the dropped rows' seconds and divergences before it: the sums a report takes stay whole
    assert sum(row["collect_s"] for row in kept) == 20 * 0.25
    assert sum(row["update_s"] for row in kept) == 20 * 0.125
    assert sum(row["diverged"] for row in kept) == sum(i % 3 for i in range(20))
    assert kept[1]["collect_s"] == 4 * 0.25  # iteration 4's own, and 1, 2 and 3's
    assert kept[1]["kl"] == float(f"{0.1 + 4 / 3:.9g}") != 0.1 + 4 / 3  # rounded to 9 significant digits
    assert kept[2]["eval"]["return_mean"] == float(f"{30.0 + 5 / 7:.9g}")
    # what is not a JSONL file stays byte for byte
    assert files["arm/seed_0/metrics.json"] == b'{"kl": 0.3333333333333333}'
    assert files["arm/seed_0/.hydra/overrides.yaml"] == b"- seed=0\n"


def test_a_run_thinned_before_is_not_thinned_again(tmp_path):
    """A study appends a new run's full rows to a thinned archive: --every again thins the new run only."""
    pack = a_pack(tmp_path)
    assert slim("--every", "4", pack).returncode == 0
    files = archive.read(pack)
    first = files["arm/seed_0/metrics.jsonl"]
    files["arm/seed_1/metrics.jsonl"] = rows(20)
    archive.write(pack, files)
    assert slim("--every", "4", pack).returncode == 0
    again = archive.read(pack)
    assert again["arm/seed_0/metrics.jsonl"] == first
    assert [json.loads(line)["iteration"] for line in again["arm/seed_1/metrics.jsonl"].decode().splitlines()] == [
        0, 4, 5, 8, 12, 13, 16, 19]


def test_without_every_every_row_stays(tmp_path):
    pack = a_pack(tmp_path)
    assert slim(pack).returncode == 0
    kept = archive.read(pack)["arm/seed_0/metrics.jsonl"].decode().splitlines()
    assert [json.loads(line)["iteration"] for line in kept] == list(range(20))


def test_bad_arguments_say_one_line_and_leave_the_pack(tmp_path):
    pack = a_pack(tmp_path)
    before = open(pack, "rb").read()
    for args in (["--every", "0", pack], ["--every", "x", pack], [str(tmp_path / "absent.tar.xz")], []):
        done = slim(*args)
        assert done.returncode == 2, args
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert open(pack, "rb").read() == before
