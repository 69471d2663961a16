"""A study's gait table and flag (isaac_ppo/lab/gait.py) for a task measured otherwise than by its torso: Anymal's
base speed flags a run past 1.5x the median run's (and past 0.1 m/s); BallBalance, without a speed, is tabled and never flagged."""
from __future__ import annotations

from isaac_ppo.lab.gait import flagged, write_table


def anymal(speed: float) -> dict:
    return {"task": "Anymal", "envs": 64, "steps": 1000, "base_planar_speed_p50_p90_p99": [speed, speed + 0.2, 2.0],
            "base_planar_speed_mean": speed, "tracking_error_xy_mps_mean": 0.2, "yaw_rate_error_radps_mean": 0.1,
            "reward_per_step_mean": 0.025, "terminal_contact_env_fraction": 0.1, "diverged": 0}


def test_anymal_runs_are_flagged_by_their_base_speed_and_tabled_by_every_measure(tmp_path):
    checked = {"a/seed_0": anymal(1.0), "a/seed_1": anymal(1.1), "b/seed_0": anymal(0.9), "b/seed_1": anymal(2.0)}
    records = {folder: {"arm": folder.split("/")[0], "seed": int(folder[-1])} for folder in checked}
    assert flagged(checked) == ["b/seed_1"]  # (2.0 > 1.5 x the median 1.05)
    table = open(write_table(records, checked, str(tmp_path))).read()
    assert "| arm | seed | base_planar_speed_p50_p90_p99 | base_planar_speed_mean | tracking_error_xy_mps_mean |" in table
    assert "| b | 1 | 2 / 2.2 / 2 | 2 | 0.2 | 0.1 | 0.025 | 0.1 | 0 | **flagged** |" in table
    assert "| a | 0 | 1 / 1.2 / 2 | 1 |" in table and table.count("**flagged**") == 1


def test_robots_that_stand_are_not_flagged_by_a_multiple_of_a_near_zero_median():
    # (Anymal's study at 5% of IsaacGymEnvs' budget: medians of 0.01 m/s, one seed at 0.02 was "past 1.5x")
    checked = {"a/seed_0": anymal(0.01), "a/seed_1": anymal(0.01), "b/seed_0": anymal(0.02), "b/seed_1": anymal(0.09)}
    assert flagged(checked) == []
    checked["b/seed_2"] = anymal(0.5)  # a robot that moves, past 1.5x the median and the floor
    assert flagged(checked) == ["b/seed_2"]


def test_ballbalance_runs_are_tabled_and_never_flagged(tmp_path):
    checked = {f"a/seed_{s}": {"task": "BallBalance", "envs": 64, "steps": 1000, "ball_distance_m_p50_p90": [0.1, d],
                               "ball_speed_mps_mean": 0.05, "reward_per_step_mean": 0.8, "dropped_env_fraction": 0.0,
                               "diverged": 0, "ball_distance_m_mean": d}
               for s, d in enumerate((0.2, 0.3, 5.0))}
    records = {folder: {"arm": "a", "seed": int(folder[-1])} for folder in checked}
    assert flagged(checked) == []
    table = open(write_table(records, checked, str(tmp_path))).read()
    assert "No speed to flag by" in table and "**flagged**" not in table and "| a | 2 | 0.1 / 5 |" in table
