"""multi_gpu=true on torch.distributed with real gloo process groups: torchrun runs of the CLI (ranks stay
bit-identical, rank 0 alone writes, env steps count every rank, resume restores every rank), the equivalence of
2 ranks x E envs with 1 rank x 2E envs, and the one-line refusals."""
from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys

import pytest
import torch
import torch.multiprocessing as mp

from helpers import synthetic_buffer
from rank_worker import ENVS, OBS, PPO_CFG, STEPS, InOrderPPO, learn, new_model, rank_process

pytestmark = pytest.mark.slow  # every test here launches processes that train (the whole suite runs them)

BIN = os.path.dirname(sys.executable)
TRAIN = os.path.join(BIN, "isaac-ppo-train")
TORCHRUN = os.path.join(BIN, "torchrun")
SMALL = ["task=Cartpole", "sim=mujoco", "num_envs=64", "agent.minibatch_size=256", "diagnostics.interval_iterations=2",
         "diagnostics.plot=false"]  # (the end-of-run panel costs ~4 s a run: test_diagnostics_runs draws it)


def torchrun(tmp_path, *overrides, nproc=2):
    command = [TORCHRUN, "--standalone", f"--nproc_per_node={nproc}", "-m", "isaac_ppo.train", "multi_gpu=true",
               f"runs_dir={tmp_path / 'runs'}", *SMALL, *overrides]
    # a rank that aborts in C++ prints where its Python threads were (CI once saw a bare SIGABRT at a run's end)
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)


def single(tmp_path, *overrides, env=None):
    return subprocess.run([TRAIN, f"runs_dir={tmp_path / 'runs'}", *SMALL, *overrides], capture_output=True,
                          text=True, timeout=600, cwd=tmp_path, env=env)


def run_dir(tmp_path, experiment):
    (found,) = glob.glob(str(tmp_path / "runs" / experiment / "*"))  # exactly one: no rank made its own
    return found


def rows(folder):
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def last(folder):
    return torch.load(os.path.join(folder, "checkpoints", "last.pt"), weights_only=False)


@pytest.mark.parametrize("network", [[], ["agent.network.rnn.name=lstm", "agent.network.rnn.units=16"]],
                         ids=["feed_forward", "lstm"])
def test_two_ranks_train_as_one_learner_and_resume_exactly(tmp_path, network):
    """(lstm: each rank carries its own envs' recurrent states, saved per rank and restored by each)"""
    straight = torchrun(tmp_path, "max_iterations=4", "save_interval_iterations=2", "experiment=straight", *network)
    assert straight.returncode == 0, straight.stderr
    folder = run_dir(tmp_path, "straight")
    assert sorted(os.listdir(tmp_path / "runs")) == ["straight"]
    assert straight.stdout.count("] done: ") == 1  # rank 0 alone reports (and evaluates)

    with open(os.path.join(folder, "metrics.json")) as f:
        summary = json.load(f)
    assert summary["world_size"] == 2
    digests = summary["rank_digests"]  # each rank's SHA-256 of its parameters and normaliser statistics
    assert len(digests) == 2 and digests[0] == digests[1]
    # twice a single rank's 64 x 16 per iteration (one process counts num_envs x horizon: test_train_cli)
    assert [row["env_steps"] for row in rows(folder)] == [2 * 64 * 16 * k for k in (1, 2, 3, 4)]
    assert any("diagnostics" in row for row in rows(folder))  # measured on rank 0
    state = last(folder)
    assert state["world_size"] == 2 and len(state["ranks"]) == 2
    assert not torch.equal(state["ranks"][0]["obs"], state["ranks"][1]["obs"])  # two different pools (seed + rank)
    if network:
        assert not torch.equal(state["ranks"][0]["hidden"], state["ranks"][1]["hidden"])
    assert state["model"]["obs_norm.count"] > 2 * 4 * 64 * 16  # every rank's batches were folded in

    # resumed from its checkpoint of iteration 2 and run to 4 again: every rank restores its envs and streams
    middle = os.path.join(folder, "checkpoints", "iter_000002.pt")
    assert torch.load(middle, weights_only=False)["counters"]["iteration"] == 2
    resumed = torchrun(tmp_path, "max_iterations=4", "save_interval_iterations=2", "experiment=straight", *network,
                       f"resume={middle}")
    assert resumed.returncode == 0, resumed.stderr
    parts = sorted(glob.glob(str(tmp_path / "runs" / "straight" / "*")))
    assert len(parts) == 2 and parts[0] == folder
    expected, final = state["model"], last(parts[-1])["model"]
    for name in expected:
        assert torch.equal(expected[name], final[name]), name


# ---------------------------------------------------------------------------------- equivalence

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_of_e_envs_make_the_update_of_one_rank_of_2e_envs(tmp_path):
    out = str(tmp_path / "rank")
    mp.start_processes(rank_process, args=(free_port(), out), nprocs=2, start_method="spawn")
    ranks = [torch.load(f"{out}.{r}", weights_only=False) for r in (0, 1)]

    model = new_model()
    buffer = synthetic_buffer(new_model(), STEPS, 2 * ENVS)
    ppo = InOrderPPO(model, PPO_CFG, torch.device("cpu"), torch.Generator())
    grads = learn(ppo, buffer, 2 * ENVS)
    model.obs_norm.update(buffer.obs.view(-1, OBS))
    model.value_norm.update(buffer.returns.view(-1, 1))

    # the first step's gradient is the mean over all the data (Adam would hide a sum: it is scale-invariant)
    for name, grad in grads.items():
        assert torch.allclose(ranks[0]["grads"][name], grad, rtol=1e-5, atol=1e-7), name
        assert torch.equal(ranks[0]["grads"][name], ranks[1]["grads"][name]), name
    for name, value in model.state_dict().items():
        assert torch.equal(ranks[0]["model"][name], ranks[1]["model"][name]), name  # the ranks agree bit for bit
        # ... and with one learner on all the data: the all-reduce is a true mean (float32 sums in another order)
        tolerance = 1e-12 if value.dtype == torch.float64 else 1e-6
        assert torch.allclose(ranks[0]["model"][name], value, rtol=0, atol=tolerance), name
    assert ranks[0]["lr"] == ranks[1]["lr"] == ppo.lr  # the adaptive lr moved the same way (averaged KL)
    assert ppo.lr != PPO_CFG["learning_rate"]  # ... and it did move


# ---------------------------------------------------------------------------------- refusals


def one_line(result, *words):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def launched_env(**extra):
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()))
    env.update(extra)
    return env


def test_multi_gpu_without_a_launcher_says_how_to_launch(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    one_line(single(tmp_path, "multi_gpu=true", "max_iterations=1", env=env), "multi_gpu=true", "torchrun")


def test_nccl_or_cuda_on_a_cpu_machine_is_refused(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: NCCL and cuda devices are fine here")
    one_line(single(tmp_path, "multi_gpu=true", "dist_backend=nccl", "max_iterations=1", env=launched_env()),
             "dist_backend=nccl", "gloo")
    one_line(single(tmp_path, "multi_gpu=true", "device=cuda", "dist_backend=gloo", "max_iterations=1",
                    env=launched_env()), "device=cuda", "no CUDA device")


def test_more_ranks_on_a_node_than_gpus_is_refused(monkeypatch):
    from isaac_ppo import distributed
    from isaac_ppo.errors import UserError

    for name, value in launched_env(LOCAL_RANK="2", RANK="2", WORLD_SIZE="3").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(UserError, match="LOCAL_RANK=2 has no GPU: this node has 2"):
        distributed.setup(True, "cuda", "auto")


def test_a_slurm_style_job_with_two_tasks_is_one_two_rank_run(tmp_path):
    """hydra/launcher=slurm_local with tasks_per_node=2: submitit starts two tasks, TorchDistributedEnvironment
    gives them their ranks, and they train as one learner into the job's folder."""
    sweep = tmp_path / "sweep"
    result = subprocess.run(
        [TRAIN, "-m", "hydra/launcher=slurm_local", "hydra.launcher.tasks_per_node=2", "multi_gpu=true", *SMALL,
         "max_iterations=2", f"hydra.sweep.dir={sweep}"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    with open(sweep / "0" / "metrics.json") as f:
        summary = json.load(f)
    assert summary["world_size"] == 2 and len(set(summary["rank_digests"])) == 1
    assert [row["env_steps"] for row in rows(sweep / "0")] == [2 * 64 * 16, 4 * 64 * 16]
