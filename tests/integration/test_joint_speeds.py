"""benchmarks/joint_speeds.py: a task's hinge and slide joints measured under bang-bang actions, against a limit,
one JSON line each; a limit no joint reaches counts no step past it, one every moving joint passes counts nearly
all."""
from __future__ import annotations

from helpers import benchmark_lines


def run(*args: str) -> list:
    return benchmark_lines("joint_speeds.py", *args)


def test_bang_bang_on_cartpole_measures_its_two_joints_against_the_limit():
    slow, fast = (run("Cartpole", "--bang-bang", "1", "4", "--envs", "8", "--steps", "40", "--limit", limit)
                  for limit in ("1000", "1e-6"))
    assert [r["source"] for r in slow] == ["bang-bang, period 1", "bang-bang, period 4"]
    assert all(r["joints"] == 2 for r in slow)  # the cart's slide and the pole's hinge
    for r in slow:
        low, median, high = r["peak_per_env_p10_p50_p90"]
        assert 0 < low <= median <= high <= r["peak_max"] < 1000 and r["joint_steps_past_limit"] == 0
    # the same seeded actions against a limit every moving joint passes: the same peaks, nearly every joint-step
    assert [r["peak_max"] for r in fast] == [r["peak_max"] for r in slow]
    assert all(r["joint_steps_past_limit"] > 0.9 for r in fast)
