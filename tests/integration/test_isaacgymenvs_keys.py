"""IsaacGymEnvs' command-line keys keep their meaning here (isaac_ppo/config/isaacgymenvs.py): train= is agent=,
seed=-1 draws a seed that config.yaml records (and a resume keeps), torch_deterministic turns on torch's
deterministic algorithms, rl_device is device, and the Isaac Gym device keys either reach Isaac Gym (tested
against the adapter's fake in tests/unit/test_isaacgym_adapter.py) or say in one note line that MuJoCo has no
use for them."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from helpers import train_in_process
from omegaconf import OmegaConf

from isaac_ppo.errors import UserError
from isaac_ppo.config.compose import compose_config

SCRIPT = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-train")
SMALL = ["task=Cartpole", "sim=mujoco", "num_envs=64", "agent.minibatch_size=256", "eval.final=false",
         "diagnostics=off"]


def _config(run_dir):
    return OmegaConf.load(os.path.join(run_dir, "config.yaml"))


def test_train_is_agent_on_the_command_line(tmp_path):
    shown = subprocess.run([SCRIPT, "task=Ant", "train=CartpolePPO", "--cfg", "job"], capture_output=True,
                           text=True, timeout=120, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert OmegaConf.create(shown.stdout).agent.name == "CartpolePPO"


@pytest.mark.slow
def test_seed_minus_one_draws_a_seed_that_config_yaml_records_and_a_resume_keeps(tmp_path):
    first = train_in_process(tmp_path / "runs", *SMALL, "max_iterations=2", "seed=-1")
    seed = _config(first.run_dir).seed
    assert seed >= 0 and f"seed=-1: seed {seed} (drawn at random; config.yaml records it" in first.stdout
    again = train_in_process(tmp_path / "runs", *SMALL, "max_iterations=2", "seed=-1")
    assert _config(again.run_dir).seed != seed  # (one chance in 2**31 of a false alarm)
    last = os.path.join(first.run_dir, "checkpoints", "last.pt")
    resumed = train_in_process(tmp_path / "runs", *SMALL, "max_iterations=3", "seed=-1", f"resume={last}")
    assert _config(resumed.run_dir).seed == seed and f"seed {seed} (the resumed run's" in resumed.stdout
    # the recorded seed repeats the run: the same parameters as a run given that seed
    repeat = train_in_process(tmp_path / "runs", *SMALL, "max_iterations=2", f"seed={seed}")
    a = torch.load(last, weights_only=False)["model"]
    b = torch.load(os.path.join(repeat.run_dir, "checkpoints", "last.pt"), weights_only=False)["model"]
    assert all(torch.equal(a[name], b[name]) for name in a)


@pytest.mark.slow
def test_torch_deterministic_and_the_device_keys(tmp_path):
    try:
        result = train_in_process(tmp_path / "runs", *SMALL, "max_iterations=1", "torch_deterministic=true",
                                  "sim_device=cuda:0", "pipeline=gpu", "graphics_device_id=0", "headless=false",
                                  "force_render=true")
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
    notes = [line for line in result.stdout.splitlines() if " note: " in line]
    assert [line.split(" note: ")[1].split(" ")[0].rstrip(":") for line in notes] == [
        "sim_device=cuda:0", "pipeline=gpu", "graphics_device_id=0", "headless=false", "force_render=true"]
    assert all("MuJoCo" in line for line in notes)
    assert _config(result.run_dir).torch_deterministic is True


def test_rl_device_is_device_and_meaningless_values_are_refused():
    assert compose_config([*SMALL, "rl_device=cuda:1"]).device == "cuda:1"
    for override, message in (("seed=-2", "seed=-2 is outside its domain: an integer in [-1, inf)"),
                              ("pipeline=tpu", "pipeline='tpu' is outside its domain: one of gpu, cpu or null")):
        with pytest.raises(UserError) as error:
            compose_config([*SMALL, override])
        assert message in str(error.value)


@pytest.mark.slow
def test_num_envs_as_isaacgymenvs_users_type_it_in_play_and_in_training(tmp_path):
    from isaac_ppo.scheduler.plan import base_plan

    trained = train_in_process(tmp_path / "runs", *SMALL, "max_iterations=1")
    last = os.path.join(trained.run_dir, "checkpoints", "last.pt")
    # play: num_envs is the envs that play (one episode each); no minibatch is asked of it (Ant's is 32768)
    played = train_in_process(tmp_path / "runs", "task=Cartpole", "sim=mujoco", "test=true", f"checkpoint={last}",
                              "num_envs=24")
    assert played.summary["episodes"] == 24
    compose_config(["task=Ant", "test=true", "checkpoint=x.pt", "num_envs=64"])
    # training: agent.num_mini_batches (rsl_rl's form) follows the batch; a size that does not divide says which do
    assert base_plan(compose_config([*SMALL, "num_envs=100", "agent.num_mini_batches=4"])).minibatch_size == 400
    for override, message in (
            ("agent.num_mini_batches=7", "agent.num_mini_batches=7 does not divide the batch num_envs x agent.horizon = "
                                         "100 x 16 = 1600: counts that do (the nearest): 1, 2, 4, 5, 8, 10"),
            ("agent.minibatch_size=300", "num_envs=100 x agent.horizon=16 is a batch of 1,600 transitions, not a "
                                         "multiple of Cartpole's minibatch (agent.minibatch_size=300, sized for its "
                                         "512 envs): add agent.minibatch_size=200 (sizes that divide it, the nearest: "
                                         "80, 100, 160, 200, 320, 400), or agent.num_mini_batches=N")):
        with pytest.raises(UserError) as error:
            compose_config([*SMALL, "num_envs=100", override])
        assert message in str(error.value), str(error.value)


def test_a_run_written_before_keys_were_added_still_resumes_at_their_defaults(tmp_path):
    from isaac_ppo.loop.resume import resume_mismatch
    from isaac_ppo.io.logger import write_config

    cfg = compose_config(SMALL)
    path = write_config(str(tmp_path), cfg)
    saved = OmegaConf.load(path)
    for key in ("torch_deterministic", "rl_device", "capture_video_interval_iterations", "wandb_activate", "wandb_tags"):
        del saved[key]
    del saved.agent["num_mini_batches"]
    del saved.eval["stochastic"]
    del saved.task.mujoco["nconmax"]  # (a task key: its default is the packaged cfg/task/<task>.yaml)
    OmegaConf.save(saved, path)
    assert resume_mismatch(path, cfg) is None  # the new keys at their defaults: the same run
    assert resume_mismatch(path, compose_config([*SMALL, "task.mujoco.nconmax=3"])) == \
        "task.mujoco.nconmax=1 there, 3 here"  # (what that run did: the key's default)
    assert resume_mismatch(path, compose_config([*SMALL, "torch_deterministic=true"])) == \
        "torch_deterministic=False there, True here"  # not at its default: another run


def test_a_run_written_before_schedule_type_is_a_legacy_run_whatever_its_task_now_says(tmp_path):
    """agent.schedule_type came (2026-12-08) after runs of tasks whose agent config now sets standard (IsaacGymEnvs'
    ShadowHand configs): those runs adapted every minibatch, so they continue with legacy and not otherwise."""
    from isaac_ppo.loop.resume import resume_mismatch
    from isaac_ppo.io.logger import write_config

    hand = ["task=ShadowHandOpenAI_LSTM", "sim=mujoco", "num_envs=64", "agent.num_mini_batches=4", "diagnostics=off"]
    cfg = compose_config(hand)
    assert cfg.agent.schedule_type == "standard" and compose_config(SMALL).agent.schedule_type == "legacy"
    path = write_config(str(tmp_path), cfg)
    saved = OmegaConf.load(path)
    del saved.agent["schedule_type"]
    OmegaConf.save(saved, path)
    assert resume_mismatch(path, cfg) == "agent.schedule_type='legacy' there, 'standard' here"
    assert resume_mismatch(path, compose_config([*hand, "agent.schedule_type=legacy"])) is None
