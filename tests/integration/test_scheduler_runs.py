"""Schedulers end to end on MuJoCo Cartpole: concurrent collection (staleness, determinism, exact resume), a
schedule changing the split mid-run (and resumed mid-schedule), env-step budgets, presets, a user's own
scheduler, and the refusal of impossible plans. The runs go through the CLI's own composition and run() in
this process (a training process spends ~9 s importing torch, its optimizer's dynamo and Hydra); the
refusals, which are about the command's exit status and its one line, run the real console script."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest
import torch

from helpers import train_in_process

SCRIPT = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-train")
SMALL = ["task=Cartpole", "num_envs=64", "agent.minibatch_size=256", "sim=mujoco",
         "diagnostics.plot=false"]  # (the end-of-run panel costs ~4 s a run: test_diagnostics_runs draws it)
# 32 envs x 32 steps for 3 iterations, then 64 x 16: the same batch of 1024 in 4 minibatches of 256
SCHEDULE = ["task=Cartpole", "sim=mujoco", "scheduler=schedule", "scheduler.batch_size=1024",
            "scheduler.num_envs=[[0,32],[3,64]]", "scheduler.minibatches=4", "diagnostics.plot=false"]


def train(tmp_path, *overrides):
    return train_in_process(tmp_path / "runs", *overrides)


def train_cli(tmp_path, *overrides, timeout=300):
    return subprocess.run(
        [SCRIPT, f"runs_dir={tmp_path / 'runs'}", *overrides],
        capture_output=True, text=True, timeout=timeout, cwd=tmp_path,
    )


def run_dir(tmp_path, experiment, index=-1):
    return sorted(glob.glob(str(tmp_path / "runs" / experiment / "*")))[index]


def rows(directory):
    return [json.loads(line) for line in open(os.path.join(directory, "metrics.jsonl"))]


def last_state(directory):
    return torch.load(os.path.join(directory, "checkpoints", "last.pt"), weights_only=False)


def assert_same_params(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


# ------------------------------------------------------------------------------------------ concurrent


@pytest.mark.slow
def test_concurrent_batches_are_one_update_stale_and_runs_are_deterministic(tmp_path):
    for name in ("c1", "c2"):
        result = train(tmp_path, *SMALL, "scheduler=concurrent", "max_iterations=5", "seed=3", f"experiment={name}")
    first, second = run_dir(tmp_path, "c1"), run_dir(tmp_path, "c2")
    log = rows(first)
    assert [r["staleness"] for r in log] == [0, 1, 1, 1, 1]  # the first batch has nothing to overlap with
    assert {r["mode"] for r in log} == {"concurrent"}
    assert_same_params(last_state(first)["model"], last_state(second)["model"])
    assert [r["window_mean_return"] for r in log] == [r["window_mean_return"] for r in rows(second)]


@pytest.mark.slow
def test_concurrent_differs_from_sync_only_by_the_stale_policy(tmp_path):
    """Same seed: batch 0 (nothing to overlap) is identical; later batches were collected by older policies."""
    train(tmp_path, *SMALL, "max_iterations=3", "seed=3", "experiment=s")
    train(tmp_path, *SMALL, "scheduler=concurrent", "max_iterations=3", "seed=3", "experiment=c")
    sync, conc = rows(run_dir(tmp_path, "s")), rows(run_dir(tmp_path, "c"))
    assert sync[0]["batch_mean_return"] == conc[0]["batch_mean_return"]
    assert sync[0]["actor_loss"] == conc[0]["actor_loss"]
    assert sync[2]["actor_loss"] != conc[2]["actor_loss"]




# ------------------------------------------------------------------------------------------ schedules


@pytest.mark.slow
def test_schedule_changes_the_split_mid_run_with_exact_env_step_accounting(tmp_path):
    result = train(tmp_path, *SCHEDULE, "max_iterations=6", "experiment=sched")
    log = rows(run_dir(tmp_path, "sched"))
    assert [(r["num_envs"], r["rollout_length"]) for r in log] == [(32, 32)] * 3 + [(64, 16)] * 3
    steps = 0
    for r in log:
        steps += r["num_envs"] * r["rollout_length"]
        assert r["env_steps"] == steps and r["batch_size"] == 1024 and r["minibatch_size"] == 256
    assert "training on cartpole with 64 envs" in result.stdout  # the pool: the most envs the schedule asks for
    assert "scheduler: iteration 3: schedule changes to num_envs 64 x rollout_length 16" in result.stdout
    assert log[3]["scheduler_events"][0].startswith("iteration 3: schedule changes")
    assert all(r["window_mean_return"] is not None for r in log[1:])


@pytest.mark.slow
def test_resume_in_the_middle_of_a_schedule_continues_it_exactly(tmp_path):
    train(tmp_path, *SCHEDULE, "max_iterations=6", "seed=2", "experiment=full")
    train(tmp_path, *SCHEDULE, "max_iterations=2", "seed=2", "experiment=part")
    train(tmp_path, *SCHEDULE, "max_iterations=6", "seed=2", "experiment=part", "resume=auto")
    full, part = rows(run_dir(tmp_path, "full")), rows(run_dir(tmp_path, "part"))
    assert [(r["num_envs"], r["env_steps"]) for r in part] == [(r["num_envs"], r["env_steps"]) for r in full[2:]]
    assert_same_params(last_state(run_dir(tmp_path, "full"))["model"], last_state(run_dir(tmp_path, "part"))["model"])


@pytest.mark.slow
def test_concurrent_schedule_resumed_from_a_checkpoint_with_a_batch_in_flight(tmp_path):
    common = [*SCHEDULE, "scheduler.mode=concurrent", "seed=4", "max_iterations=6"]
    train(tmp_path, *common, "save_interval_iterations=3", "experiment=full")
    # iter_000003.pt was written after iteration 2, while the batch of iteration 3 (the first with 64 envs)
    # was being collected: the checkpoint waited for it and holds it
    middle = os.path.join(run_dir(tmp_path, "full"), "checkpoints", "iter_000003.pt")
    pending = torch.load(middle, weights_only=False)["pending"]
    assert pending["plan"]["num_envs"] == 64 and pending["policy_version"] == 2
    train(tmp_path, *common, "experiment=again", f"resume={middle}")
    assert_same_params(last_state(run_dir(tmp_path, "full"))["model"], last_state(run_dir(tmp_path, "again"))["model"])
    assert [r["num_envs"] for r in rows(run_dir(tmp_path, "again"))] == [64, 64, 64]


@pytest.mark.slow
def test_max_env_steps_ends_the_run_without_exceeding_it(tmp_path):
    result = train(tmp_path, *SMALL, "max_env_steps=5000", "experiment=budget")  # 1024 per iteration
    log = rows(run_dir(tmp_path, "budget"))
    assert len(log) == 4 and log[-1]["env_steps"] == 4096
    assert "steps 4,096/5,000" in result.stdout
    summary = json.load(open(os.path.join(run_dir(tmp_path, "budget"), "metrics.json")))
    assert summary["env_steps"] == 4096


@pytest.mark.slow
def test_budget_scheduler_splits_the_batch(tmp_path):
    result = train(tmp_path, *SMALL, "scheduler=budget", "scheduler.batch_size=2048", "scheduler.num_envs=32",
                   "max_iterations=2", "experiment=b")
    assert [(r["num_envs"], r["rollout_length"], r["minibatch_size"]) for r in rows(run_dir(tmp_path, "b"))] == [
        (32, 64, 512), (32, 64, 512)]  # 4 minibatches, as the base plan (64 x 16 / 256)


@pytest.mark.slow
def test_adaptive_scheduler_runs_and_stays_put_without_diagnostics(tmp_path):
    result = train(tmp_path, *SMALL, "scheduler=adaptive", "scheduler.min_dwell=1", "max_iterations=3",
                   "experiment=a")
    log = rows(run_dir(tmp_path, "a"))
    assert [r["num_envs"] for r in log] == [16, 16, 16]  # the ladder's bottom rung: num_envs // 4
    assert [r["rollout_length"] for r in log] == [64, 64, 64]


@pytest.mark.slow
def test_a_users_own_scheduler_class(tmp_path):
    (tmp_path / "my_schedulers.py").write_text(
        "from isaac_ppo.scheduler import Scheduler\n"
        "class EveryOther(Scheduler):\n"
        "    def plan(self, k, history):\n"
        "        return self.base.resized(32, 32) if k % 2 else self.base\n"
        "    def reachable_plans(self, max_iterations, max_env_steps):\n"
        "        yield from (self.base, self.base.resized(32, 32))\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        result = train(tmp_path, *SMALL, "scheduler._target_=my_schedulers.EveryOther", "max_iterations=3",
                       "experiment=own")
    finally:
        sys.path.remove(str(tmp_path))
    assert [r["num_envs"] for r in rows(run_dir(tmp_path, "own"))] == [64, 32, 64]


# ------------------------------------------------------------------------------------------ bad plans


@pytest.mark.parametrize("overrides,words", [
    (["scheduler=budget", "scheduler.batch_size=1000", "scheduler.num_envs=64"],
     ["scheduler.num_envs=64", "scheduler.batch_size=1000"]),
    (["num_envs=64", "scheduler=budget", "scheduler.batch_size=4096", "scheduler.num_envs=128"],
     ["num_envs=128", "1..64", "env pool"]),
    (["scheduler=budget", "scheduler.epochs=0"], ["scheduler.epochs=0"]),
    (["agent.mini_epochs=0"], ["agent.mini_epochs"]),
    (["scheduler=schedule", "scheduler.epochs=[[0,4],[10,0]]"], ["scheduler.epochs", "at least 1"]),
    (["scheduler.mode=later"], ["scheduler.mode='later'"]),
    (["scheduler._target_=nowhere.Nothing"], ["scheduler._target_=nowhere.Nothing"]),
    (["max_env_steps=100"], ["max_env_steps=100", "first batch"]),
])
def test_impossible_plans_are_refused_at_start_in_one_line(tmp_path, overrides, words):
    result = train_cli(tmp_path, "task=Cartpole", "sim=mujoco", *overrides, "experiment=bad")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert not os.path.exists(tmp_path / "runs" / "bad")  # refused before a run directory was made
