"""Quadcopter's semantics with known answers from set states (IsaacGymEnvs' tasks/quadcopter.py): the observation's
layout and frames, the reward and its terminations, thrust as a force along each rotor's own axis, the actions
integrating into targets and thrusts, and the reset."""
from __future__ import annotations

import math

import pytest
import torch

from isaac_ppo.envs import make
from isaac_ppo.tasks.aerial.quadcopter import MAX_THRUST, quadcopter_reward

MASS = 0.2515  # kg: the model's (inertiafromgeom), the sum of IsaacGymEnvs' densities x volumes
G = 9.81


@pytest.fixture(scope="module")
def env():
    return make("Quadcopter", 4, sim="mujoco", seed=0)


def _place(env, position=(0.0, 0.0, 1.0), quat=(1.0, 0.0, 0.0, 0.0), hinges=0.0):
    """Every env at a set state, at rest, targets at the hinges, no thrust; the derived fields refreshed."""
    env.reset()
    ids = torch.arange(env.num_envs)
    env.qpos[:, 0:3] = torch.tensor(position, dtype=env.qpos.dtype)
    env.qpos[:, 3:7] = torch.tensor(quat, dtype=env.qpos.dtype)
    env.qpos[:, 7:15] = hinges
    env.qvel[:] = 0.0
    env.targets[:] = hinges
    env.thrusts[:] = 0.0
    env.sim.forward(ids)


def test_the_observation_is_isaacgymenvs_layout_in_its_frames(env):
    """(target - position) / 3, the quaternion as (x, y, z, w), the world linear velocity / 2, the world angular
    velocity / pi (MuJoCo's free joint holds it in the body frame), the hinge angles."""
    half = math.sqrt(0.5)
    _place(env, position=(0.3, -0.6, 1.9), quat=(half, 0.0, 0.0, half), hinges=0.1)  # yawed 90 degrees
    env.qvel[:, 0:3] = torch.tensor([1.0, 2.0, -3.0], dtype=env.qvel.dtype)
    env.qvel[:, 3:6] = torch.tensor([0.5, 0.0, 0.0], dtype=env.qvel.dtype)  # about the body x: world y after the yaw
    obs = env.compute_observations(slice(0, 4))
    expected = torch.tensor([-0.1, 0.2, -0.3, 0.0, 0.0, half, half, 0.5, 1.0, -1.5, 0.0, 0.5 / math.pi, 0.0]
                            + [0.1] * 8)
    torch.testing.assert_close(obs[0], expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("state,expected", [
    # at the target, upright, still: 1 x (1 + 1 + 1)
    (dict(position=(0.0, 0.0, 1.0)), 3.0),
    # 1 m away (d^2 = 1: 1/2), upright, still: 0.5 x 3
    (dict(position=(1.0, 0.0, 1.0)), 1.5),
    # at the target, rolled 90 degrees (tilt 1: 1/2): 1 + 0.5 + 1
    (dict(quat=(math.sqrt(0.5), math.sqrt(0.5), 0.0, 0.0)), 2.5),
])
def test_the_reward_from_set_states(env, state, expected):
    _place(env, **state)
    position, quat, _, angvel = env.chassis(slice(0, 4))
    reward, terminated, terms, _, _ = quadcopter_reward(position, quat, angvel)
    torch.testing.assert_close(reward, torch.full((4,), expected), rtol=0, atol=1e-6)
    torch.testing.assert_close(sum(terms.values()), reward, rtol=0, atol=1e-6)
    assert not bool(terminated.any())


def test_spinning_costs_and_the_terminations(env):
    _place(env)
    env.qvel[:, 5] = 2.0  # yaw rate 2 rad/s (world z = body z upright): 1/(1 + 4)
    position, quat, _, angvel = env.chassis(slice(0, 4))
    reward = quadcopter_reward(position, quat, angvel)[0]
    torch.testing.assert_close(reward, torch.full((4,), 2.2), rtol=0, atol=1e-6)
    for place, why in (((0.0, 0.0, 0.29), "below 0.3 m"), ((3.1, 0.0, 1.0), "farther than 3 m")):
        _place(env, position=place)
        position, quat, _, angvel = env.chassis(slice(0, 4))
        assert bool(quadcopter_reward(position, quat, angvel)[1].all()), why


def test_actions_integrate_into_clamped_targets_and_thrusts(env):
    """targets += dt x 8 pi x action (clamped to +-30 degrees), thrusts += dt x 200 x action (clamped to [0, 2] N)."""
    _place(env)
    actions = torch.zeros(4, 12)
    actions[:, 0] = 0.5  # pitch 0: 0.01 x 8 pi x 0.5 = 0.1257 rad
    actions[:, 1] = 1.0  # roll 0: 0.2513, then clamped at 0.5236 on the third step
    actions[:, 8] = 0.25  # thrust 0: 0.5 N a step
    actions[:, 9] = -1.0  # thrust 1: clamped at 0
    env.step(actions)
    torch.testing.assert_close(env.targets[0, 0:2], torch.tensor([0.04 * math.pi, 0.08 * math.pi]), rtol=0, atol=1e-6)
    torch.testing.assert_close(env.thrusts[0, 0:2], torch.tensor([0.5, 0.0]), rtol=0, atol=1e-6)
    for _ in range(4):
        env.step(actions)
    torch.testing.assert_close(env.targets[0, 1], torch.tensor(math.radians(30.0)), rtol=0, atol=1e-5)
    torch.testing.assert_close(env.thrusts[0, 0], torch.tensor(MAX_THRUST), rtol=0, atol=0)


def test_thrust_is_a_force_along_each_rotors_own_axis(env):
    """Four thrusts of a quarter of the weight hold the level quadcopter (its height within 1 mm over a second, no
    drift); full thrust lifts it at (8 N - m g) / m; a rotor rolled by 30 degrees pushes sideways."""
    _place(env)
    hover = MASS * G / 4.0
    actions = torch.zeros(4, 12)
    actions[:, 8:12] = hover / (0.01 * 200.0)
    env.step(actions)
    for _ in range(99):
        env.step(torch.zeros(4, 12))
    assert float((env.qpos[:, 2] - 1.0).abs().max()) < 1e-3
    assert float(env.qpos[:, 0:2].abs().max()) < 1e-4
    _place(env)
    actions[:, 8:12] = 1.0  # 2 N each at once
    env.step(actions)
    climb = (4 * MAX_THRUST - MASS * G) / MASS  # m/s^2
    torch.testing.assert_close(env.qvel[:, 2].float(), torch.full((4,), climb * 0.01), rtol=0.02, atol=0)
    _place(env, hinges=0.0)
    env.qpos[:, 8] = math.radians(30.0)  # rotor 0 rolled about its arm's x axis
    env.targets[:, 1] = math.radians(30.0)
    env.sim.forward(torch.arange(4))
    env.thrusts[:, 0] = 1.0
    env.set_controls(torch.zeros(4, 12), 4)
    force = env.derived["xfrc_applied"][0, 3, 0:3].float()
    torch.testing.assert_close(force.norm(), torch.tensor(1.0), rtol=0, atol=1e-6)
    torch.testing.assert_close(force[2], torch.tensor(math.cos(math.radians(30.0))), rtol=0, atol=1e-6)


def test_a_reset_puts_the_chassis_near_the_target_at_rest_and_zeroes_the_thrusts(env):
    env.reset()
    env.thrusts[:] = 1.5
    env.reset_idx(torch.arange(4))
    position = env.qpos[:, 0:3].float()
    assert bool(((position[:, 0:2].abs() <= 1.5).all(dim=1) & (position[:, 2] >= 0.8) & (position[:, 2] <= 2.5)).all())
    assert bool((env.qpos[:, 7:15].abs() <= 0.2).all()) and float(env.qvel.abs().max()) == 0.0
    torch.testing.assert_close(env.targets, env.qpos[:, 7:15].float(), rtol=0, atol=1e-6)
    assert float(env.thrusts.abs().max()) == 0.0
