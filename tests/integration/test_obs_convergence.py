"""benchmarks/obs_convergence.py: the same open-loop actions at halving physics steps, one JSON line each."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args: str) -> list:
    done = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "obs_convergence.py"), *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_each_halving_is_one_line_with_the_chosen_columns_and_the_same_actions_give_the_same_figures():
    args = ["Cartpole", "--columns", "0:4", "--timestep", "0.008333", "--substeps", "2", "--halvings", "1",
            "--envs", "4", "--steps", "20", "--integrator", "euler"]
    rows = run(*args)
    assert [(r["timestep"], r["substeps"]) for r in rows] == [(0.008333, 2), (0.0041665, 4)]
    assert all(len(r["mean_abs_obs"]) == 4 and all(math.isfinite(v) for v in r["mean_abs_obs"]) for r in rows)
    assert rows[0]["mean_abs_obs"] != rows[1]["mean_abs_obs"]  # another step, another trajectory
    assert run(*args) == rows  # seeded actions and resets: a rerun measures the same
