"""The VecEnv contract, one suite over every backend that runs our task ports: mujoco.batch (sim=mujoco) and
MuJoCo Warp (sim=mjwarp, on its CPU device here). What a step returns, when flags fire, resets inside the step,
the active subset, determinism, reward terms, divergence, and exact resume: the same assertions on both.

Every registered task is a case (envs/registry.py: the package's tasks, and a task of one's own in a folder of
ISAAC_PPO_TASK_PATH); what the suite needs to know of a task beyond its code is its spec (reward terms, contract
facts) and its class (make_terminal: a state it ends as terminal; episode_overrides). sim=mjwarp runs on Cartpole
in the default suite (its kernels compile once per model, ~1-2 minutes on an empty cache: tests/conftest.py); on
every other task with --mjwarp-all-models. The mjwarp cases share one xdist
worker (xdist_group), so the suite compiles them once. `--mjwarp-device=cuda` (tests/conftest.py) puts the mjwarp
envs on a GPU instead.
"""
from __future__ import annotations

import importlib.util
import os

import pytest
import torch
from omegaconf import OmegaConf

from helpers import MJWARP_DEFAULT_TASK, MJWARP_WORKER, require_system
from isaac_ppo.envs import make
from isaac_ppo.envs.make import load_task_config
from isaac_ppo.envs.registry import registered_tasks, spec, task_class
from isaac_ppo.envs.episodes import EpisodeTracker
from isaac_ppo.errors import InputError

MJWARP_DEVICE = os.environ.get("ISAAC_PPO_TEST_MJWARP_DEVICE", "cpu")  # (pytest --mjwarp-device=cuda sets it)


def case(sim: str, task: str):
    marks = []
    if sim == "mjwarp":
        marks.append(MJWARP_WORKER)
        if task != MJWARP_DEFAULT_TASK:
            marks.append(pytest.mark.mjwarp_models)
    return pytest.param(sim, task, marks=marks, id=f"{sim}-{task}")


# every registered task (a task YAML that names its class, in the package or in ISAAC_PPO_TASK_PATH's folders)
CASES = [case(sim, task) for sim in ("mujoco", "mjwarp") for task in registered_tasks()]


def _merged(into: dict, more: dict) -> dict:
    return OmegaConf.to_container(OmegaConf.merge(into, more))


def build(sim: str, task: str, num_envs: int, episodeLength=None, noise: bool = True, **kwargs):
    """The task's env, with its spec's contract overrides (cheap and reproducible: ContractFacts); episodeLength
    in control steps (in whatever key the task gives it: its episode_overrides); noise=False: without observation
    noise (a state observed twice reads the same)."""
    facts = spec(task).contract
    kwargs = _merged(dict(facts.overrides), kwargs)
    if episodeLength is not None:
        kwargs = _merged(kwargs, task_class(task).episode_overrides(load_task_config(task), episodeLength))
    if not noise:
        kwargs = _merged(kwargs, dict(facts.noiseless))
    if sim == "mjwarp" and importlib.util.find_spec("mujoco_warp") is None:
        require_system("sim=mjwarp needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    return make(task, num_envs, sim=sim, device=MJWARP_DEVICE if sim == "mjwarp" else "cpu", **kwargs)


def assert_same_run(sim: str, task: str, first: torch.Tensor, second: torch.Tensor, step_columns: int) -> None:
    """Two runs that should be the same run: equal bit for bit, except MuJoCo Warp on a GPU with contacts, where
    contact forces are summed by atomics in whatever order they land, so two runs of one seed agree to float32
    rounding at first and then separate (the GPU kit's proof, 2026-11-26 on an H100: the bare mjw.step of the Ant from
    identical inputs first differed at step 3, by 5e-5, and MuJoCo Warp 4.0.0's opt.deterministic neither removed
    it nor came cheap: 8.6x slower; benchmarks/history/gpu-kit.md). There: the first step (step_columns wide) to
    float32 rounding, which a lost generator state or a missing buffer would still fail by far. A model without
    contacts (MJWARP_DEFAULT_TASK, Cartpole) stays exact on the GPU."""
    if sim == "mjwarp" and MJWARP_DEVICE.startswith("cuda") and task != MJWARP_DEFAULT_TASK:
        torch.testing.assert_close(first[:, :step_columns], second[:, :step_columns], rtol=1e-4, atol=1e-4)
    else:
        assert torch.equal(first, second)


@pytest.mark.parametrize("sim,task", CASES)
def test_shapes_dtypes_and_flags(sim, task):
    env = build(sim, task, 8, episodeLength=37)  # (in the task's own key and unit: its episode_overrides)
    num_obs, num_actions = env.num_obs, env.num_actions
    assert env.max_episode_length == 37 and num_obs > 0 and num_actions > 0
    obs = env.reset()["obs"]
    assert obs.shape == (8, num_obs) and obs.dtype == torch.float32 and torch.isfinite(obs).all()
    obs, rew, resets, extras = env.step(torch.zeros(8, num_actions))
    assert obs["obs"].shape == (8, num_obs) and obs["obs"].dtype == torch.float32
    assert rew.shape == (8,) and rew.dtype == torch.float32
    assert resets.dtype == torch.bool and extras["time_outs"].dtype == torch.bool
    assert extras["final_obs"].shape == (8, num_obs) and extras["diverged_envs"].shape == (8,)
    assert list(extras["reward_terms"]) == list(spec(task).reward_terms)  # (what its spec declares)
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
    # every env ended at step 5: by its time-out, or (a fresh Cartpole's pole may fall within 5 steps of zero
    # force) by a death whose cost is the step's whole reward
    died = extras["reward_terms"]["death"] != 0 if "death" in extras["reward_terms"] else torch.zeros_like(resets)
    assert resets.all() and bool((extras["time_outs"] | died).all()) and extras["time_outs"].any()
    assert env.progress.tolist() == [0, 0, 0, 0]
    assert not torch.equal(obs["obs"], extras["final_obs"])  # obs: the new episode's first observation
    assert obs["obs"].abs().max() < 10 and first.shape == obs["obs"].shape
    facts = spec(task).contract
    if facts.last_actions_in_obs:
        assert torch.all(obs["obs"][:, -env.num_actions:] == 0)  # last actions start at zero
    if facts.reset_column is not None:  # (a column every reset starts alike: e.g. the start height)
        column, noise = facts.reset_column, facts.reset_noise
        torch.testing.assert_close(obs["obs"][:, column], first[:, column], rtol=1.3e-6, atol=2 * noise + 1e-5)


@pytest.mark.parametrize("sim,task", CASES)
def test_a_terminal_state_ends_the_episode_not_as_a_time_out(sim, task):
    env = build(sim, task, 3)
    env.reset()
    env.make_terminal(1)
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
    num_obs = (first.shape[1] - 30) // 31  # (a rollout: the reset's observations, then 30 steps' and rewards)
    width = 2 * num_obs + 1  # (the reset's observations, then the first step's and its reward)
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
            env.make_terminal(slice(0, 4))
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
    assert_same_run(sim, task, steps(second, 12, 1), expected, second.num_obs + 2)  # (a step: obs, reward, reset)
