"""The gait check (isaac_ppo/lab/gait.py) of BallBalance, FrankaCabinet and ShadowHand: a checkpoint of one
iteration replayed at the run's physics and at 2x finer steps, measured by its own quantities (GAITS). (Ant's: tests/integration/test_study.py, through a
study; Anymal's: test_legged_measures.py.)"""
from __future__ import annotations

import math
import os

import pytest

from helpers import train_in_process
from isaac_ppo.lab.gait import GAITS, check

pytestmark = pytest.mark.slow

SMALL = ["sim=mujoco", "num_envs=16", "agent.horizon=16", "agent.minibatch_size=128", "max_iterations=1",
         "diagnostics=off", "eval.interval_env_steps=0", "eval.final=false", "save_interval_iterations=1"]


def last_checkpoint(tmp_path, task: str, *overrides: str) -> str:
    run = train_in_process(str(tmp_path), f"task={task}", *SMALL, *overrides)
    path = os.path.join(run.run_dir, "checkpoints", "last.pt")
    assert os.path.isfile(path)
    return path


def test_ballbalance_is_measured_by_where_the_ball_is_kept_at_its_physics_and_finer(tmp_path):
    path = last_checkpoint(tmp_path, "BallBalance")
    for refine in (1, 2):
        gait = check(path, "BallBalance", envs=8, steps=120, refine=refine)
        assert gait["task"] == "BallBalance" and gait["envs"] == 8 and gait["steps"] == 120
        p50, p90 = gait["ball_distance_m_p50_p90"]
        assert 0 < p50 <= p90 < 3  # (a ball falls from 1-2 m onto the tray, or past it)
        assert 0 < gait["ball_speed_mps_mean"] < 20
        assert 0 < gait["reward_per_step_mean"] <= 1  # (the product of two factors in (0, 1])
        assert 0 <= gait["dropped_env_fraction"] <= 1 and gait["diverged"] == 0


def test_frankacabinet_is_measured_by_how_the_drawer_opens_at_its_physics_and_finer(tmp_path):
    path = last_checkpoint(tmp_path, "FrankaCabinet", "task.env.numProps=0")  # (the props cost 10x: not measured)
    for refine in (1, 2):
        gait = check(path, "FrankaCabinet", envs=4, steps=40, refine=refine)
        assert gait["task"] == "FrankaCabinet" and gait["envs"] == 4 and gait["steps"] == 40
        assert 0 <= gait["opened_env_fraction"] <= 1 and 0 <= gait["drawer_opening_m_mean"] <= 0.4
        assert 0.05 < gait["grasp_distance_m_mean"] < 1.5  # (the arm starts ~0.4 m from the handle)
        assert gait["reward_per_step_mean"] > -1.1 and gait["diverged"] == 0  # (-1 is its least: bad style)


def test_shadowhand_is_measured_by_the_goals_reached_and_drops_at_its_physics_and_finer(tmp_path):
    path = last_checkpoint(tmp_path, "ShadowHand")
    for refine in (1, 2):
        gait = check(path, "ShadowHand", envs=4, steps=40, refine=refine)
        assert gait["task"] == "ShadowHand" and gait["steps"] == 40
        assert gait["successes_per_env_mean"] >= 0 and 0 <= gait["dropped_env_fraction"] <= 1
        assert 0 <= gait["rotation_distance_rad_mean"] <= math.pi and gait["diverged"] == 0


def test_every_registered_task_but_cartpole_has_a_gait_of_a_kind_the_check_measures():
    from isaac_ppo.envs.registry import GAIT_KINDS, specs
    from isaac_ppo.lab.gait import tasks_with_gaits

    assert set(GAITS) == set(GAIT_KINDS)
    assert set(tasks_with_gaits()) == set(specs()) - {"Cartpole"}
