"""BallBalance's semantics with known answers (issue 47), on mujoco.batch: the reward at the target at rest is 1, the
termination rule and the observation layout from set states, the force-torque readings of a ball resting on the tray
(its weight), IsaacGymEnvs' action and reset rules, and the critic observations of asymmetric=true. (Both backends:
test_backend_contract.py and test_mjwarp.py.)"""
from __future__ import annotations

import math

import pytest
import torch

from helpers import G, TRAY_AND_BALL_WEIGHT, TRAY_MASS, TRAY_TOP, rest_the_ball_on_the_tray
from isaac_ppo.envs import make
from isaac_ppo.tasks.classic.ball_balance import ball_balance_reward

@pytest.fixture(scope="module")
def env():
    return make("BallBalance", 4, sim="mujoco", seed=0, mujoco={"nthread": 1})


def test_the_reward_at_the_target_at_rest_is_one_and_falls_with_distance_and_speed():
    goal = torch.tensor([0.0, 0.0, 0.7])
    reward, terminal, distance, speed = ball_balance_reward(
        torch.tensor([[0.0, 0.0, 0.7], [1.0, 0.0, 0.7], [0.0, 0.0, 0.7]]),
        torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 3.0, 4.0]]), goal)
    assert reward.tolist() == pytest.approx([1.0, 0.5, 1.0 / 6.0]) and not terminal.any()
    assert distance.tolist() == pytest.approx([0.0, 1.0, 0.0]) and speed.tolist() == pytest.approx([0.0, 0.0, 5.0])


def test_the_observation_layout_and_the_termination_rule_from_a_set_state(env):
    env.reset()
    qpos, qvel = env.qpos, env.qvel
    qpos[:, 8], qpos[:, 10], qpos[:, 12] = 0.1, 0.2, 0.3  # the knees (Isaac Gym's actuated DOFs 1, 3, 5)
    qvel[:, 7], qvel[:, 9], qvel[:, 11] = -1.0, -2.0, -3.0
    qpos[:, 13:16] = torch.tensor([[0.0, 0.0, 0.7], [0.3, -0.2, 0.16], [2.0, 0.0, 0.14], [2.0, 0.0, 0.151]],
                                  dtype=qpos.dtype)
    qvel[:, 12:15] = torch.tensor([0.0, 0.0, 0.0], dtype=qvel.dtype)
    qvel[1, 12:15] = torch.tensor([1.0, 2.0, -2.0], dtype=qvel.dtype)
    everyone = torch.arange(4)
    env.sim.forward(everyone)
    obs = env.compute_observations(slice(0, 4))
    assert obs.shape == (4, 24)
    torch.testing.assert_close(obs[:, 0:3], torch.tensor([[0.1, 0.2, 0.3]] * 4))
    torch.testing.assert_close(obs[:, 3:6], torch.tensor([[-1.0, -2.0, -3.0]] * 4))
    torch.testing.assert_close(obs[:, 6:9], qpos[:, 13:16].float())
    torch.testing.assert_close(obs[1, 9:12], torch.tensor([1.0, 2.0, -2.0]))
    forces, torques = env.tray_wrenches(slice(0, 4))  # the readings / 20, in IsaacGymEnvs' indexing
    torch.testing.assert_close(obs[:, 12:15], forces[:, :, 0] / 20)
    torch.testing.assert_close(obs[:, 15:24], torques.transpose(1, 2).reshape(4, 9) / 20)
    reward, terminal = env.compute_reward(obs, slice(0, 4))
    assert reward[0].item() == pytest.approx(1.0)  # at (0, 0, 0.7) at rest
    assert reward[1].item() == pytest.approx(1.0 / (1.0 + math.sqrt(0.09 + 0.04 + 0.54 ** 2)) / 4.0)
    assert terminal.tolist() == [False, False, True, False]  # below 1.5 radii (0.15 m) ends it


def test_a_ball_resting_on_the_tray_weighs_on_the_legs(env):
    """The legs' vertical forces on the tray add up to the tray's and the ball's weight; the ball moved off the tray
    takes its weight away."""
    forces = rest_the_ball_on_the_tray(env)
    torch.testing.assert_close(forces[:, :, 2].sum(dim=1), torch.full((4,), TRAY_AND_BALL_WEIGHT), rtol=0.005, atol=0.0)
    assert forces[:, :, :2].sum(dim=1).abs().max() < 0.05  # no net horizontal force at rest
    env.qpos[:, 13:16] = torch.tensor([3.0, 0.0, 5.0], dtype=env.qpos.dtype)  # the ball aside, high up (it falls
    env.qvel[:, 12:18] = 0.0                                                    # 0.2 m in 0.2 s: no episode ends)
    for _ in range(20):
        env.step(torch.zeros(4, 3))
    alone = env.tray_wrenches(slice(0, 4))[0]
    torch.testing.assert_close(alone[:, :, 2].sum(dim=1), torch.full((4,), TRAY_MASS * G), rtol=0.005, atol=0.0)


def test_actions_move_the_knee_targets_by_dt_20_a_within_the_knee_range(env):
    env.reset()
    env.step(torch.tensor([[1.0, -0.5, 0.0]] * 4))
    torch.testing.assert_close(env.ctrl[:, :3].float(), torch.tensor([[0.2, -0.1, 0.0]] * 4))
    for _ in range(10):
        env.step(torch.tensor([[1.0, -1.0, 0.0]] * 4))
    torch.testing.assert_close(env.ctrl[:, :3].float(), torch.tensor([[math.radians(90), math.radians(-70), 0.0]] * 4))


def test_a_reset_drops_the_ball_as_isaacgymenvs_does():
    env = make("BallBalance", 512, sim="mujoco", seed=5, mujoco={"nthread": 1})
    env.reset()
    position, velocity = env.qpos[:, 13:16], env.qvel[:, 12:15]
    horizontal = position[:, :2].norm(dim=1)
    assert horizontal.min() >= 0.001 and horizontal.max() <= 0.5 and horizontal.max() > 0.45
    assert position[:, 2].min() >= 1.0 and position[:, 2].max() <= 2.0
    assert torch.all(velocity[:, 2] == -5.0) and torch.all(env.qvel[:, 15:18] == 0.0)
    speed = velocity[:, :2].norm(dim=1)
    assert torch.all(speed <= 5.0 * (horizontal - 0.001) / 0.499 + 1e-9)  # faster the farther out, at most 5 m/s
    assert torch.all((velocity[:, :2] * position[:, :2]).sum(dim=1) <= 1e-12)  # towards the centre
    assert torch.all(env.ctrl == 0.0) and torch.all(env.qpos[:, 7:13] == 0.0)


def test_asymmetric_observations_give_the_critic_the_observation_and_the_tray_state():
    env = make("BallBalance", 4, sim="mujoco", seed=1, mujoco={"nthread": 1}, asymmetric_observations=True)
    assert env.num_states == 43
    first = env.reset()
    assert first["states"].shape == (4, 43)
    obs_dict, _, _, extras = env.step(torch.zeros(4, 3))
    states = obs_dict["states"]
    torch.testing.assert_close(states[:, :24], obs_dict["obs"])
    torch.testing.assert_close(states[:, 24:31], env.qpos[:, 0:7].float().clamp(-5, 5))  # the tray's pose
    assert extras["final_states"].shape == (4, 43)
    assert make("BallBalance", 2, sim="mujoco", mujoco={"nthread": 1}).num_states == 0  # off by default
