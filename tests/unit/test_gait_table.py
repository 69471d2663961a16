"""The study report's gait table: which runs it flags (a torso far faster than the study's median run)."""
from __future__ import annotations

from isaac_ppo.lab.gait import GAIT_FLAG, write_table as write_gait_table


def gait(p50):
    return {"envs": 64, "steps": 1000, "torso_speed_p50_p90_p99": [p50, p50 + 1, p50 + 2], "torso_speed_max": p50 + 3,
            "reward_per_step_median": p50, "diverged": 0}


def test_only_the_run_past_the_flag_multiple_of_the_median_is_flagged(tmp_path):
    speeds = {"a0": 7.0, "a1": 6.5, "b0": 7.5, "b1": GAIT_FLAG * 7.0 + 0.01, "c0": GAIT_FLAG * 7.0 - 0.01}
    records = {name: {"arm": name[0], "seed": int(name[1])} for name in speeds}
    path = write_gait_table(records, {name: gait(p50) for name, p50 in speeds.items()}, str(tmp_path))
    text = open(path).read()
    assert "Median torso speed over runs: 7.50 m/s" in text
    assert "**flagged**" not in text  # (the fastest, 10.51, is under 1.5 x 7.5)
    speeds["b1"] = GAIT_FLAG * 7.5 + 0.01
    text = open(write_gait_table(records, {n: gait(p) for n, p in speeds.items()}, str(tmp_path))).read()
    flagged = [line for line in text.splitlines() if "**flagged**" in line]
    assert len(flagged) == 1 and flagged[0].startswith("| b | 1 |")


def test_the_posture_columns_show_what_was_measured_and_a_dash_for_runs_checked_before(tmp_path):
    """A run checked before the posture was measured has no up_proj / height: its row says "-", not a number."""
    records = {"a0": {"arm": "a", "seed": 0}, "b0": {"arm": "b", "seed": 0}}
    upright = dict(gait(7.0), up_proj_p5_p50=[0.91, 0.98], torso_height_p50=0.7)
    text = open(write_gait_table(records, {"a0": upright, "b0": gait(7.0)}, str(tmp_path))).read()
    rows = {line[:9]: line for line in text.splitlines() if line.startswith("| a | 0") or line.startswith("| b | 0")}
    assert "| 0.91 / 0.98 | 0.70 |" in rows["| a | 0 |"]
    assert rows["| b | 0 |"].endswith("| 0 | - | - |  |")
