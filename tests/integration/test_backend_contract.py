"""The VecEnv contract, one suite over every backend that runs our task ports: mujoco.batch (sim=mujoco) and
MuJoCo Warp (sim=mjwarp, on its CPU device here). What a step returns, when flags fire, resets inside the step,
the active subset, determinism, reward terms, divergence, and exact resume: the same assertions on both.

sim=mjwarp runs on Cartpole in the default suite (its kernels compile once per model, ~1-2 minutes on an empty
cache: tests/conftest.py); on Ant, Humanoid, Anymal, BallBalance, AnymalTerrain, FrankaCabinet and ShadowHand with
--mjwarp-all-models. The mjwarp cases share one xdist
worker (xdist_group), so the suite compiles them once. `--mjwarp-device=cuda` (tests/conftest.py) puts the mjwarp
envs on a GPU instead.
"""
from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from helpers import MJWARP_WORKER, require_system
from isaac_ppo.envs import make
from isaac_ppo.envs.episodes import EpisodeTracker
from isaac_ppo.errors import InputError

MJWARP_DEVICE = os.environ.get("ISAAC_PPO_TEST_MJWARP_DEVICE", "cpu")  # (pytest --mjwarp-device=cuda sets it)


def case(sim: str, task: str):
    marks = []
    if sim == "mjwarp":
        marks.append(MJWARP_WORKER)
        if task != "Cartpole":
            marks.append(pytest.mark.mjwarp_models)
    return pytest.param(sim, task, marks=marks, id=f"{sim}-{task}")


CASES = [case(sim, task) for sim in ("mujoco", "mjwarp") for task in ("Cartpole", "Ant", "Humanoid", "Anymal",
                                                                      "BallBalance", "AnymalTerrain",
                                                                      "FrankaCabinet", "ShadowHand")]
SHAPES = {"Cartpole": (4, 1, 500), "Ant": (60, 8, 1000), "Humanoid": (108, 21, 1000), "Anymal": (48, 12, 2500),
          "BallBalance": (24, 3, 500), "AnymalTerrain": (188, 12, 1000), "FrankaCabinet": (23, 9, 500),
          "ShadowHand": (211, 20, 600)}
# the reward's terms each task reports (extras["reward_terms"]), as IsaacGymEnvs' reward functions add them up
TERMS = {
    "Cartpole": ["alive", "pole_angle", "cart_velocity", "pole_velocity", "death"],
    "Ant": ["progress", "alive", "up", "heading", "actions", "energy", "joint_limits", "death"],
    "Humanoid": ["progress", "alive", "up", "heading", "actions", "energy", "joint_limits", "death"],
    "Anymal": ["lin_vel_xy", "ang_vel_z", "torque", "clip"],  # (no death cost: a fall just ends the episode)
    "BallBalance": ["balance"],  # (one product: 1 / (1 + distance) x 1 / (1 + speed))
    "AnymalTerrain": ["lin_vel_xy", "ang_vel_z", "lin_vel_z", "ang_vel_xy", "orient", "base_height", "torque",
                      "joint_acc", "collision", "stumble", "action_rate", "air_time", "hip", "clip"],
    "FrankaCabinet": ["distance", "rotation", "around_handle", "open", "finger_distance", "action_penalty",
                      "open_bonus", "behind_handle"],
    "ShadowHand": ["distance", "rotation", "action_penalty", "success_bonus", "fall_penalty"],
}
CONTROL_STEP = {"Anymal": 0.02, "AnymalTerrain": 0.02}  # the tasks whose episodes are given in seconds (env.learn.episodeLength_s)
EPISODE_KEY = {"BallBalance": "maxEpisodeLength"}  # the tasks whose episode length has IsaacGymEnvs' other name


def build(sim: str, task: str, num_envs: int, episodeLength=None, noise: bool = True, **kwargs):
    """The task's env; noise=False: without observation noise (AnymalTerrain's: a state observed twice reads the
    same)."""
    if episodeLength is not None:  # (in the task's own key)
        if task in CONTROL_STEP:
            kwargs["learn"] = {"episodeLength_s": episodeLength * CONTROL_STEP[task]}
        else:
            kwargs[EPISODE_KEY.get(task, "episodeLength")] = episodeLength
    if not noise and task == "AnymalTerrain":
        kwargs["learn"] = dict(kwargs.get("learn", {}), addNoise=False)
    if task == "AnymalTerrain":  # (its map comes from the seed: a resume from another seed's is refused)
        kwargs["terrain"] = {"seed": 11}
    if task == "FrankaCabinet":  # 4 of its 16 props: free bodies in the state all the same, at a quarter of their cost
        kwargs.setdefault("env", {})["numProps"] = 4
    if sim == "mjwarp" and importlib.util.find_spec("mujoco_warp") is None:
        require_system("sim=mjwarp needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    return make(task, num_envs, sim=sim, device=MJWARP_DEVICE if sim == "mjwarp" else "cpu", **kwargs)


def assert_same_run(sim: str, task: str, first: torch.Tensor, second: torch.Tensor, step_columns: int) -> None:
    """Two runs that should be the same run: equal bit for bit, except MuJoCo Warp on a GPU with contacts, where
    contact forces are summed by atomics in whatever order they land, so two runs of one seed agree to float32
    rounding at first and then separate (the GPU kit's proof, 2026-11-26 on an H100: the bare mjw.step of the Ant from
    identical inputs first differed at step 3, by 5e-5, and MuJoCo Warp 4.0.0's opt.deterministic neither removed
    it nor came cheap: 8.6x slower; benchmarks/RESULTS.md). There: the first step (step_columns wide) to float32
    rounding, which a lost generator state or a missing buffer would still fail by far. Cartpole has no contacts and
    stays exact on the GPU."""
    if sim == "mjwarp" and MJWARP_DEVICE.startswith("cuda") and task != "Cartpole":
        torch.testing.assert_close(first[:, :step_columns], second[:, :step_columns], rtol=1e-4, atol=1e-4)
    else:
        assert torch.equal(first, second)


def knock_down(env, task: str, ids) -> None:
    """Put envs ids into a state their task ends as terminal on the next step."""
    if task == "Cartpole":
        env.qpos[ids, 0] = 2.99  # the cart at the edge ...
        env.qvel[ids, 0] = 5.0  # ... and leaving
    elif task == "BallBalance":  # the ball beside the robot, its centre below 1.5 radii (0.15 m)
        env.qpos[ids, 13] = 2.0
        env.qpos[ids, 14] = 0.0
        env.qpos[ids, 15] = 0.12
    elif task == "Anymal":  # upside down, the top of the base (its lidar cage) 3.5 mm in the floor: a base contact
        env.qpos[ids, 2] = 0.26
        env.qpos[ids, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=env.qpos.dtype, device=env.qpos.device)
    elif task == "AnymalTerrain":  # as the Anymal, on the map's flat border (height 0) beside it
        env.qpos[ids, 0:3] = torch.tensor([-10.0, -10.0, 0.26], dtype=env.qpos.dtype, device=env.qpos.device)
        env.qpos[ids, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=env.qpos.dtype, device=env.qpos.device)
    elif task == "FrankaCabinet":  # the top drawer open past 0.39 m (the success that ends IsaacGymEnvs' episode)
        env.qpos[ids, env.drawer_qpos] = 0.399  # (and still opening: the props, where the closed drawer holds them,
        env.qvel[ids, env.drawer_qvel] = 0.3  # push its back wall)
    elif task == "ShadowHand":  # the block dropped beside the hand, 0.36 m below the goal position
        env.qpos[ids, env.block_qpos:env.block_qpos + 3] = torch.tensor([0.3, -0.39, 0.2], dtype=env.qpos.dtype,
                                                                        device=env.qpos.device)
    elif task == "Ant":  # the torso below the termination height (0.31 m), as in a fall
        env.qpos[ids, 2] = 0.2
    else:  # the Humanoid lying on its back, torso at 0.2 m (termination height 0.8 m). (Upright at 0.5 m, its legs
        # deep in the floor, it sprang back to 0.756 m in one step here and past 0.8 m on the GPU.)
        env.qpos[ids, 2] = 0.2
        env.qpos[ids, 3:7] = torch.tensor([0.5 ** 0.5, 0.0, 0.5 ** 0.5, 0.0], dtype=env.qpos.dtype,
                                          device=env.qpos.device)


@pytest.mark.parametrize("sim,task", CASES)
def test_shapes_dtypes_and_flags(sim, task):
    num_obs, num_actions, length = SHAPES[task]
    env = build(sim, task, 8)
    assert (env.num_obs, env.num_actions, env.max_episode_length) == (num_obs, num_actions, length)
    obs = env.reset()["obs"]
    assert obs.shape == (8, num_obs) and obs.dtype == torch.float32 and torch.isfinite(obs).all()
    obs, rew, resets, extras = env.step(torch.zeros(8, num_actions))
    assert obs["obs"].shape == (8, num_obs) and obs["obs"].dtype == torch.float32
    assert rew.shape == (8,) and rew.dtype == torch.float32
    assert resets.dtype == torch.bool and extras["time_outs"].dtype == torch.bool
    assert extras["final_obs"].shape == (8, num_obs) and extras["diverged_envs"].shape == (8,)
    assert list(extras["reward_terms"]) == TERMS[task]
    with pytest.raises(InputError, match="actions must have shape"):
        env.step(torch.zeros(7, num_actions))
    bad = torch.zeros(8, num_actions)
    bad[5, 0] = float("nan")
    with pytest.raises(InputError, match="non-finite actions refused for 1 env"):
        env.step(bad)


@pytest.mark.parametrize("sim,task", CASES)
def test_time_out_resets_inside_the_step_and_final_obs_is_the_terminal_one(sim, task):
    env = build(sim, task, 4, episodeLength=5)
    first = env.reset()["obs"]
    for step in range(1, 6):
        obs, rew, resets, extras = env.step(torch.zeros(4, env.num_actions))
        if step < 5:
            assert not resets.any() and not extras["time_outs"].any()
            torch.testing.assert_close(extras["final_obs"], obs["obs"])  # equal on rows that did not end
    if task == "Cartpole":  # (a fresh pole may fall within 5 steps of zero force: whichever ended, ended)
        assert resets.all() and bool((extras["time_outs"] | (rew == -2.0)).all())
    else:
        assert resets.all() and extras["time_outs"].all()
    assert env.progress.tolist() == [0, 0, 0, 0]
    assert not torch.equal(obs["obs"], extras["final_obs"])  # obs: the new episode's first observation
    assert obs["obs"].abs().max() < 10 and first.shape == obs["obs"].shape
    if task != "Cartpole":
        if task not in ("BallBalance", "FrankaCabinet"):  # (their observations hold no last actions)
            assert torch.all(obs["obs"][:, -env.num_actions:] == 0)  # last actions start at zero
        # the start height (BallBalance: knee 0's angle; AnymalTerrain: x velocity 0, with its noise of +-0.2;
        # FrankaCabinet: the drawer's opening, 0, its arm's joints being drawn afresh)
        noise = 0.2 if task == "AnymalTerrain" else 0.0
        column = {"FrankaCabinet": 21, "ShadowHand": 85}.get(task, 0)  # (ShadowHand: the goal's x, fixed)
        torch.testing.assert_close(obs["obs"][:, column], first[:, column], rtol=1.3e-6, atol=2 * noise + 1e-5)


@pytest.mark.parametrize("sim,task", CASES)
def test_a_terminal_state_ends_the_episode_not_as_a_time_out(sim, task):
    env = build(sim, task, 3)
    env.reset()
    knock_down(env, task, 1)
    _, rew, resets, extras = env.step(torch.zeros(3, env.num_actions))
    assert resets.tolist() == [False, True, False]
    assert not extras["time_outs"].any() and extras["diverged"] == 0
    terms = extras["reward_terms"]
    if "death" in terms:  # (a task with a death cost: the terminal step's whole reward)
        assert rew[1].item() == pytest.approx(terms["death"][1].item()) and terms["death"][1].item() != 0
    assert env.progress[1].item() == 0  # reset already


@pytest.mark.parametrize("sim,task", CASES)
def test_same_seed_same_trajectory_other_seed_other_trajectory(sim, task):
    def rollout(seed):
        env = build(sim, task, 8, seed=seed, episodeLength=12)
        generator = torch.Generator().manual_seed(123)
        trajectory = [env.reset()["obs"]]
        for _ in range(30):  # crosses two time-outs, so resets are part of it
            obs, rew, _, _ = env.step(torch.rand(8, env.num_actions, generator=generator) * 2 - 1)
            trajectory += [obs["obs"], rew[:, None]]
        return torch.cat(trajectory, dim=1)

    first, second, other = rollout(7), rollout(7), rollout(8)
    width = 2 * SHAPES[task][0] + 1  # (the reset's observations, then the first step's and its reward)
    assert_same_run(sim, task, first, second, width)
    assert not torch.equal(first[:, :width], other[:, :width])


@pytest.mark.parametrize("sim,task", CASES)
def test_set_active_steps_only_the_leading_envs_and_the_rest_resume_where_they_stood(sim, task):
    env = build(sim, task, 12, seed=3, noise=False)
    env.reset()
    for _ in range(3):
        env.step(torch.full((12, env.num_actions), 0.3))
    kept_state = env.state_dict()["sim_state"][4:].clone()
    kept_obs = env.set_active(12)["obs"][4:].clone()
    assert env.set_active(4)["obs"].shape == (4, env.num_obs)
    for _ in range(5):
        obs, rew, resets, extras = env.step(torch.full((4, env.num_actions), 0.1))
    assert obs["obs"].shape == (4, env.num_obs) and rew.shape == (4,) and extras["time_outs"].shape == (4,)
    assert torch.equal(env.state_dict()["sim_state"][4:], kept_state)  # the whole state row, derived fields too
    assert env.progress[:4].tolist() == [8] * 4 and env.progress[4:].tolist() == [3] * 8
    assert torch.equal(env.set_active(12)["obs"][4:], kept_obs)
    env.step(torch.zeros(12, env.num_actions))
    assert env.progress[4:].tolist() == [4] * 8


@pytest.mark.parametrize("sim,task", CASES)
def test_reward_terms_add_up_to_the_reward_and_to_each_episode_return(sim, task):
    env = build(sim, task, 16, seed=2, episodeLength=20)
    tracker = EpisodeTracker(16, env.device)
    env.reset()
    generator = torch.Generator().manual_seed(0)
    deaths = 0
    for t in range(45):
        if t % 15 == 14:
            knock_down(env, task, slice(0, 4))
        _, rew, resets, extras = env.step(2 * torch.rand(16, env.num_actions, generator=generator) - 1)
        terms = extras["reward_terms"]
        total = torch.stack(list(terms.values())).sum(dim=0)
        torch.testing.assert_close(total, rew, rtol=1e-5, atol=1e-5)
        ended = resets & ~extras["time_outs"]
        if "death" in terms:
            dead = terms["death"] != 0
            assert bool(resets[dead].all())  # a death term only on a terminal step, where it is the whole reward
        deaths += int(ended.sum())
        tracker.update(rew, resets, extras["diverged_envs"], terms)
    assert deaths > 0
    stats = tracker.statistics()
    assert stats["episodes"] >= 16
    assert sum(stats["reward_terms"].values()) == pytest.approx(stats["batch_mean_return"], rel=1e-5, abs=1e-4)


@pytest.mark.parametrize("sim,task", CASES)
def test_a_non_finite_state_is_diverged_reset_counted_and_kept_out_of_every_statistic(sim, task):
    env = build(sim, task, 4)
    tracker = EpisodeTracker(4, env.device)
    env.reset()
    env.qvel[2, -1] = float("nan")
    obs, rew, resets, extras = env.step(torch.zeros(4, env.num_actions))
    tracker.update(rew, resets, extras["diverged_envs"])
    assert extras["diverged"] == 1 and env.diverged_total == 1
    assert extras["diverged_envs"].tolist() == [False, False, True, False]
    assert resets[2] and not extras["time_outs"][2] and rew[2].item() == 0.0
    assert torch.isfinite(obs["obs"]).all() and torch.isfinite(extras["final_obs"]).all()
    assert torch.isfinite(env.qpos).all() and torch.isfinite(env.qvel).all()
    assert tracker.drain()["episodes"] == 0
    _, _, resets, extras = env.step(torch.zeros(4, env.num_actions))
    assert extras["diverged"] == 0 and not resets.any()


@pytest.mark.parametrize("sim,task", CASES)
def test_state_dict_resumes_bit_for_bit(sim, task):
    """A checkpoint's env state (last.pt holds it) continues exactly: a second env of the same config that loads
    it steps to the same observations and rewards as the first, resets and the reset noise included."""
    def steps(env, count, seed):
        generator = torch.Generator().manual_seed(seed)
        out = []
        for _ in range(count):
            obs, rew, resets, _ = env.step(torch.rand(6, env.num_actions, generator=generator) * 2 - 1)
            out += [obs["obs"], rew[:, None], resets[:, None].float()]
        return torch.cat(out, dim=1)

    first = build(sim, task, 6, seed=5, episodeLength=9)
    first.reset()
    steps(first, 7, 0)
    state = first.state_dict()
    expected = steps(first, 12, 1)  # crosses a time-out of every env
    second = build(sim, task, 6, seed=99, episodeLength=9)
    second.reset()
    second.load_state_dict(state)
    assert_same_run(sim, task, steps(second, 12, 1), expected, SHAPES[task][0] + 2)  # (a step: obs, reward, reset)
