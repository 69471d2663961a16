"""The suite's own machinery: tests of one xdist_group run on one worker (pyproject.toml's --dist loadgroup), which
the suite leans on (MuJoCo Warp's kernels compiled once per machine, rl-games' module fixtures trained once). From
pytest 9.2 pytest-xdist groups nothing and says nothing (its issue 1386): this test makes that loud."""
from __future__ import annotations

import os
import re
import subprocess
import sys

GROUPED = '''
import os
import pytest

@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    with open(os.path.join(os.environ["WHERE"], f"{i}"), "w") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"])
'''


def test_an_xdist_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    where = tmp_path / "where"
    where.mkdir()
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q", "-p",
                           "no:cacheprovider", "test_grouped.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "WHERE": str(where)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b6 passed", done.stdout), done.stdout
    workers = {path.read_text() for path in where.iterdir()}
    assert len(workers) == 1, (f"one xdist_group ran on {sorted(workers)}: "
                               "is pytest >= 9.2 installed (xdist issue 1386)?")
