"""The legged ports against IsaacGymEnvs' task semantics (Anymal), on real MuJoCo batches and constructed states with
known answers: the observation's layout, the reward at perfect tracking and under known torques, what ends an
episode, the commands' life, the maximum return; and the model file's numbers against the URDF's (what every backend
must do with the task is tests/integration/test_backend_contract.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from helpers import quat_about, rotation_matrix

from isaac_ppo.envs import make
from isaac_ppo.tasks.legged.common import feet_air_time_step, wrap_to_pi, yaw_rate_to_heading

DT = 0.02  # IsaacGymEnvs' Anymal control step
DEFAULT = {"LF_HAA": 0.03, "LH_HAA": 0.03, "RF_HAA": -0.03, "RH_HAA": -0.03, "LF_HFE": 0.4, "LH_HFE": -0.4,
           "RF_HFE": 0.4, "RH_HFE": -0.4, "LF_KFE": -0.8, "LH_KFE": 0.8, "RF_KFE": -0.8, "RH_KFE": 0.8}
JOINT_ORDER = [f"{leg}_{joint}" for leg in ("LF", "LH", "RF", "RH") for joint in ("HAA", "HFE", "KFE")]



def upside_down_in_the_floor(env, i):
    """Env i's base upside down, its lidar cage (the top of the base) 3.5 mm into the floor, its legs in the air: a
    base contact and no other, one that lasts the step (the robot lies on it)."""
    env.qpos[i, 2] = 0.26
    env.qpos[i, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=env.qpos.dtype)


def hold_still(env, ids):
    """Zero joint velocities and each servo's target at its joint's angle: the actuators exert no torque."""
    env.qvel[ids, 6:] = 0.0
    env.ctrl[ids] = env.qpos[ids, 7:]


def test_the_model_is_the_urdfs_anymal_c_with_fixed_joints_collapsed():
    env = make("Anymal", 1, sim="mujoco")
    model = env.model
    assert [model.joint(j).name for j in range(1, model.njnt)] == JOINT_ORDER == env.dof_names
    assert [model.actuator(a).name for a in range(model.nu)] == JOINT_ORDER
    # the URDF's masses, summed over the links Isaac Gym merges (collapse_fixed_joints)
    assert model.body("base").mass[0] == pytest.approx(26.37317, abs=1e-5)
    for leg in ("LF", "LH", "RF", "RH"):
        assert model.body(f"{leg}_HIP").mass[0] == pytest.approx(2.781)
        assert model.body(f"{leg}_THIGH").mass[0] == pytest.approx(3.071)
        assert model.body(f"{leg}_SHANK").mass[0] == pytest.approx(0.58842)
        assert model.geom(f"{leg}_FOOT").size[0] == 0.03
    assert model.body_subtreemass[1] == pytest.approx(52.13485, abs=1e-5)
    np.testing.assert_allclose(model.actuator_forcerange, [[-80.0, 80.0]] * 12)  # the URDF's effort limit
    np.testing.assert_allclose(model.jnt_range[[1, 4]], [[-0.72, 0.49]] * 2)  # LF, LH HAA
    np.testing.assert_allclose(model.jnt_range[[7, 10]], [[-0.49, 0.72]] * 2)  # RF, RH HAA
    # the servos' gains from env.control: force = 85 (target - q) - 2 qdot
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], 85.0)
    np.testing.assert_allclose(model.actuator_biasprm[:, :3], [[0.0, -85.0, -2.0]] * 12)
    np.testing.assert_allclose(model.qpos0[:7], [0, 0, 0.62, 1, 0, 0, 0])  # IsaacGymEnvs' baseInitState
    assert env.max_episode_length == 2500 and env.num_obs == 48 and env.num_actions == 12


def test_observation_layout_on_a_constructed_state():
    env = make("Anymal", 3, sim="mujoco")
    env.reset()
    i = 1
    quat = quat_about([0.4, -0.3, 1.0], 0.6)  # tilted: quat_rotate and quat_rotate_inverse of gravity differ
    dof_pos = np.linspace(-0.5, 0.5, 12)
    lin_vel, ang_vel, dof_vel = np.array([0.7, -0.4, 0.1]), np.array([0.3, -0.2, 0.9]), np.linspace(-3, 3, 12)
    env.qpos[i] = torch.from_numpy(np.concatenate(([1.0, 2.0, 0.6], quat, dof_pos)))
    env.qvel[i] = torch.from_numpy(np.concatenate((lin_vel, ang_vel, dof_vel)))
    env.commands[i] = torch.tensor([1.5, -0.5, 0.8])
    env.last_actions[i] = torch.linspace(-1, 1, 12)
    obs = env.compute_observations(slice(0, 3))[i].double().numpy()

    rot = rotation_matrix(quat)
    gravity = np.array([0.0, 0.0, -1.0])
    default = np.array([DEFAULT[name] for name in JOINT_ORDER])
    np.testing.assert_allclose(obs[0:3], rot.T @ lin_vel * 2.0, atol=1e-5)  # base frame, x linearVelocityScale
    np.testing.assert_allclose(obs[3:6], ang_vel * 0.25, atol=1e-6)  # (MuJoCo's free-joint angular velocity: local)
    np.testing.assert_allclose(obs[6:9], rot @ gravity, atol=1e-6)  # IsaacGymEnvs' anymal.py: quat_rotate
    assert not np.allclose(obs[6:9], rot.T @ gravity, atol=1e-2)  # (legged_gym's quat_rotate_inverse: not this)
    np.testing.assert_allclose(obs[9:12], [1.5 * 2.0, -0.5 * 2.0, 0.8 * 0.25], atol=1e-6)
    np.testing.assert_allclose(obs[12:24], dof_pos - default, atol=1e-6)  # x dofPositionScale 1
    np.testing.assert_allclose(obs[24:36], dof_vel * 0.05, atol=1e-6)
    np.testing.assert_allclose(obs[36:48], np.linspace(-1, 1, 12), atol=1e-6)


def test_an_action_is_a_position_target_about_the_default_pose():
    env = make("Anymal", 2, sim="mujoco")
    env.reset()
    actions = torch.zeros(2, 12)
    actions[1] = torch.linspace(-1, 1, 12)
    env.step(actions)
    default = torch.tensor([DEFAULT[name] for name in JOINT_ORDER], dtype=torch.float64)
    torch.testing.assert_close(env.ctrl[0], default)
    torch.testing.assert_close(env.ctrl[1], default + 0.5 * torch.linspace(-1, 1, 12, dtype=torch.float64))


def test_tracking_the_command_exactly_without_torque_earns_1_5_dt():
    """Moving at exactly the commanded velocity with zero torque is the most a step earns: (1.0 + 0.5) x dt."""
    env = make("Anymal", 4, sim="mujoco")
    env.reset()
    everyone = torch.arange(4)
    env.commands[:] = torch.tensor([[1.2, -0.3, 0.5], [-2.0, 1.0, -1.0], [0.0, 0.0, 0.0], [0.7, 0.2, 0.1]])
    env.qvel[:, 0:3] = 0.0
    env.qvel[:, 0:2] = env.commands[:, 0:2].double()  # upright base: the base frame is the world's
    env.qvel[:, 3:6] = 0.0
    env.qvel[:, 5] = env.commands[:, 2].double()
    hold_still(env, everyone)
    env.sim.forward(everyone)
    assert env.torques(slice(0, 4)).abs().max() == 0.0
    reward, terminated = env.compute_reward(env.compute_observations(slice(0, 4)), slice(0, 4))
    torch.testing.assert_close(reward, torch.full((4,), 1.5 * DT), rtol=1e-6, atol=1e-7)
    assert not terminated.any()  # (in the air at the start height: nothing touches)
    terms = env.reward_terms
    torch.testing.assert_close(terms["lin_vel_xy"], torch.full((4,), 1.0 * DT))
    torch.testing.assert_close(terms["ang_vel_z"], torch.full((4,), 0.5 * DT))
    assert terms["torque"].abs().max() == 0.0 and terms["clip"].abs().max() == 0.0


def test_known_torques_cost_their_squares_and_the_reward_is_clipped_at_zero():
    env = make("Anymal", 3, sim="mujoco")
    env.reset()
    everyone = torch.arange(3)
    env.commands[:] = 0.0
    env.qvel[:] = 0.0
    env.ctrl[:] = env.qpos[:, 7:]
    env.ctrl[1] += 0.1  # 8.5 N m at each joint
    env.ctrl[2] += 1.0  # 85 N m asked, 80 (the effort limit) given
    env.sim.forward(everyone)
    torch.testing.assert_close(env.torques(slice(0, 3))[1], torch.full((12,), 8.5), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(env.torques(slice(0, 3))[2], torch.full((12,), 80.0))
    reward, _ = env.compute_reward(env.compute_observations(slice(0, 3)), slice(0, 3))
    torque_cost = -0.000025 * DT * 12 * 8.5**2
    assert reward[0].item() == pytest.approx(1.5 * DT, rel=1e-6)
    assert reward[1].item() == pytest.approx(1.5 * DT + torque_cost, rel=1e-5)
    # 12 x 80^2 costs 0.0384 a step, more than the 0.03 that tracking earns: clipped to 0, the clip's term the rest
    assert reward[2].item() == 0.0
    assert env.reward_terms["clip"][2].item() == pytest.approx(0.000025 * DT * 12 * 6400 - 1.5 * DT, rel=1e-5)


def test_the_maximum_return_is_75():
    """An episode lasts 50 s / 0.02 s = 2500 steps and no step earns more than 1.5 x 0.02 (the tracking kernels are
    at most 1, the torque penalty at most 0): 75, reached by tracking exactly without torque."""
    env = make("Anymal", 64, sim="mujoco", seed=5)
    env.reset()
    assert env.max_episode_length == 2500
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        _, reward, _, _ = env.step(2 * torch.rand(64, 12, generator=generator) - 1)
        assert bool((reward >= 0).all()) and bool((reward <= 1.5 * DT + 1e-7).all())
    assert env.max_episode_length * (1.0 + 0.5) * DT == pytest.approx(75.0)


def test_a_base_or_thigh_contact_is_terminal_and_a_foot_or_shank_contact_is_not():
    env = make("Anymal", 4, sim="mujoco")
    env.reset()
    everyone = torch.arange(4)
    env.qpos[:, 7:] = 0.0
    upside_down_in_the_floor(env, 0)
    # 1: a knee on the floor (the LF thigh straight down, its knee drive's capsule 3.5 cm in the floor; the
    # shank sideways), the base 21 cm above it
    env.qpos[1, 2] = 0.3
    env.qpos[1, 7 + 2] = -math.pi / 2
    # 2: standing on the feet (legs straight: feet 0.63 m below the base), 3: in the air
    env.qpos[2, 2] = 0.625
    env.qpos[3, 2] = 1.0
    hold_still(env, everyone)
    env.sim.forward(everyone)
    forces = env.contact_forces(slice(0, 4), ("base", "LF_THIGH", "LF_SHANK")).norm(dim=2)
    assert forces[0, 0] > 1.0 and forces[0, 1:].max() == 0.0
    assert forces[1, 1] > 1.0 and forces[1, 0] == 0.0
    assert forces[2, 2] > 1.0 and forces[2, :2].max() == 0.0 and forces[3].max() == 0.0
    _, terminated = env.compute_reward(env.compute_observations(slice(0, 4)), slice(0, 4))
    assert terminated.tolist() == [True, True, False, False]


def test_a_base_contact_ends_the_episode_as_terminal_and_a_time_out_as_truncation():
    env = make("Anymal", 3, sim="mujoco", learn={"episodeLength_s": 3 * DT})
    env.reset()
    upside_down_in_the_floor(env, 0)
    _, _, resets, extras = env.step(torch.zeros(3, 12))
    assert resets.tolist() == [True, False, False] and not extras["time_outs"].any()
    for _ in range(2):
        _, _, resets, extras = env.step(torch.zeros(3, 12))
    assert resets.tolist() == [False, True, True] and extras["time_outs"].tolist() == [False, True, True]


def test_commands_hold_within_an_episode_and_are_redrawn_at_each_reset():
    env = make("Anymal", 256, sim="mujoco", seed=2, learn={"episodeLength_s": 4 * DT})
    obs = env.reset()["obs"]
    first = env.commands.clone()
    torch.testing.assert_close(obs[:, 9:12], first * torch.tensor([2.0, 2.0, 0.25]))
    for low, high, column in ((-2.0, 2.0, 0), (-1.0, 1.0, 1), (-1.0, 1.0, 2)):  # U(range), spread over it
        assert low <= first[:, column].min() < low + 0.1 and high - 0.1 < first[:, column].max() <= high
    for _ in range(3):
        out, _, resets, _ = env.step(torch.zeros(256, 12))
        held = ~resets
        assert torch.equal(env.commands[held], first[held])
        torch.testing.assert_close(out["obs"][held, 9:12], first[held] * torch.tensor([2.0, 2.0, 0.25]))
    out, _, resets, extras = env.step(torch.zeros(256, 12))
    assert extras["time_outs"].sum() > 200  # (the rest fell at once from a random start: ended, redrawn too)
    assert not (env.commands == first).all(dim=1).any()  # every episode that ended drew new commands
    torch.testing.assert_close(out["obs"][:, 9:12], env.commands * torch.tensor([2.0, 2.0, 0.25]))
    torch.testing.assert_close(extras["final_obs"][resets, 9:12], first[resets] * torch.tensor([2.0, 2.0, 0.25]))


def test_the_reset_state_is_isaacgymenvs_noise_about_the_default_pose():
    env = make("Anymal", 512, sim="mujoco", seed=1)
    env.reset()
    default = torch.tensor([DEFAULT[name] for name in JOINT_ORDER], dtype=torch.float64)
    ratio = env.qpos[:, 7:] / default  # default x U(0.5, 1.5)
    assert 0.5 <= ratio.min() < 0.52 and 1.48 < ratio.max() <= 1.5
    assert -0.1 <= env.qvel[:, 6:].min() < -0.09 and 0.09 < env.qvel[:, 6:].max() <= 0.1
    np.testing.assert_allclose(env.qpos[:, :7].numpy(), np.tile([0, 0, 0.62, 1, 0, 0, 0], (512, 1)))
    assert env.qvel[:, :6].abs().max() == 0.0


def test_feet_air_time_counts_a_swing_and_pays_it_at_touch_down():
    """AnymalTerrain's (and legged_gym's) air time: a foot in the air accumulates dt; the step it touches down
    reports its air time including that step, and the count restarts."""
    air = torch.zeros(1, 2)
    pattern = [(False, True), (False, True), (False, True), (True, True), (True, False)]
    landed = []
    for contact in pattern:
        touch_down, time_at_step, air = feet_air_time_step(air, torch.tensor([contact]), DT)
        landed.append((touch_down[0].tolist(), (time_at_step * touch_down)[0].tolist()))
    assert landed[3] == ([True, False], [pytest.approx(4 * DT), 0.0])
    assert [step[0] for step in landed[:3]] == [[False, False]] * 3
    assert air[0].tolist() == [0.0, pytest.approx(DT)]


def test_the_robot_stands_at_the_default_pose_under_zero_actions():
    """The physics (cfg/task/Anymal.yaml: implicitfast, 8 x 2.5 ms) holds the robot up: 3 s of zero actions from
    reset, no episode ends, the base stays level and where it landed."""
    env = make("Anymal", 16, sim="mujoco", seed=4)
    env.reset()
    for _ in range(150):
        obs, _, resets, extras = env.step(torch.zeros(16, 12))
        assert not resets.any() and extras["diverged"] == 0
    height = env.qpos[:, 2]
    assert 0.35 < height.min() and height.max() < 0.5
    assert env.qpos[:, :2].norm(dim=1).max() < 0.1 and env.qvel.abs().max() < 0.5
    assert obs["obs"][:, 8].max() < -0.99  # gravity straight down the base: level


def test_a_heading_command_turns_into_a_yaw_rate_towards_it_the_short_way_round():
    """AnymalTerrain's yaw-rate command: half the heading error, wrapped into (-pi, pi], clipped to +-1 rad/s."""
    assert wrap_to_pi(torch.tensor([3 * math.pi / 2, -3 * math.pi / 2, math.pi, 0.25])).tolist() == pytest.approx(
        [-math.pi / 2, math.pi / 2, math.pi, 0.25])
    facing = torch.tensor(np.array([quat_about((0, 0, 1), angle) for angle in (0.0, 0.0, 0.0, 3.0, math.pi / 2)]),
                          dtype=torch.float32)  # the base's heading: 0, 0, 0, 3 rad, 90 degrees
    commanded = torch.tensor([0.4, 3.0, -0.5, -3.0, math.pi / 2])
    # 0.2 (half of 0.4), clipped to 1, -0.25, from 3 rad to -3 rad the short way (+0.28 rad of error), on heading
    short_way = 0.5 * (2 * math.pi - 6.0)
    assert yaw_rate_to_heading(facing, commanded).tolist() == pytest.approx([0.2, 1.0, -0.25, short_way, 0.0],
                                                                             abs=1e-6)


def test_a_heading_error_below_minus_pi_is_wrapped_unlike_isaacgymenvs_fmod():
    """A deliberate difference (issue 91): IsaacGymEnvs' wrap_to_pi is TorchScript-compiled, where `%` on a float
    tensor is fmod, so a heading error of -4 rad stays -4 and its yaw-rate command is clip(-2) = -1 rad/s, the long
    way round; the port wraps it to 2 pi - 4 = 2.28 rad and turns the short way, at clip(1.14) = +1 rad/s."""
    assert wrap_to_pi(torch.tensor([-4.0])).item() == pytest.approx(2 * math.pi - 4.0, abs=1e-6)
    assert torch.fmod(torch.tensor([-4.0]), 2 * math.pi).item() == pytest.approx(-4.0)  # (IsaacGymEnvs' first step)
    facing = torch.tensor(np.array([quat_about((0, 0, 1), 0.0), quat_about((0, 0, 1), 2.0)]), dtype=torch.float32)
    commanded = torch.tensor([-4.0, -2.0])  # errors of -4 rad (base heading 0) and -4 rad (heading 2, command -2)
    assert yaw_rate_to_heading(facing, commanded).tolist() == pytest.approx([1.0, 1.0], abs=1e-6)
