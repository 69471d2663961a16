"""FrankaCabinet's semantics with known answers (issue 47), on mujoco.batch: the kinematics against MuJoCo's own, the
observation layout from a set state, IsaacGymEnvs' reward from set frames (the open bonus, the behind-the-handle
penalty), its action and reset rules, the success that ends an episode, and that the model's fingers can hold the
handle and pull the drawer open. (Both backends: test_backend_contract.py and test_mjwarp.py.)"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from isaac_ppo.envs import make
from isaac_ppo.tasks.manipulation.franka_cabinet import DEFAULT_DOF_POS, franka_cabinet_reward

SCALES = {"distRewardScale": 2.0, "rotRewardScale": 0.5, "aroundHandleRewardScale": 0.25, "openRewardScale": 7.5,
          "fingerDistRewardScale": 5.0, "actionPenaltyScale": 0.01}  # (cfg/task/FrankaCabinet.yaml's)
HANDLE_CLOSED = (0.0515 + 0.3, 0.01, 0.4 + 0.3172)  # the handle's grasp point, drawer closed: cabinet, joint, (0.3, 0.01, 0)
BAR_ABOVE = 0.01  # the handle's bar (2 cm tall) is centred 1 cm above that point


@pytest.fixture(scope="module")
def env():
    return make("FrankaCabinet", 4, sim="mujoco", seed=0, env={"numProps": 0}, mujoco={"nthread": 1})


def aligned_frames(opening: float, left_dz: float = 0.02, right_dz: float = -0.02, finger_dx: float = 0.0):
    """Frames of one env with the grasp point on the handle (drawer open by `opening`), the gripper's forward axis
    along the drawer's inward one (-x) and its up axis along z, the fingers above and below the handle by the dz."""
    handle = torch.tensor([[HANDLE_CLOSED[0] + opening, HANDLE_CLOSED[1], HANDLE_CLOSED[2]]])
    gripper = torch.stack((torch.tensor([0.0, -1.0, 0.0]), torch.tensor([0.0, 0.0, 1.0]),
                           torch.tensor([-1.0, 0.0, 0.0])), dim=1).unsqueeze(0)  # x = -y, y = z, z = -x
    finger = handle + torch.tensor([[finger_dx, 0.0, 0.0]])
    return {"grasp_pos": handle.clone(), "grasp_rot": gripper, "handle_pos": handle, "handle_rot": torch.eye(3)[None],
            "left_finger": finger + torch.tensor([[0.0, 0.0, left_dz]]),
            "right_finger": finger + torch.tensor([[0.0, 0.0, right_dz]])}


def test_the_kinematics_match_mujocos_own(env):
    import mujoco

    model = env.model
    data = mujoco.MjData(model)
    generator = torch.Generator().manual_seed(3)
    for _ in range(5):
        qpos = env.lower + (env.upper - env.lower) * torch.rand(9, generator=generator)
        data.qpos[:9] = qpos.double().numpy()
        data.qpos[env.drawer_qpos] = 0.25
        mujoco.mj_kinematics(model, data)
        poses = env.kinematics(torch.from_numpy(data.qpos.copy())[None])
        for name, (position, rotation) in poses.items():
            body = model.body(name).id
            np.testing.assert_allclose(position[0].numpy(), data.xpos[body], atol=1e-6)
            np.testing.assert_allclose(rotation[0].numpy(), data.xmat[body].reshape(3, 3), atol=1e-6)


def test_the_observation_layout_from_a_set_state(env):
    env.reset()
    position = torch.tensor(DEFAULT_DOF_POS, dtype=torch.float64)
    velocity = torch.linspace(-1.0, 1.0, 9, dtype=torch.float64)
    env.qpos[:, env.arm_qpos] = position
    env.qvel[:, env.arm_qvel] = velocity
    env.qpos[:, env.drawer_qpos], env.qvel[:, env.drawer_qvel] = 0.2, 0.1
    obs = env.compute_observations(slice(0, 4))
    assert obs.shape == (4, 23)
    scaled = 2.0 * (position.float() - env.lower) / (env.upper - env.lower) - 1.0
    torch.testing.assert_close(obs[:, 0:9], scaled.expand(4, 9))
    assert obs[0, 7].item() == pytest.approx(2 * 0.035 / 0.04 - 1)  # a finger at 3.5 of its 4 cm
    torch.testing.assert_close(obs[:, 9:18], (0.1 * velocity.float()).expand(4, 9))
    frames = env.frames(slice(0, 4))
    torch.testing.assert_close(frames["handle_pos"][0], torch.tensor([HANDLE_CLOSED[0] + 0.2, *HANDLE_CLOSED[1:]]))
    torch.testing.assert_close(obs[:, 18:21], frames["handle_pos"] - frames["grasp_pos"])
    torch.testing.assert_close(obs[:, 21:23], torch.tensor([[0.2, 0.1]] * 4))
    # IsaacGymEnvs' grasp point: 4 cm along link 7's y from the closed fingers' midpoint (0.1654 m out on link 7)
    torch.testing.assert_close(env.grasp_local, torch.tensor([0.0, 0.04, 0.1654]), atol=1e-6, rtol=0)


def test_the_reward_around_the_handle_with_the_drawer_open_and_the_success_bonus():
    # on the handle (d = 0: (1 / 1)^2 doubled = 2), aligned (rotation 1), the fingers 2 cm above and below (around:
    # 0.5, finger closeness (0.04 - 0.02) x 2 = 0.04), no action
    reward, terms, opening, distance = franka_cabinet_reward(aligned_frames(0.25), torch.tensor([0.25]),
                                                             torch.zeros(1, 9), SCALES)
    expected = {"distance": 2.0 * 2.0, "rotation": 0.5 * 1.0, "around_handle": 0.25 * 0.5,
                "open": 7.5 * 0.25 * 1.5, "finger_distance": 5.0 * 0.04, "action_penalty": 0.0,
                "open_bonus": 0.5 + 0.5, "behind_handle": 0.0}  # (bonus: past 1 cm, and the 0.5 again past 20 cm)
    assert {k: v.item() for k, v in terms.items()} == pytest.approx(expected)
    assert reward.item() == pytest.approx(sum(expected.values())) and distance.item() == 0.0
    # past 0.39 m: twice the around-handle 0.5 more
    reward_open, terms_open, _, _ = franka_cabinet_reward(aligned_frames(0.395), torch.tensor([0.395]),
                                                          torch.zeros(1, 9), SCALES)
    assert terms_open["open_bonus"].item() == pytest.approx(0.5 + 0.5 + 1.0)
    # an action costs 0.01 |a|^2; the fingers both above the handle: no around-handle pay, no finger closeness
    _, terms_other, _, _ = franka_cabinet_reward(aligned_frames(0.25, left_dz=0.03, right_dz=0.01),
                                                 torch.tensor([0.25]), torch.ones(1, 9), SCALES)
    assert terms_other["action_penalty"].item() == pytest.approx(-0.09)
    assert terms_other["around_handle"].item() == 0.0 and terms_other["finger_distance"].item() == 0.0
    assert terms_other["open"].item() == pytest.approx(7.5 * 0.25)


def test_a_finger_behind_the_handle_makes_the_reward_minus_one():
    # IsaacGymEnvs' "bad style": a finger more than 4 cm behind the handle (towards the cabinet), whatever else
    for dx, behind in ((-0.039, False), (-0.041, True)):
        reward, terms, _, _ = franka_cabinet_reward(aligned_frames(0.25, finger_dx=dx), torch.tensor([0.25]),
                                                    torch.zeros(1, 9), SCALES)
        assert (reward.item() == -1.0) == behind
        assert sum(terms.values()).item() == pytest.approx(reward.item())  # (the terms still add up to it)


def test_an_action_moves_the_joint_targets_at_the_speed_scales_within_the_limits(env):
    env.reset()
    start = env.targets.clone()
    env.step(torch.ones(4, 9))
    step = 7.5 / 60.0  # actionScale x 1/60 s
    expected = torch.min(start + torch.tensor([step] * 7 + [0.1 * step] * 2), env.upper)
    torch.testing.assert_close(env.targets, expected)
    for _ in range(60):  # held at +1: every target stops at its upper limit
        env.step(torch.ones(4, 9))
    torch.testing.assert_close(env.targets, env.upper.expand(4, 9))
    torch.testing.assert_close(env.ctrl[:, :9].float(), env.targets)


def test_a_reset_draws_the_arm_near_its_default_pose_at_rest_with_the_drawer_closed(env):
    env.reset()
    position = env.qpos[:, env.arm_qpos].float()
    default = torch.tensor(DEFAULT_DOF_POS)
    clamped = torch.max(torch.min(default, env.upper), env.lower)
    assert ((position - clamped).abs() <= 0.125 + 1e-6).all()
    assert (position[:, :7] != default[:7]).all()  # (drawn afresh, not the default itself)
    torch.testing.assert_close(env.targets, position)
    assert (env.qvel == 0).all() and (env.qpos[:, env.drawer_qpos] == 0).all()
    assert (position[:, 7:] <= 0.04).all()  # (the fingers' default 3.5 cm + up to 1.25: clamped at 4 cm)


def test_opening_the_drawer_past_0_39_m_ends_the_episode_as_a_success():
    env = make("FrankaCabinet", 2, sim="mujoco", seed=1, env={"numProps": 0})
    env.reset()
    env.qpos[1, env.drawer_qpos], env.qvel[1, env.drawer_qvel] = 0.395, 0.2
    _, reward, resets, extras = env.step(torch.zeros(2, 9))
    assert resets.tolist() == [False, True] and not extras["time_outs"].any()
    assert extras["outcomes"]["drawer_opened"].tolist() == [0.0, 1.0]
    assert extras["reward_terms"]["open_bonus"][1].item() >= 0.5  # (past 1 cm, whatever the fingers do)
    assert env.qpos[1, env.drawer_qpos].item() == 0.0  # reset: closed again
    # the ending step's measures are its episode's (the drawer past 0.39 m), not the reset's closed drawer
    assert extras["measures"]["drawer_opening_m"][1].item() > 0.39


def test_without_open_ends_episode_the_drawer_past_0_39_m_runs_to_the_time_out_and_counts_there():
    """env.openEndsEpisode=false: the same step pays the same reward, ends nothing, and the episode's outcome is read
    at its time-out (the drawer still past 0.39 m: opened)."""
    ends = make("FrankaCabinet", 2, sim="mujoco", seed=1, env={"numProps": 0, "episodeLength": 3})
    runs = make("FrankaCabinet", 2, sim="mujoco", seed=1, env={"numProps": 0, "episodeLength": 3,
                                                               "openEndsEpisode": False})
    steps = []
    for env in (ends, runs):
        env.reset()
        env.qpos[1, env.drawer_qpos], env.qvel[1, env.drawer_qvel] = 0.395, 0.2
        steps.append(env.step(torch.zeros(2, 9)))
    torch.testing.assert_close(steps[1][1], steps[0][1])  # the same reward, bonus included
    assert steps[0][2].tolist() == [False, True] and steps[1][2].tolist() == [False, False]
    assert runs.qpos[1, runs.drawer_qpos].item() > 0.39  # not reset
    for _ in range(2):
        _, _, resets, extras = runs.step(torch.zeros(2, 9))
    assert resets.tolist() == [True, True] and extras["time_outs"].tolist() == [True, True]
    assert extras["outcomes"]["drawer_opened"].tolist() == [0.0, 1.0]  # (the drawer, damped, still past 0.39 m)


def test_evaluation_is_of_the_task_with_its_terminal_line_whatever_the_training_envs_have():
    from isaac_ppo.config.compose import compose_config
    from isaac_ppo.loop.build import _make_env

    cfg = compose_config(["task=FrankaCabinet", "sim=mujoco", "task.env.numProps=0", "task.env.openEndsEpisode=false"])
    training = _make_env(cfg, 2, 0, "cpu")
    evaluation = _make_env(cfg, 2, 0, "cpu", evaluation=True)
    assert (training.open_ends_episode, evaluation.open_ends_episode) == (False, True)


def test_with_velocity_limits_every_joint_keeps_to_its_urdf_limit_and_without_them_the_arm_goes_past():
    """mujoco.velocity_limits=true holds each joint to URDF_VELOCITY_LIMITS after every physics step; the default
    (false: MuJoCo's, none) lets bang-bang actions drive an arm joint past 2.61 rad/s."""
    from isaac_ppo.tasks.manipulation.franka_cabinet import URDF_VELOCITY_LIMITS

    peaks = {}
    for limited in (False, True):
        runs = make("FrankaCabinet", 8, sim="mujoco", seed=0, env={"numProps": 0},
                    mujoco={"nthread": 1, "velocity_limits": limited})
        runs.reset()
        actions = torch.Generator().manual_seed(1)
        dofs = {name: int(runs.model.joint(name).dofadr[0]) for name in URDF_VELOCITY_LIMITS}
        peak = {name: 0.0 for name in dofs}
        for _ in range(60):
            runs.step(torch.sign(torch.randn(8, 9, generator=actions)))
            for name, dof in dofs.items():
                peak[name] = max(peak[name], float(runs.qvel[:, dof].abs().max()))
        peaks[limited] = peak
    assert max(peaks[False][f"panda_joint{i}"] for i in range(1, 8)) > 2.61
    for name, limit in URDF_VELOCITY_LIMITS.items():
        assert peaks[True][name] <= limit + 1e-12, (name, peaks[True][name], limit)
    assert peaks[True]["panda_joint1"] == pytest.approx(2.175)  # (reached: the limit binds, not the drive)


@pytest.mark.slow
def test_a_training_records_its_time_to_solve_by_drawer_opened_in_metrics_json(tmp_path):
    """The task's solve_measures through the CLI: its final evaluation (4 episodes of an untrained policy, none of
    which opens the drawer: drawer_opened 0) reaches a threshold of 0 and not one of 0.5, and metrics.json records
    both under measure_solve_times, at that evaluation's env steps."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "isaac_ppo.train", "task=FrankaCabinet", "sim=mujoco", "num_envs=8",
                           "max_iterations=1", "agent.minibatch_size=64", "eval.num_envs=4", "eval.interval_env_steps=0",
                           "task.env.numProps=0", "task.solve_measures.drawer_opened=[0,0.5]", "experiment=solve",
                           f"runs_dir={tmp_path}"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    (metrics,) = tmp_path.rglob("metrics.json")
    with open(metrics) as f:
        summary = json.load(f)
    final = summary["final_eval"]
    assert final["drawer_opened"] == 0.0 and final["env_steps"] == 128
    assert summary["solve_times"] == []  # (no return threshold)
    assert summary["measure_solve_times"] == [
        {"measure": "drawer_opened", "threshold": 0.0, "seconds": final["wall_s"], "env_steps": 128},
        {"measure": "drawer_opened", "threshold": 0.5, "seconds": None, "env_steps": None}]


def test_the_props_are_built_into_the_drawer_as_isaacgymenvs_lays_them():
    bare = make("FrankaCabinet", 1, sim="mujoco", env={"numProps": 0})
    full = make("FrankaCabinet", 1, sim="mujoco", env={"numProps": 16})
    assert (bare.model.nq, full.model.nq) == (13, 13 + 16 * 7)
    full.reset()
    first, last = full.qpos[0, 13:16], full.qpos[0, 13 + 15 * 7:13 + 15 * 7 + 3]
    drawer = torch.tensor([0.0515, 0.0, 0.7172], dtype=torch.float64)  # the closed drawer's origin
    torch.testing.assert_close(first, drawer + torch.tensor([-0.135, -0.135, 0.0], dtype=torch.float64))
    torch.testing.assert_close(last, drawer + torch.tensor([0.135, 0.135, 0.0], dtype=torch.float64))
    assert full.model.body_mass[full.model.body("prop0").id] == pytest.approx(0.08 ** 3 * 400)


def _reach(env, target_pos, target_rot, q):
    """Damped least squares on the gripper's grasp frame (position and orientation), the arm's 7 joints."""
    def frame(q):
        env.qpos[0, env.arm_qpos] = torch.from_numpy(q)
        f = env.frames(slice(0, 1))
        return f["grasp_pos"][0].double().numpy(), f["grasp_rot"][0].double().numpy()

    def axis_angle(rotation):
        return 0.5 * np.array([rotation[2, 1] - rotation[1, 2], rotation[0, 2] - rotation[2, 0],
                               rotation[1, 0] - rotation[0, 1]])

    low, high = env.lower[:7].double().numpy(), env.upper[:7].double().numpy()
    for _ in range(200):
        position, rotation = frame(q)
        error = np.concatenate([target_pos - position, axis_angle(target_rot @ rotation.T)])
        if np.linalg.norm(error) < 1e-5:
            break
        jacobian = np.zeros((6, 7))
        for j in range(7):
            moved = q.copy()
            moved[j] += 1e-6
            p, r = frame(moved)
            jacobian[:3, j], jacobian[3:, j] = (p - position) / 1e-6, axis_angle(r @ rotation.T) / 1e-6
        step = jacobian.T @ np.linalg.solve(jacobian @ jacobian.T + 1e-4 * np.eye(6), error)
        q[:7] = np.clip(q[:7] + np.clip(step, -0.2, 0.2), low, high)
    return q, float(np.linalg.norm(error))


def test_the_fingers_hold_the_handle_and_pull_the_drawer_open():
    """The model can do the task: a scripted grasp (joint targets from inverse kinematics) closes the fingers on the
    handle and pulls the drawer, with its 16 props, to its 0.4 m limit; the fingers stay around the handle."""
    env = make("FrankaCabinet", 1, sim="mujoco", seed=0, env={"numProps": 16})
    env.reset()
    # the gripper aligned with the drawer (forward -x, fingers opening along z), the fingers' base 3.5 cm in front
    # of the bar's centre (1 cm above the handle's grasp point), so that the bar lies between the fingers
    # (IsaacGymEnvs' grasp point is 4 cm off the fingers' axis along link 7's y: (0, 2.83, 2.83) cm in this pose)
    rotation = np.column_stack([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])
    offset = np.array([0.0, 0.04 * math.sqrt(0.5), 0.04 * math.sqrt(0.5)])
    handle = np.array(HANDLE_CLOSED)
    q = np.array(DEFAULT_DOF_POS, dtype=np.float64)
    waypoints = []
    for opening in (0.0, 0.1, 0.2, 0.3, 0.42):
        q, error = _reach(env, handle + np.array([opening + 0.035, 0.0, BAR_ABOVE]) + offset, rotation, q.copy())
        assert error < 1e-4
        waypoints.append(q.copy())
    env.reset()
    env.qpos[0, env.arm_qpos] = torch.from_numpy(waypoints[0])
    env.qpos[0, env.arm_qpos[7:]] = 0.04

    def hold(targets, fingers, steps):
        env.ctrl[0, :9] = torch.from_numpy(np.concatenate([targets[:7], [fingers, fingers]]))
        env.sim.step(1, env.substeps * steps)

    hold(waypoints[0], 0.04, 30)
    hold(waypoints[0], 0.0, 60)  # close on the bar (2 cm: the fingers stop near 1 cm each)
    assert 0.007 < env.qpos[0, env.arm_qpos[7]].item() < 0.013
    for targets in waypoints[1:]:
        hold(targets, 0.0, 90)
    assert env.qpos[0, env.drawer_qpos].item() > 0.39
    frames = env.frames(slice(0, 1))  # the fingers still on either side of the bar, holding it
    bar = frames["handle_pos"][0, 2] + BAR_ABOVE
    assert frames["left_finger"][0, 2] > bar > frames["right_finger"][0, 2]
    assert (env.qpos[0, env.arm_qpos[7:]].sum() < 0.025).item()
