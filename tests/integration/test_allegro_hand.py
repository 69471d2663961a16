"""AllegroHand's semantics with known answers (issue 88), on mujoco.batch: the observation layouts index by index,
each reward term from set block and goal poses (a success, its bonus and new goal, a fall, the time-out penalty
under maxConsecutiveSuccesses), actions to targets (moving average, clamping, relative control at sim.dt), a reset
within its noise, the block resting on the held hand, the control step, bad input refused, and a small training
iteration on both backends. (The contract on both backends: test_backend_contract.py; MuJoCo Warp against
mujoco.batch: test_mjwarp.py.)"""
from __future__ import annotations

import importlib.util
import math

import pytest
import torch

from helpers import MJWARP_WORKER, require_system

from isaac_ppo.envs import make
from isaac_ppo.errors import UserError
from isaac_ppo.tasks.manipulation.allegro_hand import GOAL_POSITION, OBJECT_START, OBS_SIZES
from isaac_ppo.tasks.manipulation.hand import quat_conjugate, quat_mul

ALL = slice(0, 2)


def about_x(angle: float) -> torch.Tensor:
    return torch.tensor([math.sin(angle / 2), 0.0, 0.0, math.cos(angle / 2)])


def place(env, env_id: int, position, quat_xyzw) -> None:
    """Env env_id's block at a set pose, at rest."""
    at = env.block_qpos
    x, y, z, w = (float(v) for v in quat_xyzw)
    env.qpos[env_id, at:at + 7] = torch.tensor([*position, w, x, y, z], dtype=env.qpos.dtype)
    env.qvel[env_id, env.block_qvel:env.block_qvel + 6] = 0.0


@pytest.fixture(scope="module")
def env():
    return make("AllegroHand", 2, sim="mujoco", seed=0)


def test_the_full_state_layout_index_by_index(env):
    env.reset()
    generator = torch.Generator().manual_seed(1)
    joints = env.hand_lower + (env.hand_upper - env.hand_lower) * torch.rand(2, 16, generator=generator)
    env.qpos[:, :16] = joints.double()
    env.qvel[:, :16] = (torch.rand(2, 16, generator=generator) - 0.5).double()
    place(env, 0, (0.01, -0.21, 0.55), about_x(0.3))
    place(env, 1, (0.0, -0.2, 0.56), about_x(-1.0))
    env.qvel[:, env.block_qvel:env.block_qvel + 3] = torch.tensor([0.1, -0.2, 0.3], dtype=env.qvel.dtype)
    env.qvel[:, env.block_qvel + 3:env.block_qvel + 6] = torch.tensor([1.0, 0.0, 0.0], dtype=env.qvel.dtype)  # (body frame)
    env.last_actions[:] = torch.linspace(-1, 1, 16)
    env.sim.forward(torch.arange(2))
    obs = env.compute_observations(ALL)
    assert obs.shape == (2, 88)
    torch.testing.assert_close(obs[:, 0:16], (2 * joints - env.hand_upper - env.hand_lower)
                               / (env.hand_upper - env.hand_lower))
    torch.testing.assert_close(obs[:, 16:32], 0.2 * env.qvel[:, :16].float())
    torch.testing.assert_close(obs[:, 32:48], 10.0 * env.derived["qfrc_actuator"][:, :16].float())
    torch.testing.assert_close(obs[0, 48:55], torch.tensor([0.01, -0.21, 0.55, *about_x(0.3).tolist()]))
    torch.testing.assert_close(obs[:, 55:58], torch.tensor([[0.1, -0.2, 0.3]] * 2))
    # a turn about the body's x of 1 rad/s, x 0.2, in the world frame: env 1's block is turned -1 rad about x
    torch.testing.assert_close(obs[1, 58:61], torch.tensor([0.2, 0.0, 0.0]), atol=1e-6, rtol=0)
    torch.testing.assert_close(obs[:, 61:64], torch.tensor([GOAL_POSITION] * 2))
    torch.testing.assert_close(obs[:, 64:68], env.goal_rot)
    torch.testing.assert_close(obs[:, 68:72], quat_mul(obs[:, 51:55], quat_conjugate(env.goal_rot)))
    torch.testing.assert_close(obs[:, 72:88], env.last_actions)


@pytest.mark.parametrize("kind", ["full", "full_no_vel"])
def test_the_other_observation_types_are_full_states_columns(kind):
    env = make("AllegroHand", 2, sim="mujoco", seed=2, env={"observationType": kind, "asymmetric_observations": True})
    out = env.reset()
    obs, full = out["obs"], out["states"]  # (the critic's: full_state's 88)
    assert obs.shape == (2, OBS_SIZES[kind]) and full.shape == (2, 88)
    columns = (list(range(0, 32)) + list(range(48, 88)) if kind == "full"
               else list(range(0, 16)) + list(range(48, 55)) + list(range(61, 88)))
    torch.testing.assert_close(obs, full[:, columns])


def test_each_reward_term_from_set_poses(env):
    env.reset()
    env.goal_rot[:] = about_x(0.0)
    place(env, 0, GOAL_POSITION, about_x(0.05))  # at the goal, 0.05 rad off: a success
    place(env, 1, (0.0, -0.2, 0.62), about_x(math.pi / 2))  # 0.1 m above it, a quarter turn off
    env.last_actions[:] = torch.tensor([[0.0] * 16, [1.0] * 16])
    env.compute_observations(ALL)
    reward, terminated = env.compute_reward(None, ALL)
    terms = env.reward_terms
    assert terms["distance"].tolist() == pytest.approx([0.0, -1.0], abs=1e-5)
    assert terms["rotation"].tolist() == pytest.approx([1 / 0.15, 1 / (math.pi / 2 + 0.1)], rel=1e-4)
    assert terms["action_penalty"].tolist() == pytest.approx([0.0, -0.0002 * 16])
    assert terms["success_bonus"].tolist() == [250.0, 0.0] and terms["fall_penalty"].tolist() == [0.0, 0.0]
    torch.testing.assert_close(reward, sum(terms.values()))
    assert not terminated.any()
    assert env.successes.tolist() == [1.0, 0.0]
    assert not torch.equal(env.goal_rot[0], about_x(0.0)) and torch.equal(env.goal_rot[1], about_x(0.0))  # a new goal


def test_a_success_goes_on_and_a_drop_ends_the_episode_as_terminal():
    env = make("AllegroHand", 2, sim="mujoco", seed=0, env={"fallPenalty": -5.0, "useRelativeControl": True})  # (held)
    env.reset()
    goal = env.goal_rot[1].clone()
    place(env, 1, (0.0, -0.2, 0.66), goal)  # (turned to its goal, in the air above the hand: a step of free fall)
    env.make_terminal(torch.tensor([0]))  # env 0's block dropped beside the hand
    env.successes[0] = 2.0
    _, _, resets, extras = env.step(torch.zeros(2, 16))
    assert resets.tolist() == [True, False] and not extras["time_outs"].any()
    assert extras["reward_terms"]["fall_penalty"].tolist() == [-5.0, 0.0]
    assert extras["reward_terms"]["success_bonus"].tolist() == [0.0, 250.0]
    assert extras["outcomes"]["successes"].tolist() == [2.0, 1.0]
    assert extras["task_state"]["consecutive_successes"].item() == pytest.approx(0.2)  # 0.1 x 2 / 1
    assert env.successes.tolist() == [0.0, 1.0] and env.progress.tolist() == [0, 1]


def test_max_consecutive_successes_ends_the_episode_and_a_time_out_pays_half_the_fall_penalty():
    env = make("AllegroHand", 2, sim="mujoco", seed=0, episodeLength=5,
               env={"maxConsecutiveSuccesses": 3, "fallPenalty": -4.0, "useRelativeControl": True})
    env.reset()
    env.successes[1] = 2.0
    place(env, 1, (0.0, -0.2, 0.66), env.goal_rot[1])  # (as above: in the air, turned to its goal)
    env.progress[0] = 4  # (env 0's fifth step times out)
    place(env, 0, (0.0, -0.2, 0.66), quat_mul(env.goal_rot[0], about_x(1.0)))
    _, _, resets, extras = env.step(torch.zeros(2, 16))
    assert resets.tolist() == [True, True]
    assert extras["time_outs"].tolist() == [True, False]  # env 1: its third success, terminal
    assert extras["reward_terms"]["fall_penalty"].tolist() == [-2.0, 0.0]


def test_absolute_actions_to_targets_with_the_moving_average_and_clamping():
    env = make("AllegroHand", 2, sim="mujoco", seed=3, env={"actionsMovingAverage": 0.25})
    env.reset()
    before = env.targets.clone()
    actions = torch.tensor([[0.5] * 16, [-2.0] * 16])  # (env 1's clipped to -1 by clipActions)
    env.step(actions)
    scaled = env.lower + 0.5 * (actions.clamp(-1, 1) + 1) * (env.upper - env.lower)
    torch.testing.assert_close(env.targets, torch.max(torch.min(0.25 * scaled + 0.75 * before, env.upper), env.lower))
    torch.testing.assert_close(env.ctrl.float(), env.targets)
    full = make("AllegroHand", 1, sim="mujoco", seed=3)
    full.reset()
    full.step(torch.ones(1, 16))
    torch.testing.assert_close(full.targets[0], full.upper)  # (the joint ranges' upper ends)


def test_relative_actions_step_the_targets_by_dof_speed_scale_times_sim_dt():
    env = make("AllegroHand", 1, sim="mujoco", seed=4, env={"useRelativeControl": True})
    env.reset()
    before = env.targets.clone()
    env.step(torch.full((1, 16), 0.5))
    expected = torch.max(torch.min(before + 20.0 * 0.01667 * 0.5, env.upper), env.lower)  # (sim.dt, not the 2 x)
    torch.testing.assert_close(env.targets, expected)


def test_the_control_step_is_two_physics_steps_of_sim_dt(env):
    assert env.dt == pytest.approx(2 * 0.01667)
    assert env.substeps * env.model.opt.timestep == pytest.approx(env.dt)
    assert env.max_episode_length == 600


def test_a_reset_is_within_its_noise():
    env = make("AllegroHand", 64, sim="mujoco", seed=5)
    env.reset()
    block = env.qpos[:, env.block_qpos:env.block_qpos + 3].float()
    assert (block - torch.tensor(OBJECT_START)).abs().max() <= 0.01 + 1e-6
    joints = env.qpos[:, :16].float()
    low, high = torch.minimum(0.2 * env.hand_lower, 0.2 * env.hand_upper), torch.maximum(0.2 * env.hand_lower,
                                                                                         0.2 * env.hand_upper)
    assert ((joints >= low - 1e-6) & (joints <= high + 1e-6)).all()
    assert float(env.qvel.abs().max()) == 0.0
    torch.testing.assert_close(env.targets, joints)
    assert (env.goal_rot.norm(dim=1) - 1).abs().max() < 1e-5 and env.successes.abs().max() == 0


def test_the_block_resting_on_the_held_hand_stays():
    env = make("AllegroHand", 2, sim="mujoco", seed=0, env={"useRelativeControl": True})
    env.reset()
    env.qpos[:, :16] = 0.0
    env.qpos[:, 12] = float(env.hand_lower[12])  # (thumb_joint_0's range starts at 0.28 rad)
    env.qvel[:] = 0.0
    env.targets[:] = env.qpos[:, :16].float()
    for i in range(2):
        place(env, i, OBJECT_START, about_x(0.0))
    hold = torch.zeros(2, 16)
    for _ in range(15):  # (it drops 3 cm onto the fingers and settles)
        env.step(hold)
    settled = env.qpos[:, env.block_qpos:env.block_qpos + 3].clone()
    for _ in range(30):
        _, _, resets, _ = env.step(hold)
        assert not resets.any()
    moved = (env.qpos[:, env.block_qpos:env.block_qpos + 3] - settled).norm(dim=1)
    assert float(moved.max()) < 0.003  # (1 s: a creep of under 3 mm)


@pytest.mark.parametrize("override, message", [
    # AllegroHandLSTM.yaml's observation type, which IsaacGymEnvs 1.5.1's allegro_hand.py refuses too
    ("task.env.observationType=no_vel",
     "task.env.observationType='no_vel' is outside its domain: one of full_no_vel, full, full_state"),
    ("task.env.objectType=egg", "task.env.objectType='egg' is outside its domain: one of block"),
    ("task.env.controlFrequencyInv=0",
     "task.env.controlFrequencyInv=0 is outside its domain: an integer in [1, inf)"),
    ("task.env.fallPenalty=5", "task.env.fallPenalty=5 is outside its domain: a number in (-inf, 0]"),
])
def test_bad_input_is_refused_in_one_line_before_anything_is_made(tmp_path, override, message):
    from isaac_ppo.config.compose import compose_config

    with pytest.raises(UserError) as refused:
        compose_config(["task=AllegroHand", override, "num_envs=64", "agent.minibatch_size=256", "max_iterations=1",
                        "sim=mujoco", f"runs_dir={tmp_path / 'runs'}"])
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)
    assert not (tmp_path / "runs").exists()


def test_make_refuses_an_observation_type_allegro_hand_has_not_in_one_line():
    with pytest.raises(UserError, match=r"^task.env.observationType='no_vel': AllegroHand has full_no_vel, full, "
                                        r"full_state [^\n]*$"):
        make("AllegroHand", 2, sim="mujoco", env={"observationType": "no_vel"})


@pytest.mark.parametrize("sim", ["mujoco", pytest.param("mjwarp", marks=[MJWARP_WORKER, pytest.mark.slow])])
def test_it_trains_through_the_cli_on_both_backends(tmp_path, sim):
    """One small iteration with the task's own agent config (the learning figures are benchmarks)."""
    from helpers import train_in_process

    if sim == "mjwarp" and importlib.util.find_spec("mujoco_warp") is None:
        require_system("sim=mjwarp needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    result = train_in_process(str(tmp_path), "task=AllegroHand", f"sim={sim}", "num_envs=16", "agent.horizon=8",
                              "agent.num_mini_batches=2", "max_iterations=1", "eval.final=false", "diagnostics=off")
    assert result.summary["iterations"] == 1 and result.summary["env_steps"] == 128
