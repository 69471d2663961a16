"""Whole episodes on real MuJoCo batches: falls, time-outs, divergence handling and bad input."""
from __future__ import annotations

import importlib.util

import json
import os
import subprocess
import sys
import tempfile

import pytest
import torch

from helpers import mjwarp_marks, require_system
from isaac_ppo.envs import make
from isaac_ppo.envs.episodes import EpisodeTracker
from isaac_ppo.errors import InputError, UserError


def test_zero_action_humanoid_falls_and_resets_with_the_death_penalty():
    env = make("Humanoid", 16, sim="mujoco")
    env.reset()
    died_at = torch.full((16,), -1)
    for step in range(1, 201):
        _, rew, resets, extras = env.step(torch.zeros(16, 21))
        newly = resets & (died_at < 0)
        assert torch.all(rew[newly] == -1.0)
        assert not extras["time_outs"][newly].any()
        died_at[newly] = step
    assert torch.all(died_at > 0), f"still standing after 200 steps: {died_at.tolist()}"
    assert env.diverged_total == 0


@pytest.mark.slow
@pytest.mark.parametrize("task", ["Cartpole", "Ant", "Humanoid", "Anymal"])
def test_random_actions_run_full_episodes_without_divergence(task):
    n = 32
    env = make(task, n, sim="mujoco", seed=3)
    tracker = EpisodeTracker(n)
    generator = torch.Generator().manual_seed(0)
    env.reset()
    time_out_lengths = []
    lengths = torch.zeros(n, dtype=torch.long)
    # a full episode and 50 steps more, so that an episode that lasts times out at its length; Anymal's lasts 2500
    # steps (50 s) but random actions fell every Anymal long before (0 time-outs, 552 falls in 2550 steps of 32 envs,
    # 2026-12-02): its 1050 steps here (the divergence check) and its time-out is the contract suite's
    for _ in range(min(env.max_episode_length, 1000) + 50):
        obs, rew, resets, extras = env.step(torch.rand(n, env.num_actions, generator=generator) * 2 - 1)
        assert torch.isfinite(obs["obs"]).all() and torch.isfinite(rew).all()
        tracker.update(rew, resets)
        lengths += 1
        time_out_lengths += lengths[extras["time_outs"]].tolist()
        lengths[resets] = 0
    stats = tracker.drain()
    assert stats["episodes"] > 0
    # the divergence target at the default timestep is 0; the measured rate: benchmarks/history/physics.md,
    # "Divergence at the default timestep"
    assert env.diverged_total == 0
    if time_out_lengths:
        assert set(time_out_lengths) == {env.max_episode_length}


@pytest.mark.slow
def test_a_standing_ant_times_out_after_exactly_1000_steps():
    env = make("Ant", 8, sim="mujoco")
    env.reset()
    for step in range(1, 1001):
        _, rew, resets, extras = env.step(torch.zeros(8, 8))
        if step < 1000:
            assert not resets.any(), f"reset at step {step}"
    assert resets.all() and extras["time_outs"].all()
    assert torch.all(extras["final_obs"][:, 0] > 0.31)  # ended standing: truncation, not death


def test_a_diverged_simulation_is_reset_counted_and_kept_out_of_the_batch():
    env = make("Ant", 8, sim="mujoco")
    env.reset()
    env.qvel[3, :] = 1e12  # MuJoCo flags this as unstable and resets the data itself
    obs, rew, resets, extras = env.step(torch.zeros(8, 8))
    assert extras["diverged"] == 1 and env.diverged_total == 1
    assert resets.tolist() == [i == 3 for i in range(8)]
    assert not extras["time_outs"][3] and rew[3].item() == 0.0
    assert torch.isfinite(obs["obs"]).all() and torch.isfinite(extras["final_obs"]).all()
    assert env.progress[3].item() == 0
    _, _, resets, extras = env.step(torch.zeros(8, 8))
    assert extras["diverged"] == 0 and not resets.any()


def test_a_huge_finite_state_is_caught_on_its_step_and_moves_no_statistic():
    """The -18 million episode: a simulation blown up to a huge but finite state (below MuJoCo's own 1e10
    instability flag) returns a huge reward. Without the task's bounds that reward is counted; with them
    (cfg/task/*.yaml mujoco.max_abs_qvel, max_abs_reward) the env diverges on that very step: reward 0, reset,
    flagged in extras["diverged_envs"], and its episode enters no statistic."""
    from omegaconf import OmegaConf

    from isaac_ppo.config.compose import compose_config

    task = OmegaConf.to_container(compose_config(["task=Ant", "sim=mujoco"]).task, resolve=True)
    unbounded = dict(task, mujoco=dict(task["mujoco"], max_abs_qvel=float("inf"), max_abs_reward=float("inf")))
    rewards = {}
    for name, task_cfg in (("bounded", task), ("unbounded", unbounded)):
        env = make("Ant", 8, sim="mujoco", task_cfg=task_cfg)
        tracker = EpisodeTracker(8)
        env.reset()
        for _ in range(5):
            _, rew, resets, extras = env.step(torch.zeros(8, 8))
            tracker.update(rew, resets, extras["diverged_envs"])
        env.qvel[3, 0] = 2e3  # the torso flying forward at 2 km/s: finite, MuJoCo does not flag it
        _, rew, resets, extras = env.step(torch.zeros(8, 8))
        tracker.update(rew, resets, extras["diverged_envs"])
        rewards[name] = rew[3].item()
        if name == "bounded":
            assert extras["diverged"] == 1 and extras["diverged_envs"].tolist() == [i == 3 for i in range(8)]
            assert resets[3] and not extras["time_outs"][3] and rewards[name] == 0.0
            assert tracker.drain()["episodes"] == 0  # the diverged episode is in no statistic
            assert tracker.recent()["episodes"] == 0
        else:
            assert extras["diverged"] == 0
    assert rewards["unbounded"] > 500  # per step: what used to enter every mean (the -18M episode summed such)


def test_bad_input_is_refused_with_one_clear_message():
    with pytest.raises(UserError, match="unknown task 'Walker'; available tasks: AllegroHand, Ant, Anymal, AnymalTerrain, BallBalance, Cartpole, FrankaCabinet, FrankaCubeStack, Humanoid, Ingenuity, Quadcopter, ShadowHand"):
        make("Walker", 4, sim="mujoco")
    for bad in (0, -3):
        with pytest.raises(UserError, match="num_envs must be a positive integer"):
            make("Ant", bad, sim="mujoco")
    with pytest.raises(UserError, match="unknown task parameter 'episodeLenght'"):
        make("Ant", 4, sim="mujoco", episodeLenght=10)
    env = make("Ant", 4, sim="mujoco")
    env.reset()
    with pytest.raises(InputError, match=r"actions must have shape \(4, 8\)"):
        env.step(torch.zeros(4, 7))
    actions = torch.zeros(4, 8)
    actions[1, 2] = float("nan")
    actions[3, 0] = float("inf")
    with pytest.raises(InputError, match="env ids: 1, 3$"):
        env.step(actions)
    assert env.progress.tolist() == [0, 0, 0, 0]  # nothing was stepped


def test_sim_mjwarp_without_mujoco_warp_or_on_an_unknown_device_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco_warp", None)  # (as on Python < 3.11, where it does not install)
    with pytest.raises(UserError, match=r"sim=mjwarp needs MuJoCo Warp \(Python >= 3.11\): pip install 'isaac-ppo\[mjwarp\]'"):
        make("Cartpole", 4, sim="mjwarp")
    monkeypatch.undo()
    if importlib.util.find_spec("mujoco_warp") is not None:
        with pytest.raises(UserError, match="sim=mjwarp runs on device=cpu or device=cuda"):
            make("Cartpole", 4, sim="mjwarp", device="meta")


def test_warps_optimisation_level_comes_from_its_variable_and_a_bad_one_is_one_line(monkeypatch):
    """ISAAC_PPO_WARP_OPT_LEVEL: unset is Warp's default (None), 0-3 is that level, set on Warp's config when the
    backend imports Warp; anything else is refused naming the variable. (The suite runs at 1: tests/conftest.py.)"""
    from isaac_ppo.tasks.sim.warp import OPT_LEVEL_VARIABLE, import_warp, optimization_level

    monkeypatch.delenv(OPT_LEVEL_VARIABLE, raising=False)
    assert optimization_level() is None
    monkeypatch.setenv(OPT_LEVEL_VARIABLE, "3")
    assert optimization_level() == 3
    for bad in ("4", "-1", "O2", "fast"):
        monkeypatch.setenv(OPT_LEVEL_VARIABLE, bad)
        with pytest.raises(UserError) as error:
            optimization_level()
        assert str(error.value) == (f"ISAAC_PPO_WARP_OPT_LEVEL={bad!r}: Warp's optimisation level is 0, 1, 2 or 3 "
                                    "(or unset for Warp's default)")
    if importlib.util.find_spec("mujoco_warp") is not None:
        monkeypatch.setenv(OPT_LEVEL_VARIABLE, "1")
        wp, _ = import_warp()
        assert wp.config.optimization_level == 1


def run_bench(*args):
    # the installed console script, run outside the checkout so only the installed package can be imported
    script = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-bench")
    return subprocess.run([script, *args], capture_output=True, text=True, timeout=300, cwd=tempfile.gettempdir())


@pytest.mark.parametrize("mode,interval,evaluated,timed", [("sync", 2048, 2, 2), ("concurrent", 4096, 1, 2)])
def test_bench_train_times_iterations_without_the_evaluations_due_in_them(mode, interval, evaluated, timed):
    """An iteration that evaluated (1000 sequential steps of the eval envs: on a GPU as long as ~20 Ant
    iterations) is not an iteration's time, nor, concurrent, the next one, collected beside it: on the H100 an
    evaluation had passed for 0.42 s of 'glue' per iteration."""
    from isaac_ppo.lab.bench import bench_train

    # 64 envs x 16 = 1,024 env steps an iteration; the 4 timed iterations (after the warm-up's 1,024 steps) end
    # at 2,048 to 5,120: every 2,048 the 1st and 3rd evaluate; every 4,096 the 3rd (concurrent: and the 4th,
    # collected beside it, is left out too)
    small = ["task=Cartpole", "num_envs=64", "agent.minibatch_size=256", "sim=mujoco", "diagnostics=off",
             "task.env.episodeLength=20", "eval.num_envs=4", "scheduler.mode=" + mode]
    result = bench_train(small + [f"eval.interval_env_steps={interval}"], 4)
    assert (result["evaluations"], result["iterations_timed"]) == (evaluated, timed) and result["eval_s"] > 0
    assert result["iteration_s"] > 0 and result["env_steps_per_s"] == pytest.approx(1024 / result["iteration_s"],
                                                                                      rel=1e-2)
    with pytest.raises(UserError, match="each of the 2 timed iterations evaluated or followed an evaluation"):
        bench_train(small + ["eval.interval_env_steps=1024"], 2)


@pytest.mark.slow
def test_bench_sim_prints_one_json_line_last():
    result = run_bench("sim", "task=Cartpole", "num_envs=64", "steps=20", "sim=mujoco")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["task"] == "Cartpole" and report["num_envs"] == 64 and report["steps"] == 20
    assert report["env_steps_per_s"] > 0 and report["raw_steps_per_s"] > 0 and report["torch_threads"] == 1
    assert report["diverged"] == 0


@pytest.mark.parametrize("task,sim", [pytest.param(task, sim, marks=mjwarp_marks(task) if sim == "mjwarp" else [])
                                      for sim in ("mujoco", "mjwarp")
                                      for task in ("Quadcopter", "Ingenuity", "FrankaCubeStack")])
def test_bench_sim_runs_tasks_whose_actions_are_not_their_controls(task, sim):
    """Rotor forces (no actuator or fewer than actions) and an operational-space controller (7 actions, 9 actuators):
    the bare simulator holds the controls the env set (the GPU kit benchmarks every task so)."""
    from isaac_ppo.lab.bench_sim import SIM_DEFAULTS, bench_sim

    if sim == "mjwarp" and importlib.util.find_spec("mujoco_warp") is None:
        require_system("sim=mjwarp needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    report = bench_sim(dict(SIM_DEFAULTS, task=task, num_envs=8, steps=4, block=2, sim=sim))
    assert report["env_steps_per_s"] > 0 and report["raw_steps_per_s"] > 0 and report["diverged"] == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,message",
    [
        (["task=Walker"], "task='Walker' is outside its domain: one of AllegroHand, Ant, Anymal, AnymalTerrain, BallBalance, Cartpole, FrankaCabinet, FrankaCubeStack, Humanoid, Ingenuity, Quadcopter, ShadowHand"),
        (["task=Ant", "num_envs=0"], "num_envs=0 is outside its domain: an integer in [1, inf)"),
        (["task=Ant", "num_envs=many"], "num_envs='many' is outside its domain: an integer in [1, inf)"),
        (["task=Ant", "sim=bullet"], "sim='bullet' is outside its domain: one of auto, mujoco, mjwarp, isaacgym"),
        (["task=Ant", "colour=red"], "unknown argument 'colour=red'"),
    ],
)
def test_bench_bad_input_gets_one_line_and_exit_2(args, message):
    result = run_bench("sim", *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
