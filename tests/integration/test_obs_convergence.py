"""benchmarks/obs_convergence.py: the same open-loop actions at halving physics steps, one JSON line each."""
from __future__ import annotations

import math

from helpers import benchmark_lines


def run(*args: str) -> list:
    return benchmark_lines("obs_convergence.py", *args)


def test_each_halving_is_one_line_with_the_chosen_columns_and_the_same_actions_give_the_same_figures():
    args = ["Cartpole", "--columns", "0:4", "--timestep", "0.008333", "--substeps", "2", "--halvings", "1",
            "--envs", "4", "--steps", "20", "--integrator", "euler"]
    rows = run(*args)
    assert [(r["timestep"], r["substeps"]) for r in rows] == [(0.008333, 2), (0.0041665, 4)]
    assert all(len(r["mean_abs_obs"]) == 4 and all(math.isfinite(v) for v in r["mean_abs_obs"]) for r in rows)
    assert rows[0]["mean_abs_obs"] != rows[1]["mean_abs_obs"]  # another step, another trajectory
    assert run(*args) == rows  # seeded actions and resets: a rerun measures the same
