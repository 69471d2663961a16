"""The MuJoCo ports against IsaacGymEnvs' task semantics, on real MuJoCo batches and constructed states (what every
backend must do with them, step by step, is tests/integration/test_backend_contract.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from helpers import quat_about, rotation_matrix

from isaac_ppo.envs import make
from isaac_ppo.tasks.classic.cartpole import cartpole_reward



def test_ant_observation_slices_on_a_constructed_state():
    env = make("Ant", 4, sim="mujoco")
    env.reset()
    i = 2
    quat = quat_about([0.3, -0.2, 1.0], 0.7)
    pos = np.array([3.0, -4.0, 0.55])
    lin_vel, ang_vel = np.array([0.4, -0.3, 0.2]), np.array([0.1, 0.5, -0.7])
    lower, upper = env.model.jnt_range[1:, 0], env.model.jnt_range[1:, 1]
    dof_pos = lower + (upper - lower) * np.linspace(0.1, 0.9, 8)
    dof_vel = np.linspace(-2, 2, 8)
    env.qpos[i] = torch.from_numpy(np.concatenate((pos, quat, dof_pos)))
    env.qvel[i] = torch.from_numpy(np.concatenate((lin_vel, ang_vel, dof_vel)))
    env.last_actions[i] = torch.linspace(-1, 1, 8)
    env.sim.batch.forward()  # sensors at the constructed state
    obs = env.compute_observations(slice(0, 4))[i].double().numpy()

    rot = rotation_matrix(quat)
    yaw = math.atan2(rot[1, 0], rot[0, 0]) % (2 * math.pi)
    roll = math.atan2(rot[2, 1], rot[2, 2]) % (2 * math.pi)
    to_target = np.array([1000.0, 0.0]) - pos[:2]
    assert obs[0] == pytest.approx(0.55, abs=1e-6)
    np.testing.assert_allclose(obs[1:4], rot.T @ lin_vel, atol=1e-5)
    np.testing.assert_allclose(obs[4:7], ang_vel, atol=1e-6)  # MuJoCo's free-joint angular velocity is local
    assert obs[7] == pytest.approx(yaw, abs=1e-5)
    assert obs[8] == pytest.approx(roll, abs=1e-5)
    assert obs[9] == pytest.approx(math.atan2(to_target[1], to_target[0]) - yaw, abs=1e-5)
    assert obs[10] == pytest.approx(rot[2, 2], abs=1e-6)
    assert obs[11] == pytest.approx(rot[:2, 0] @ (to_target / np.linalg.norm(to_target)), abs=1e-6)
    np.testing.assert_allclose(obs[12:20], np.linspace(0.1, 0.9, 8) * 2 - 1, atol=1e-5)
    np.testing.assert_allclose(obs[20:28], dof_vel * 0.2, atol=1e-5)
    np.testing.assert_allclose(obs[28:52], env.sim.batch.bind("sensordata")[i] * 0.1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(obs[52:60], np.linspace(-1, 1, 8), atol=1e-6)


def test_ant_foot_sensors_carry_the_weight_when_standing():
    env = make("Ant", 2, sim="mujoco")
    env.reset()
    for _ in range(120):  # two seconds of zero torque: the Ant settles on its feet
        obs, _, _, _ = env.step(torch.zeros(2, 8))
    forces = obs["obs"][:, 28:52].view(2, 4, 6)[:, :, :3] / 0.1  # foot-frame force vectors
    weight = float(env.model.body_subtreemass[1]) * 9.81
    # feet are light, so the four foot force magnitudes add up to roughly the robot's weight
    total = forces.norm(dim=2).sum(dim=1)
    assert torch.all(total > 0.5 * weight) and torch.all(total < 2.0 * weight)


def test_humanoid_observation_slices():
    env = make("Humanoid", 3, sim="mujoco")
    env.reset()
    i = 1
    quat = quat_about([0.0, 0.0, 1.0], 2.5)  # yaw beyond pi/2 shows the (-pi, pi] wrapping
    env.qpos[i, 0:7] = torch.from_numpy(np.concatenate(([0.5, 0.5, 1.2], quat)))
    env.qvel[i, 3:6] = torch.tensor([0.4, -0.8, 1.2], dtype=torch.float64)
    env.qvel[i, 6:] = torch.linspace(-1, 1, 21, dtype=torch.float64)
    env.ctrl[i] = torch.linspace(-0.5, 0.5, 21, dtype=torch.float64)
    env.sim.batch.forward()
    obs = env.compute_observations(slice(0, 3))[i].double().numpy()
    assert obs[0] == pytest.approx(1.2, abs=1e-6)
    np.testing.assert_allclose(obs[4:7], [0.1, -0.2, 0.3], atol=1e-6)  # angularVelocityScale 0.25
    assert obs[7] == pytest.approx(2.5, abs=1e-5)
    att = math.atan2(-0.5, 999.5) - 2.5
    assert obs[9] == pytest.approx(math.atan2(math.sin(att), math.cos(att)), abs=1e-5)
    assert -math.pi < obs[9] <= math.pi
    np.testing.assert_allclose(obs[33:54], np.linspace(-1, 1, 21) * 0.1, atol=1e-6)
    qfrc = env.sim.batch.bind("qfrc_actuator")[i, 6:]
    assert np.abs(qfrc).max() > 1.0  # the controls produce actuation
    np.testing.assert_allclose(obs[54:75], qfrc * 0.01, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(obs[75:87], env.sim.batch.bind("sensordata")[i] * 0.01, rtol=1e-5, atol=1e-5)


def test_ant_reward_terms_on_constructed_observations():
    env = make("Ant", 2, sim="mujoco")
    env.reset()
    obs = torch.zeros(2, 60)
    obs[:, 0] = torch.tensor([0.5, 0.2])  # env 1 is below terminationHeight 0.31
    obs[:, 10] = 0.95  # upright
    obs[:, 11] = 0.4  # heading term 0.5 * 0.4 / 0.8
    obs[:, 12:20] = torch.tensor([1.0, 0.995, -1.0, 0, 0, 0, 0, 0.5])  # two dofs above 0.99
    obs[:, 20:28] = 2.0
    env.last_actions[:] = 0.5
    env.qpos[:, 0:2] = torch.tensor([1.0, 0.0], dtype=torch.float64)  # 1 m closer than at the start
    progress = 1.0 / 0.0166
    reward, terminated = env.compute_reward(obs, slice(0, 2))
    expected = progress + 0.5 + 0.1 + 0.25 - 0.005 * 8 * 0.25 - 0.05 * 8 * 1.0 - 0.1 * 2
    assert reward[0].item() == pytest.approx(expected, rel=1e-5)
    assert reward[1].item() == -2.0
    assert terminated.tolist() == [False, True]
    # the potential moved on: standing still now earns no progress
    reward_again, _ = env.compute_reward(obs, slice(0, 2))
    assert reward_again[0].item() == pytest.approx(expected - progress, rel=1e-5)


def test_humanoid_reward_weights_effort_ratios():
    env = make("Humanoid", 1, sim="mujoco")
    env.reset()
    ratio = env.motor_effort_ratio
    assert ratio.max().item() == 1.0 and ratio.min().item() == pytest.approx(22.5 / 135)
    obs = torch.zeros(1, 108)
    obs[0, 0] = 1.3
    obs[0, 10] = 0.5  # not upright: no up reward
    obs[0, 11] = 0.9  # heading term saturates at 0.5
    obs[0, 12] = 0.99  # joint 0 past 0.98 by 0.01
    obs[0, 33:54] = 1.0
    env.last_actions[0] = 1.0
    reward, terminated = env.compute_reward(obs, slice(0, 1))
    expected = 2.0 + 0.5 - 0.01 * 21 - 0.05 * ratio.sum().item() - 0.25 * 0.5 * ratio[0].item()
    assert reward.item() == pytest.approx(expected, rel=1e-5)
    obs[0, 0] = 0.7
    reward, terminated = env.compute_reward(obs, slice(0, 1))
    assert reward.item() == -1.0 and terminated.item()


def test_cartpole_reward_and_terminations():
    obs = torch.tensor([
        [0.5, 1.0, 0.2, -2.0],  # alive
        [3.1, 0.0, 0.0, 0.0],  # cart beyond resetDist
        [0.0, 0.0, -1.6, 0.0],  # pole beyond pi/2
    ])
    reward, terminated = cartpole_reward(obs, 3.0)
    assert reward[0].item() == pytest.approx(1 - 0.04 - 0.01 - 0.01)
    assert reward[1:].tolist() == [-2.0, -2.0]
    assert terminated.tolist() == [False, True, True]


def test_cartpole_force_follows_max_effort():
    env = make("Cartpole", 2, sim="mujoco", maxEffort=100.0)
    assert env.model.actuator_gear[0, 0] == 100.0
    env.reset()
    env.qpos[:] = 0.0
    env.qvel[:] = 0.0
    env.step(torch.tensor([[1.0], [-3.0]]))  # the second is clipped to -1
    # after one control step from rest the cart velocities are opposite and equal
    assert env.qvel[0, 0].item() > 0.5 and env.qvel[1, 0].item() == pytest.approx(-env.qvel[0, 0].item())


def test_reset_distributions():
    n = 4096
    ant = make("Ant", n, sim="mujoco", seed=1)
    ant.reset()
    dof = ant.qpos[:, 7:]
    lower, upper = ant.dof_lower, ant.dof_upper
    start = ant.initial_dof_pos
    assert torch.all(dof >= lower - 1e-12) and torch.all(dof <= upper + 1e-12)
    assert torch.all((dof - start).abs() <= 0.2 + 1e-12)
    # the hips start at 0 inside their limits: noise fills U(-0.2, 0.2)
    hips = dof[:, 0::2]
    assert hips.min().item() < -0.19 and hips.max().item() > 0.19
    assert abs(hips.mean().item()) < 0.01
    # ankles start at a limit: clamping puts about half the samples on it
    ankle = dof[:, 1]
    on_limit = (ankle == lower[1]).double().mean().item()
    assert 0.45 < on_limit < 0.55
    vel = ant.qvel[:, 6:]
    assert vel.abs().max().item() <= 0.1 and vel.abs().max().item() > 0.099
    assert torch.all(ant.qpos[:, 0:3] == torch.tensor([0.0, 0.0, 0.44], dtype=torch.float64))
    assert torch.all(ant.qvel[:, 0:6] == 0)

    cart = make("Cartpole", n, sim="mujoco", seed=1)
    cart.reset()
    assert cart.qpos.abs().max().item() <= 0.1 and cart.qpos.abs().max().item() > 0.099
    assert cart.qvel.abs().max().item() <= 0.25 and cart.qvel.abs().max().item() > 0.249




def test_ant_physics_leaves_no_speed_in_integration_error():
    """The gait check on the port's physics (issue 44; issue 21's PROTOCOL amendment 6): the configuration that
    learned to exploit the integration error twice (paper_ant's adaptive_256x256 seed 0: 43 m/s under Euler, 39 m/s
    under implicit), trained under the port's physics (RK4, one 1/60 s step a control step, the floor's time
    constant declared) for the study's whole budget, keeps its forward speed when the physics steps 2x finer on the
    same floor: integration error would shrink, a gait stays. The same check fails the implicit-trained exploit
    under the physics it was trained on: its speed collapses at finer steps."""
    from isaac_ppo.lab.gait import check

    chosen = "tests/data/ant_policies/rk4_60x1_adaptive_256x256_seed_0.pt"  # (the task's defaults are its physics)
    trained = check(chosen, envs=16, steps=300)["forward_speed_mean"]
    finer = check(chosen, envs=16, steps=300, refine=2)["forward_speed_mean"]
    # (16 envs x 300 steps from rest, the Ant's first 5 s: 5.34 and 5.23 m/s; over 64 envs x 1000 steps 12.99,
    # 12.31 and 12.71 at 4x)
    assert 3.0 < trained < 20.0
    assert abs(finer - trained) < 0.1 * trained

    exploit = "tests/data/ant_policies/implicit_adaptive_256x256_seed_0.pt"
    implicit = {"integrator": "implicit", "timestep": 1 / 120, "substeps": 2, "contact_timeconst": None}
    exploited = check(exploit, envs=16, steps=300, physics=implicit)
    refined = check(exploit, envs=16, steps=300, physics=implicit, refine=4)
    assert exploited["forward_speed_mean"] > 2 * trained and exploited["diverged"] == 0
    # the check fails it (measured: 13.47 m/s, 3.48 at 4x finer steps)
    assert refined["forward_speed_mean"] < 0.5 * exploited["forward_speed_mean"]


def test_the_contact_time_constant_is_a_task_key_that_every_geom_takes():
    """task.mujoco.contact_timeconst declares the floor's softness (null: the model file's solref, 0.02 s), so a
    replay at finer steps (the gait check) keeps the floor a coarse step had (MuJoCo raises a time constant below
    2 x timestep to that: at 1/60 s, 0.0333 s)."""
    model_files = make("Ant", 2, sim="mujoco", seed=0, mujoco={"contact_timeconst": None})
    declared = make("Ant", 2, sim="mujoco", seed=0, mujoco={"contact_timeconst": 0.05})
    assert set(model_files.model.geom_solref[:, 0].tolist()) == {0.02}
    assert set(declared.model.geom_solref[:, 0].tolist()) == {0.05}
    actions = torch.ones(2, declared.num_actions)
    for _ in range(30):  # (a softer floor: the same actions from the same state end elsewhere)
        first, second = model_files.step(actions)[0]["obs"], declared.step(actions)[0]["obs"]
    assert not torch.allclose(first, second)


def test_refsafe_off_keeps_a_contact_time_constant_below_two_steps():
    """task.mujoco.refsafe=false turns off MuJoCo's rule that raises a contact time constant below 2 x timestep to
    that: on, 0.02 s at a 1/60 s step simulates the floor of 1/30 s exactly; off, another floor (issue 44)."""
    import mujoco

    step = {"integrator": "rk4", "timestep": 1 / 60, "substeps": 1}
    raised = make("Ant", 2, sim="mujoco", seed=0, mujoco={**step, "contact_timeconst": 0.02, "refsafe": True})
    declared = make("Ant", 2, sim="mujoco", seed=0, mujoco={**step, "contact_timeconst": 1 / 30, "refsafe": True})
    kept = make("Ant", 2, sim="mujoco", seed=0, mujoco={**step, "contact_timeconst": 0.02, "refsafe": False})
    assert kept.model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_REFSAFE
    assert not raised.model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_REFSAFE
    actions = torch.ones(2, kept.num_actions)
    for _ in range(30):
        a, b, c = (env.step(actions)[0]["obs"] for env in (raised, declared, kept))
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)


def test_the_mujoco_integrator_is_a_task_key_and_a_wrong_name_is_one_line():
    """task.mujoco.integrator steps the port with another of MuJoCo's integrators (null: the model file's)."""
    import mujoco

    from isaac_ppo.errors import UserError

    default = make("Ant", 4, sim="mujoco", seed=0)
    implicit = make("Ant", 4, sim="mujoco", seed=0, mujoco={"integrator": "implicit"})
    assert default.model.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4  # (tasks/locomotion/assets/ant.xml)
    assert implicit.model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICIT
    first, second = default.reset()["obs"], implicit.reset()["obs"]
    assert torch.equal(first, second)
    actions = torch.ones(4, default.num_actions)
    for _ in range(5):
        first, second = default.step(actions)[0]["obs"], implicit.step(actions)[0]["obs"]
    assert not torch.allclose(first, second)  # (the same state, stepped by another integrator)
    with pytest.raises(UserError, match=r"task.mujoco.integrator=rk5: MuJoCo's integrators are euler, rk4"):
        make("Ant", 4, sim="mujoco", seed=0, mujoco={"integrator": "rk5"})
