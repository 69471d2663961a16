"""FrankaCubeStack's semantics with known answers (issue 87), on mujoco.batch: the Jacobian and mass matrix the OSC
reads against MuJoCo's own, the observation layout from a set state, IsaacGymEnvs' reward from set poses (lift only
above 0.04 m, the stack paid alone with the gripper away), the OSC's and the gripper's response to actions, the
reset's placement, a bad controlType refused in one line, a stack that ends the episode, and that the model's fingers
hold the cube while the task's own controller carries it onto the other. (Both backends: test_backend_contract.py
and test_mjwarp.py; training on both: the last test.)"""
from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
import torch

from helpers import mjwarp_marks, require_system

from isaac_ppo.config.compose import compose_config
from isaac_ppo.envs import make
from isaac_ppo.errors import UserError
from isaac_ppo.tasks.manipulation.franka_cube_stack import (DEFAULT_DOF_POS, EFFORT_LIMITS, MIN_CUBE_DISTANCE,
                                                            franka_cube_stack_reward, inverse_or_pseudo)

SCALES = {"distRewardScale": 0.1, "liftRewardScale": 1.5, "alignRewardScale": 2.0, "stackRewardScale": 16.0}
TABLE = 1.025  # the table's top (m)


@pytest.fixture(scope="module")
def env():
    return make("FrankaCubeStack", 4, sim="mujoco", seed=0, mujoco={"nthread": 1})


def _place(env, a=(0.1, -0.15, TABLE + 0.025), b=(-0.05, 0.15, TABLE + 0.035), yaw_a=0.0, q=DEFAULT_DOF_POS):
    env.reset()
    env.qpos[:, env.arm_qpos] = torch.tensor(q, dtype=torch.float64)
    env.qvel[:] = 0.0
    env.qpos[:, env.cube_a:env.cube_a + 7] = torch.tensor(
        [*a, math.cos(yaw_a / 2), 0.0, 0.0, math.sin(yaw_a / 2)], dtype=torch.float64)
    env.qpos[:, env.cube_b:env.cube_b + 7] = torch.tensor([*b, 1.0, 0.0, 0.0, 0.0], dtype=torch.float64)


def test_the_jacobian_mass_matrix_and_frames_equal_mujocos_own(env):
    import mujoco

    model = env.model
    data = mujoco.MjData(model)
    generator = torch.Generator().manual_seed(3)
    hand, link7 = model.site("panda_hand").id, model.body("panda_link7").id
    for _ in range(5):
        data.qpos[:9] = (env.lower + (env.upper - env.lower) * torch.rand(9, generator=generator)).double().numpy()
        mujoco.mj_forward(model, data)
        frames = env.arm_frames(torch.from_numpy(data.qpos.copy())[None])
        jacobian = env.jacobian(frames, frames["hand_pos"])[0].numpy()
        jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        mujoco.mj_jac(model, data, jacp, jacr, data.site_xpos[hand], link7)
        np.testing.assert_allclose(jacobian[:3], jacp[:, :7], atol=1e-5)
        np.testing.assert_allclose(jacobian[3:], jacr[:, :7], atol=1e-5)
        full = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(model, data, full)
        np.testing.assert_allclose(env.mass_matrix(frames)[0].numpy(), full[:7, :7], atol=1e-5)
        for key, site in (("hand_pos", "panda_hand"), ("eef_pos", "panda_grip_site"),
                          ("lf_pos", "panda_leftfinger_tip"), ("rf_pos", "panda_rightfinger_tip")):
            np.testing.assert_allclose(frames[key][0].numpy(), data.site_xpos[model.site(site).id], atol=1e-6)
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, data.site_xmat[model.site("panda_grip_site").id])
        eef_quat = frames["eef_quat"][0].numpy()
        assert abs(abs(float(np.dot(eef_quat, np.roll(quat, -1)))) - 1.0) < 1e-6  # (x, y, z, w), up to its sign


def test_the_observation_layout_from_a_set_state(env):
    _place(env, yaw_a=0.5)
    obs = env.compute_observations(slice(0, 4))
    assert obs.shape == (4, 19)
    torch.testing.assert_close(obs[0, 0:4], torch.tensor([0.0, 0.0, math.sin(0.25), math.cos(0.25)]))
    torch.testing.assert_close(obs[0, 4:7], torch.tensor([0.1, -0.15, TABLE + 0.025]))
    torch.testing.assert_close(obs[0, 7:10], torch.tensor([-0.15, 0.3, 0.01]))  # B - A
    frames = env.arm_frames(env.qpos[:1])
    torch.testing.assert_close(obs[0, 10:13], frames["eef_pos"][0])
    torch.testing.assert_close(obs[0, 13:17], frames["eef_quat"][0])
    torch.testing.assert_close(obs[0, 17:19], torch.tensor([0.035, 0.035]))
    # the default pose holds the grip site 19 cm above the table, pointing down
    assert 0.18 < obs[0, 12].item() - TABLE < 0.2
    joint = make("FrankaCubeStack", 1, sim="mujoco", seed=0, env={"controlType": "joint_tor"}, mujoco={"nthread": 1})
    assert (joint.num_obs, joint.num_actions) == (26, 8)
    obs = joint.reset()["obs"]
    torch.testing.assert_close(obs[0, 17:26], joint.qpos[0, joint.arm_qpos].float())


def _frames(cube_a, eef, b_minus_a, finger_gap=0.03):
    cube_a, eef = torch.tensor([cube_a]), torch.tensor([eef])
    return {"cubeA_pos": cube_a, "eef_pos": eef, "cubeA_to_cubeB_pos": torch.tensor([b_minus_a]),
            "lf_pos": eef + torch.tensor([[0.0, finger_gap, 0.0]]),
            "rf_pos": eef - torch.tensor([[0.0, finger_gap, 0.0]])}


def test_the_reward_terms_from_set_poses():
    # gripping cube A on the table: distance (0 + 3 + 3 cm) / 3 = 2 cm, no lift, no align
    reward, terms, measures, stacked = franka_cube_stack_reward(
        _frames((0.1, 0.0, TABLE + 0.025), (0.1, 0.0, TABLE + 0.025), (0.2, 0.0, 0.01)), TABLE, SCALES)
    assert terms["distance"].item() == pytest.approx(0.1 * (1 - math.tanh(0.2)), abs=1e-6)
    assert terms["lift"].item() == terms["align"].item() == terms["stack"].item() == 0.0 and not stacked.item()
    assert reward.item() == pytest.approx(terms["distance"].item())
    # lifted only above 0.04 m beyond its 5 cm: its centre at 0.095 m above the table pays, at 0.085 m not
    for height, lifted in ((0.095, True), (0.085, False)):
        a = (0.1, 0.0, TABLE + height)
        _, terms, measures, _ = franka_cube_stack_reward(_frames(a, a, (0.0, 0.0, -0.06)), TABLE, SCALES)
        assert terms["lift"].item() == (1.5 if lifted else 0.0)
        assert terms["align"].item() == pytest.approx(2.0 if lifted else 0.0, abs=1e-6)  # (6 cm above B: d_ab 0)
        assert terms["distance"].item() == pytest.approx(0.1 * (1.0 if lifted else 1 - math.tanh(0.2)), abs=1e-6)
        assert measures["cubeA_height_m"].item() == pytest.approx(height, abs=1e-6)
    # on cube B (its centre 7 + 2.5 cm above the table, 1 cm off B's axis), the gripper 10 cm away: 16 alone
    on_b = (0.1, 0.0, TABLE + 0.095)
    reward, terms, _, stacked = franka_cube_stack_reward(
        _frames(on_b, (0.1, 0.0, TABLE + 0.195), (0.01, 0.0, -0.06)), TABLE, SCALES)
    assert stacked.item() and reward.item() == 16.0 and terms["stack"].item() == 16.0
    assert terms["distance"].item() == terms["lift"].item() == terms["align"].item() == 0.0
    # the same with the gripper still on it (3 cm: within 4 cm), 2.5 cm off B's axis, or 2.5 cm high: no stack
    for eef, b_minus_a in (((0.1, 0.0, TABLE + 0.125), (0.0, 0.0, -0.06)), (on_b[:2] + (TABLE + 0.195,),
                                                                             (0.025, 0.0, -0.06))):
        _, terms, _, stacked = franka_cube_stack_reward(_frames(on_b, eef, b_minus_a), TABLE, SCALES)
        assert not stacked.item() and terms["stack"].item() == 0.0
    high = (0.1, 0.0, TABLE + 0.12)
    _, _, _, stacked = franka_cube_stack_reward(_frames(high, (0.1, 0.0, TABLE + 0.3), (0.0, 0.0, -0.085)),
                                                TABLE, SCALES)
    assert not stacked.item()


def test_a_constant_plus_x_command_moves_the_grip_site_along_x_holding_its_orientation(env):
    _place(env)
    start = env.compute_observations(slice(0, 4))
    actions = torch.zeros(4, 7)
    actions[:, 0] = 0.5  # 5 cm of pose error along x; the gripper open
    for _ in range(20):
        obs = env.step(actions)[0]["obs"]
    moved = obs[:, 10:13] - start[:, 10:13]
    # kp 150, kd 2 sqrt(150): a unit mass pulled at 150 x 0.05 = 7.5 m/s^2, damped to 0.31 m/s: ~8 cm in 1/3 s
    assert bool((moved[:, 0] > 0.05).all()) and float(moved[:, 1:].abs().max()) < 0.015
    turned = (obs[:, 13:17] * start[:, 13:17]).sum(dim=1).abs()  # |cos(half the turn)|
    assert float(turned.min()) > math.cos(0.05 / 2)
    # the torques are IsaacGymEnvs' formula: at rest with no command and at the default pose, none
    _place(env)
    env.set_controls(torch.zeros(4, 7), 4)
    assert float(env.ctrl[:, :7].abs().max()) < 1e-4


def test_a_singular_matrix_gets_its_pseudo_inverse_and_a_regular_one_its_inverse():
    regular = torch.tensor([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 2.0]])
    singular = torch.diag(torch.tensor([2.0, 1.0, 0.0]))
    inverse = inverse_or_pseudo(torch.stack((regular, singular)))
    torch.testing.assert_close(inverse[0], torch.inverse(regular))
    torch.testing.assert_close(inverse[1], torch.diag(torch.tensor([0.5, 1.0, 0.0])))


# the arm stretched straight up (the joints' zeros: the axes of joints 1, 3 and 5 in one line), and the pose at which
# a learning run's env 564 stopped torch.inverse at 14.5M env steps (franka_cube_stack_cpu, seed 0; the fingers' too:
# they ride on link 7's inertia, and the pivot is exactly zero at these digits)
SINGULAR_POSES = {"stretched": (0.0,) * 7 + (0.035, 0.035),
                  "a learning run's": (-0.36210186269705064, 1.6756007300609512, 2.2769417899102935,
                                       -0.46651230406109856, -0.005293111123638228, 2.3379244632084855,
                                       -0.8468212455880002, -0.0015081852887960288, -0.0010877358157596682)}


@pytest.mark.parametrize("pose", sorted(SINGULAR_POSES))
def test_at_a_kinematic_singularity_the_osc_gives_finite_torques_within_the_limits(env, pose):
    _place(env, q=SINGULAR_POSES[pose])
    frames = env.arm_frames(env.qpos[:4])
    j_eef, mm = env.jacobian(frames, frames["hand_pos"]), env.mass_matrix(frames)
    assert bool((torch.linalg.inv_ex(j_eef @ torch.inverse(mm) @ j_eef.transpose(1, 2)).info != 0).all()), \
        "the premise: LU finds J M^-1 J^T singular here (torch.inverse raises)"
    actions = torch.tensor([[0.5, -0.3, 0.2, 0.1, -0.4, 0.6, 1.0]]).repeat(4, 1)
    env.set_controls(actions, 4)
    torques = env.ctrl[:, :7]
    assert bool(torch.isfinite(torques).all()) and float(torques.abs().max()) > 0.0
    assert bool((torques.abs() <= torch.tensor(EFFORT_LIMITS, dtype=torques.dtype) + 1e-6).all())
    obs = env.step(actions)[0]["obs"]
    assert bool(torch.isfinite(obs).all())


def test_the_gripper_opens_on_a_positive_action_and_closes_on_a_negative_one(env):
    _place(env)
    actions = torch.zeros(4, 7)
    actions[:2, 6], actions[2:, 6] = 0.0, -0.3
    env.set_controls(actions, 4)
    torch.testing.assert_close(env.ctrl[:, 7:9].float(), torch.tensor([[0.04, 0.04]] * 2 + [[0.0, 0.0]] * 2))
    for _ in range(30):
        obs = env.step(actions)[0]["obs"]
    assert bool((obs[:2, 17:19] > 0.039).all()) and bool((obs[2:, 17:19] < 0.001).all())


def test_a_reset_places_the_cubes_on_the_table_apart_and_the_arm_near_its_default():
    env = make("FrankaCubeStack", 64, sim="mujoco", seed=1, mujoco={"nthread": 1})
    obs = env.reset()["obs"]
    a, b = obs[:, 4:7], obs[:, 4:7] + obs[:, 7:10]
    assert bool(((a[:, :2] - b[:, :2]).norm(dim=1) >= MIN_CUBE_DISTANCE).all())
    for cube, size in ((a, 0.05), (b, 0.07)):
        assert bool((cube[:, :2].abs() <= 0.25).all())
        torch.testing.assert_close(cube[:, 2], torch.full((64,), TABLE + size / 2))
    yaw = 2 * torch.atan2(obs[:, 2], obs[:, 3])  # (a turn about z alone: x = y = 0)
    assert float(obs[:, 0:2].abs().max()) == 0.0 and float(yaw.abs().max()) <= 0.785 + 1e-6
    arm = env.qpos[:, env.arm_qpos].float()
    default = torch.tensor(DEFAULT_DOF_POS)
    assert float((arm[:, :7] - default[:7]).abs().max()) <= 0.25 + 1e-6
    assert float((arm[:, :7] - default[:7]).abs().max()) > 0.2  # (noise drawn)
    torch.testing.assert_close(arm[:, 7:], torch.full((64, 2), 0.035))
    assert float(env.qvel.abs().max()) == 0.0


def test_a_bad_control_type_is_refused_in_one_line():
    with pytest.raises(UserError) as error:
        compose_config(["task=FrankaCubeStack", "sim=mujoco", "task.env.controlType=ik"])
    assert "task.env.controlType='ik' is outside its domain: one of osc, joint_tor" in str(error.value)
    assert "\n" not in str(error.value)


def test_a_stack_ends_the_episode_as_a_terminal_success(env):
    env.reset()
    ids = torch.tensor([1, 3])
    env.make_terminal(ids)
    _, reward, done, extras = env.step(torch.zeros(4, 7))
    assert done.tolist() == [False, True, False, True] and not bool(extras["time_outs"].any())
    assert reward[1].item() == reward[3].item() == 16.0
    assert extras["outcomes"]["stacked"].tolist() == [0.0, 1.0, 0.0, 1.0]


def test_the_fingers_hold_cube_a_while_the_osc_carries_it_onto_cube_b():
    """The model can do the task: a scripted policy through env.step (the task's own OSC, position error / 0.1 m
    and orientation error / 0.5 rad as actions) grasps cube A, lifts it over B, sets it down and lets go: a
    stack, which ends the episode; the cube slips less than 3 mm in the grasp."""
    env = make("FrankaCubeStack", 1, sim="mujoco", seed=0, mujoco={"nthread": 1})
    _place(env, yaw_a=0.3)
    obs = env.compute_observations(slice(0, 1))[0].numpy()

    def act(target, grip, yaw, steps, tol=None, track=None):
        nonlocal obs
        c, s = math.cos(yaw), math.sin(yaw)
        target_rot = np.array([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])  # z down, turned with the cube
        for i in range(steps):
            x, y, z, w = obs[13:17]
            rot = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
            r = target_rot @ rot.T
            turn = 0.5 * np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
            action = np.concatenate([np.clip((target - obs[10:13]) / 0.1, -1, 1), np.clip(turn / 0.5, -1, 1), [grip]])
            result, _, done, extras = env.step(torch.tensor(action, dtype=torch.float32)[None])
            if bool(done[0]):
                return extras
            obs = result["obs"][0].numpy()
            if track is not None:
                track.append(obs[4:7] - obs[10:13])
            if tol and i > 5 and np.linalg.norm(target - obs[10:13]) < tol:
                break
        return None

    a = obs[4:7].copy()
    b = a + obs[7:10]
    assert act(a + [0, 0, 0.1], 1.0, 0.3, 90, tol=0.005) is None
    assert act(a, 1.0, 0.3, 60, tol=0.003) is None
    assert act(a, -1.0, 0.3, 30) is None
    assert 0.045 < obs[17] + obs[18] < 0.051  # closed on the 5 cm cube (its pads 0.5 mm proud of the fingers)
    track = []
    assert act(b + [0, 0, 0.18], -1.0, 0.3, 120, tol=0.005, track=track) is None
    assert obs[6] - TABLE > 0.15  # lifted
    assert act(b + [0, 0, 0.065], -1.0, 0.3, 90, tol=0.003, track=track) is None
    slip = max(np.linalg.norm(t - track[0]) for t in track)
    assert slip < 0.003
    extras = act(b + [0, 0, 0.065], 1.0, 0.3, 20) or act(b + [0, 0, 0.2], 1.0, 0.3, 60)
    assert extras is not None and extras["outcomes"]["stacked"][0].item() == 1.0


@pytest.mark.parametrize("sim", ["mujoco", pytest.param("mjwarp", marks=mjwarp_marks("FrankaCubeStack"))])
def test_it_trains_through_the_cli_on_both_backends(tmp_path, sim):
    """One small iteration with the task's own agent config (the learning figures are benchmarks)."""
    from helpers import train_in_process

    if sim == "mjwarp" and importlib.util.find_spec("mujoco_warp") is None:
        require_system("sim=mjwarp needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    result = train_in_process(str(tmp_path), "task=FrankaCubeStack", f"sim={sim}", "num_envs=16", "agent.horizon=8",
                              "agent.num_mini_batches=2", "max_iterations=1", "eval.final=false", "diagnostics=off")
    assert result.summary["iterations"] == 1 and result.summary["env_steps"] == 128
