"""Ingenuity's semantics with known answers from set states (IsaacGymEnvs' tasks/ingenuity.py): the observation's
layout and frames, the reward and its terminations, the rotor forces in the chassis' frame on the rotor bodies,
Mars gravity, the target that moves every 500 control steps, and the reset."""
from __future__ import annotations

import importlib.util
import math

import pytest
import torch

from helpers import mjwarp_marks, require_system

from isaac_ppo.envs import make
from isaac_ppo.tasks.aerial.ingenuity import ingenuity_reward, rotor_forces

MASS = 0.0864 + 2 * math.pi * 0.15 ** 2 * 0.01 * 1000.0  # kg: the chassis box and the two rotor discs (densities)
MARS = 3.721  # m/s^2
ROTOR_BODIES = (3, 4)


@pytest.fixture(scope="module")
def env():
    return make("Ingenuity", 4, sim="mujoco", seed=0, maxEpisodeLength=10_000)


def _place(env, position=(0.0, 0.0, 1.0), quat=(1.0, 0.0, 0.0, 0.0), target=(0.0, 0.0, 1.0)):
    """Every env at a set state, at rest, its target set; the derived fields refreshed."""
    env.reset()
    ids = torch.arange(env.num_envs)
    env.qpos[:, 0:3] = torch.tensor(position, dtype=env.qpos.dtype)
    env.qpos[:, 3:7] = torch.tensor(quat, dtype=env.qpos.dtype)
    env.qvel[:] = 0.0
    env.targets[:] = torch.tensor(target)
    env.sim.forward(ids)


def _hover(share=0.5):
    """Actions whose vertical forces carry `share` of the weight on each rotor (20 N an action unit at dt 0.01)."""
    actions = torch.zeros(4, 6)
    actions[:, 2] = actions[:, 5] = share * MASS * MARS / 20.0
    return actions


def test_the_model_is_isaacgymenvs_numbers_under_mars_gravity(env):
    model = env.model
    torch.testing.assert_close(float(model.body_mass[2:].sum()), MASS, rtol=0, atol=1e-6)
    assert tuple(model.opt.gravity) == (0.0, 0.0, -MARS)
    assert [model.body(i).name for i in ROTOR_BODIES] == ["rotor_physics_0", "rotor_physics_1"]
    torch.testing.assert_close(float(model.body_pos[4][2]), 0.025, rtol=0, atol=0)  # the upper rotor, 2.5 cm up


def test_the_observation_is_isaacgymenvs_layout_in_its_frames(env):
    """(target - position) / 3, the quaternion as (x, y, z, w), the world linear velocity / 2, the world angular
    velocity / pi (MuJoCo's free joint holds it in the body frame)."""
    half = math.sqrt(0.5)
    _place(env, position=(0.3, -0.6, 1.9), quat=(half, 0.0, 0.0, half), target=(1.2, 2.4, 1.0))  # yawed 90 degrees
    env.qvel[:, 0:3] = torch.tensor([1.0, 2.0, -3.0], dtype=env.qvel.dtype)
    env.qvel[:, 3:6] = torch.tensor([0.5, 0.0, 0.0], dtype=env.qvel.dtype)  # about the body x: world y after the yaw
    obs = env.compute_observations(slice(0, 4))
    expected = torch.tensor([0.3, 1.0, -0.3, 0.0, 0.0, half, half, 0.5, 1.0, -1.5, 0.0, 0.5 / math.pi, 0.0])
    torch.testing.assert_close(obs[0], expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("state,expected", [
    # at the target, upright, still: 1 x (1 + 5 + 1)
    (dict(position=(0.0, 0.0, 1.0)), 7.0),
    # 1 m from it (d^2 = 1: 1/2), upright, still: 0.5 x 7
    (dict(position=(0.0, 0.0, 2.0)), 3.5),
    # at the target, rolled 90 degrees (tilt 1: 5/2): 1 + 2.5 + 1
    (dict(quat=(math.sqrt(0.5), math.sqrt(0.5), 0.0, 0.0)), 4.5),
])
def test_the_reward_from_set_states(env, state, expected):
    _place(env, **state)
    position, quat, _, angvel = env.chassis(slice(0, 4))
    reward, terminated, terms, _, _ = ingenuity_reward(position, env.targets, quat, angvel)
    torch.testing.assert_close(reward, torch.full((4,), expected), rtol=0, atol=1e-6)
    torch.testing.assert_close(sum(terms.values()), reward, rtol=0, atol=1e-6)
    assert not bool(terminated.any())


def test_spinning_costs_and_the_terminations(env):
    _place(env)
    env.qvel[:, 5] = 2.0  # yaw rate 2 rad/s (world z = body z upright): 1/(1 + 4)
    position, quat, _, angvel = env.chassis(slice(0, 4))
    torch.testing.assert_close(ingenuity_reward(position, env.targets, quat, angvel)[0], torch.full((4,), 6.2),
                               rtol=0, atol=1e-6)
    for place, target, why in (((0.0, 0.0, 0.49), (0.0, 0.0, 1.0), "below 0.5 m"),
                               ((0.0, 0.0, 1.0), (5.0, 5.0, 5.0), "farther than 8 m"),
                               ((4.0, 4.0, 4.0), (-2.0, -2.0, 1.0), "farther than 8 m")):
        _place(env, position=place, target=target)
        position, quat, _, angvel = env.chassis(slice(0, 4))
        assert bool(ingenuity_reward(position, env.targets, quat, angvel)[1].all()), why
    _place(env, position=(4.0, 4.0, 4.0), target=(0.0, 0.0, 1.0))  # 6.4 m: flying on
    position, quat, _, angvel = env.chassis(slice(0, 4))
    assert not bool(ingenuity_reward(position, env.targets, quat, angvel)[1].any())


def test_the_actions_are_forces_in_the_chassis_frame_scaled_and_clamped():
    """vertical = clamp(2000 x z, +-2000) x dt (it may point down), lateral = vertical x clamp(x or y, +-0.2)."""
    actions = torch.tensor([[0.1, -0.5, 0.5, 0.0, 0.2, -1.0]])
    forces = rotor_forces(actions, 0.01)
    torch.testing.assert_close(forces, torch.tensor([[[1.0, -2.0, 10.0], [0.0, -4.0, -20.0]]]), rtol=0, atol=1e-6)
    torch.testing.assert_close(rotor_forces(torch.tensor([[0.0, 0.0, 1.0] * 2]), 0.02)[0, :, 2],
                               torch.tensor([40.0, 40.0]), rtol=0, atol=0)  # (IsaacGymEnvs scales by its dt)


def test_mars_gravity_and_thrust_on_the_rotor_bodies(env):
    """With no thrust it falls at 3.721 m/s^2; two rotors carrying half the weight each hold it within 1 mm over a
    second; full thrust climbs at (40 N - m g) / m; the forces are on the rotor bodies, turned with the chassis."""
    _place(env)
    env.step(torch.zeros(4, 6))
    torch.testing.assert_close(env.qvel[:, 2].float(), torch.full((4,), -MARS * 0.01), rtol=1e-5, atol=0)
    _place(env)
    for _ in range(100):
        env.step(_hover())
    assert float((env.qpos[:, 2] - 1.0).abs().max()) < 1e-3
    assert float(env.qpos[:, 0:2].abs().max()) < 1e-6
    _place(env)
    full = torch.zeros(4, 6)
    full[:, 2] = full[:, 5] = 1.0
    env.step(full)
    climb = (40.0 - MASS * MARS) / MASS
    torch.testing.assert_close(env.qvel[:, 2].float(), torch.full((4,), climb * 0.01), rtol=1e-4, atol=0)
    # rolled 90 degrees about x: the chassis' z is the world's -y; its x stays the world's x
    half = math.sqrt(0.5)
    _place(env, quat=(half, half, 0.0, 0.0))
    env.set_controls(torch.tensor([[0.1, 0.0, 0.5, 0.0, 0.0, 0.25]] * 4), 4)
    forces = env.derived["xfrc_applied"][0].float()
    torch.testing.assert_close(forces[ROTOR_BODIES[0], 0:3], torch.tensor([1.0, -10.0, 0.0]), rtol=0, atol=1e-5)
    torch.testing.assert_close(forces[ROTOR_BODIES[1], 0:3], torch.tensor([0.0, -5.0, 0.0]), rtol=0, atol=1e-5)
    others = [b for b in range(forces.shape[0]) if b not in ROTOR_BODIES]
    assert float(forces[others].abs().max()) == 0.0 and float(forces[:, 3:6].abs().max()) == 0.0


def test_a_lateral_force_pushes_the_hovering_chassis_sideways(env):
    """A lateral share of 0.2 on both rotors: 0.2 x the vertical force along the chassis' x (and a pitch, since the
    forces act at the rotors, not at the centre of mass)."""
    _place(env, position=(0.0, 0.0, 5.0), target=(0.0, 0.0, 5.0))
    actions = _hover()
    actions[:, 0] = actions[:, 3] = 0.2
    env.step(actions)
    sideways = 0.2 * MASS * MARS / MASS  # m/s^2 of the centre of mass
    # (within 1%: the free joint's velocity is the chassis origin's, 1.2 cm below the centre of mass, which the
    # pitch moves; it measured 0.15% off)
    torch.testing.assert_close(env.qvel[:, 0].float(), torch.full((4,), sideways * 0.01), rtol=1e-2, atol=0)
    assert float(env.qvel[:, 4].abs().min()) > 0.0  # (the pitch)


def test_the_target_moves_before_the_step_after_every_500th(env):
    """IsaacGymEnvs draws a new target where progress % 500 == 0 in pre_physics_step: the step's reward measures
    it, and the observation the policy acted on showed the old one."""
    _place(env, position=(0.0, 0.0, 1.5), target=(0.0, 0.0, 1.5))
    env.progress[:] = torch.tensor([499, 500, 1000, 1001])
    before = env.targets.clone()
    obs, reward, _, _ = env.step(_hover())
    moved = (env.targets != before).any(dim=1)
    assert moved.tolist() == [False, True, True, False]
    low, high = torch.tensor([-5.0, -5.0, 1.0]), torch.tensor([5.0, 5.0, 2.0])
    assert bool(((env.targets >= low) & (env.targets <= high)).all())
    distance = (env.targets - env.qpos[:, 0:3].float()).norm(dim=1)
    torch.testing.assert_close(reward, (7.0 / (1.0 + distance * distance)).to(reward.dtype), rtol=0, atol=1e-3)
    torch.testing.assert_close(obs["obs"][:, 0:3], ((env.targets - env.qpos[:, 0:3].float()) / 3.0).clamp(-5, 5),
                               rtol=0, atol=1e-6)


def test_a_reset_puts_the_chassis_in_its_box_upright_at_rest_with_a_new_target(env):
    _place(env, position=(7.0, 7.0, 7.0), quat=(0.0, 1.0, 0.0, 0.0))
    env.qvel[:] = 3.0
    before = env.targets.clone()
    env.reset_idx(torch.arange(4))
    position = env.qpos[:, 0:3].float()
    assert bool(((position[:, 0:2].abs() <= 1.5).all(dim=1) & (position[:, 2] >= 0.8) & (position[:, 2] <= 2.5)).all())
    torch.testing.assert_close(env.qpos[:, 3:7].float(), torch.tensor([[1.0, 0.0, 0.0, 0.0]] * 4), rtol=0, atol=0)
    assert float(env.qvel.abs().max()) == 0.0
    assert bool((env.targets != before).any(dim=1).all())
    assert float(env.derived["xfrc_applied"].abs().max()) == 0.0


@pytest.mark.parametrize("task,sim", [pytest.param(task, sim, marks=mjwarp_marks(task) if sim == "mjwarp" else [])
                                      for task in ("Ingenuity", "Quadcopter") for sim in ("mujoco", "mjwarp")])
def test_the_flying_tasks_train_through_the_cli_on_both_backends(tmp_path, task, sim):
    """One small iteration with the task's own agent config (the learning figures are benchmarks)."""
    from helpers import train_in_process

    if sim == "mjwarp" and importlib.util.find_spec("mujoco_warp") is None:
        require_system("sim=mjwarp needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    result = train_in_process(str(tmp_path), f"task={task}", f"sim={sim}", "num_envs=16", "agent.horizon=8",
                              "agent.num_mini_batches=2", "max_iterations=1", "eval.final=false", "diagnostics=off")
    assert result.summary["iterations"] == 1 and result.summary["env_steps"] == 128
