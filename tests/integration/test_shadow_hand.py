"""ShadowHand's semantics with known answers (issue 47), on mujoco.batch: the reward from set states, a success that
draws a new goal without ending the episode, a drop that ends it, the observation layouts, IsaacGymEnvs' action
and reset rules. (Both backends: test_backend_contract.py and test_mjwarp.py.)"""
from __future__ import annotations

import math

import pytest
import torch

from isaac_ppo.envs import make
from isaac_ppo.tasks.manipulation.shadow_hand import (FINGERTIPS, GOAL_POSITION, OBS_SIZES, hand_reward,
                                                      quat_conjugate, quat_mul, random_rotation)

SCALES = {"distRewardScale": -10.0, "rotRewardScale": 1.0, "rotEps": 0.1, "actionPenaltyScale": -0.0002,
          "reachGoalBonus": 250.0, "fallDistance": 0.24, "fallPenalty": 0.0, "successTolerance": 0.1}


def about_x(angle: float) -> torch.Tensor:
    return torch.tensor([[math.sin(angle / 2), 0.0, 0.0, math.cos(angle / 2)]])


def test_the_reward_at_the_goal_and_away_from_it():
    goal = torch.tensor(GOAL_POSITION)
    at_goal, _, _, terms, rotation = hand_reward(goal[None].clone(), about_x(0.05), goal, about_x(0.0),
                                                 torch.zeros(1, 20), SCALES)
    assert rotation.item() == pytest.approx(0.05, abs=1e-6)
    assert terms["rotation"].item() == pytest.approx(1.0 / 0.15) and terms["success_bonus"].item() == 250.0
    assert at_goal.item() == pytest.approx(1.0 / 0.15 + 250.0)
    away = goal + torch.tensor([0.0, 0.0, 0.1])
    reward, reached, fell, terms, _ = hand_reward(away[None], about_x(math.pi / 2), goal, about_x(0.0),
                                                  torch.ones(1, 20), SCALES)
    assert not reached.item() and not fell.item()
    assert reward.item() == pytest.approx(-1.0 + 1.0 / (math.pi / 2 + 0.1) - 0.0002 * 20)
    _, _, fell, _, _ = hand_reward((goal + torch.tensor([0.0, 0.0, -0.25]))[None], about_x(0.0), goal,
                                   about_x(0.0), torch.zeros(1, 20), SCALES)
    assert fell.item()  # 0.25 m from the goal position: past fallDistance


def test_a_success_draws_a_new_goal_and_the_episode_goes_on():
    env = make("ShadowHand", 2, sim="mujoco", seed=0, env={"observationType": "openai"})
    env.reset()
    # turn env 1's block to its goal
    goal = env.goal_rot[1].clone()
    at = env.block_qpos
    env.qpos[1, at + 3:at + 7] = torch.cat((goal[3:], goal[:3])).to(env.qpos.dtype)
    env.qvel[1] = 0.0
    _, reward, resets, extras = env.step(torch.zeros(2, 20))
    assert not resets.any()
    assert extras["reward_terms"]["success_bonus"].tolist() == [0.0, 250.0]
    assert env.successes.tolist() == [0.0, 1.0]
    assert not torch.equal(env.goal_rot[1], goal)  # a new goal, the same episode
    assert env.progress[1].item() == 1


def test_a_dropped_block_ends_the_episode_as_terminal_and_its_successes_are_counted():
    env = make("ShadowHand", 2, sim="mujoco", seed=0, env={"observationType": "openai"})
    env.reset()
    env.successes[0] = 3.0  # (three goals reached in this episode so far)
    env.qpos[0, env.block_qpos:env.block_qpos + 3] = torch.tensor([0.0, -0.39, 0.2], dtype=env.qpos.dtype)
    _, _, resets, extras = env.step(torch.zeros(2, 20))
    assert resets.tolist() == [True, False] and not extras["time_outs"].any()
    # the episode's successes are its outcome (evaluation's eval.successes), and IsaacGymEnvs' running mean over the
    # episodes that ended, averFactor 0.1 x 3 / 1 + 0.9 x 0, is the task's state (episode/consecutive_successes)
    assert extras["outcomes"]["successes"][0].item() == 3.0
    assert extras["task_state"]["consecutive_successes"].item() == pytest.approx(0.3)
    assert env.successes[0].item() == 0.0  # (a new episode)


@pytest.mark.parametrize("kind", list(OBS_SIZES))
def test_each_observation_type_has_isaacgymenvs_size_and_layout(kind):
    env = make("ShadowHand", 3, sim="mujoco", seed=1, env={"observationType": kind})
    obs = env.reset()["obs"]
    assert obs.shape == (3, OBS_SIZES[kind])
    block = env.block(slice(0, 3))
    diff = quat_mul(block["quat"], quat_conjugate(env.goal_rot))
    if kind == "openai":
        torch.testing.assert_close(obs[:, 15:18], block["pos"])
        torch.testing.assert_close(obs[:, 18:22], diff)
    else:
        scaled = (2 * env.qpos[:, :24].float() - env.hand_upper - env.hand_lower) / (env.hand_upper - env.hand_lower)
        torch.testing.assert_close(obs[:, 0:24], scaled)


def test_the_fingertip_states_are_mujocos_own_poses_quaternion_signs_included():
    """The fingertips' positions and (x, y, z, w) quaternions (full_state's 96:161) against MuJoCo's mj_kinematics
    (xpos, xquat) at joints drawn across their ranges: the quaternion is xquat itself, sign included, to float32's
    rounding. (The quaternion read back from the float32 rotation matrix by square roots, with w >= 0, failed
    both: here up to 2e-6 off even with its sign forgiven, ~2e-4 on CUDA where a component was zero, the GPU kit's
    fifth proof; and its sign was not xquat's.)"""
    import mujoco
    import numpy as np

    env = make("ShadowHand", 1, sim="mujoco", seed=0, env={"observationType": "full_state"})
    env.reset()
    model = env.model
    data = mujoco.MjData(model)
    generator = torch.Generator().manual_seed(5)
    worst = 0.0
    for _ in range(8):
        joints = env.hand_lower + (env.hand_upper - env.hand_lower) * torch.rand(24, generator=generator)
        data.qpos[:24] = joints.double().numpy()
        mujoco.mj_kinematics(model, data)
        env.qpos[0, :24] = torch.from_numpy(data.qpos[:24].copy())
        tips = env.compute_observations(slice(0, 1))[0, 96:161].reshape(5, 13)
        for row, name in zip(tips, FINGERTIPS):
            body = model.body(name).id
            np.testing.assert_allclose(row[0:3].numpy(), data.xpos[body], atol=2e-6)
            quat = np.roll(data.xquat[body], -1)  # (MuJoCo's w, x, y, z to x, y, z, w)
            worst = max(worst, float(np.abs(row[3:7].numpy() - quat).max()))
    assert worst < 1e-6, f"fingertip quaternions {worst:.2e} from MuJoCo's xquat"


def test_asymmetric_gives_the_critic_full_states_211():
    env = make("ShadowHand", 2, sim="mujoco", seed=1, env={"observationType": "openai",
                                                           "asymmetric_observations": True})
    out = env.reset()
    assert out["obs"].shape == (2, 42) and out["states"].shape == (2, 211)
    torch.testing.assert_close(out["states"][:, 72:75], out["obs"][:, 15:18])  # the block's position in both


def test_absolute_actions_scale_to_the_joint_ranges_and_a_reset_draws_joints_near_zero():
    env = make("ShadowHand", 2, sim="mujoco", seed=2, env={"observationType": "openai"})
    env.reset()
    joints = env.qpos[:, :24].float()
    assert ((joints >= 0.2 * env.hand_lower - 1e-6) & (joints <= 0.2 * env.hand_upper + 1e-6)).all()
    torch.testing.assert_close(env.targets, joints[:, env.actuated])
    env.step(torch.ones(2, 20))
    torch.testing.assert_close(env.targets, env.upper.expand(2, 20))
    env.step(-torch.ones(2, 20))
    torch.testing.assert_close(env.targets, env.lower.expand(2, 20))


def test_goals_are_isaacgymenvs_two_angle_rotations():
    u = torch.tensor([0.5, -1.0])
    q = random_rotation(u[:1], u[1:])  # a half turn about x, then a whole turn about y (-pi)
    expected = quat_mul(about_x(math.pi / 2), torch.tensor([[0.0, -1.0, 0.0, 0.0]]))
    torch.testing.assert_close(q, expected, atol=1e-6, rtol=0)
