"""Sweeps: the launcher presets through the real CLI (basic, submitit local, SLURM composition), the requeue path
of a preempted job, and isaac-ppo-report over a real multirun."""
from __future__ import annotations

import csv
import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from helpers import train_in_process

pytestmark = pytest.mark.slow  # every test here launches processes that train (the whole suite runs them)

BIN = os.path.dirname(sys.executable)
TRAIN = os.path.join(BIN, "isaac-ppo-train")
REPORT = os.path.join(BIN, "isaac-ppo-report")
SMALL = ["task=Cartpole", "sim=mujoco", "agent.minibatch_size=256",
         "diagnostics.plot=false"]  # (the end-of-run panel costs ~4 s a run: test_diagnostics_runs draws it)


def run(*command, cwd, timeout=300):
    return subprocess.run(list(command), capture_output=True, text=True, timeout=timeout, cwd=cwd)


def rows(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_slurm_presets_compose_with_the_keys_a_cluster_user_sets(tmp_path):
    result = run(TRAIN, "--cfg", "hydra", "hydra/launcher=slurm_gpu", "hydra.launcher.partition=gpu-long",
                 "hydra.launcher.timeout_min=720", "hydra.launcher.gpus_per_node=4", "hydra.launcher.tasks_per_node=4",
                 "hydra.launcher.cpus_per_task=12", "hydra.launcher.mem_gb=200", "task=Ant", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    launcher = result.stdout.split("  launcher:\n", 1)[1].split("  sweeper:\n", 1)[0]
    assert "_target_: hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher" in launcher
    for line in ("partition: gpu-long", "timeout_min: 720", "gpus_per_node: 4", "tasks_per_node: 4",
                 "cpus_per_task: 12", "mem_gb: 200", "signal_delay_s: 120", "max_num_timeout: 20"):
        assert f"    {line}\n" in launcher, line

    cpu = run(TRAIN, "--cfg", "hydra", "hydra/launcher=slurm_cpu", "hydra.launcher.partition=cpu", cwd=tmp_path)
    assert cpu.returncode == 0, cpu.stderr
    assert "SlurmLauncher" in cpu.stdout and "    partition: cpu\n" in cpu.stdout
    assert "    gpus_per_node: null\n" in cpu.stdout


def test_local_parallel_runs_as_many_jobs_as_the_cores_allow(tmp_path):
    cores = len(os.sched_getaffinity(0))
    result = run(TRAIN, "--cfg", "all", "--resolve", "hydra/launcher=local_parallel", "torch_threads=1",
                 "task=Cartpole", "task.mujoco.nthread=1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "JoblibLauncher" in result.stdout and f"    n_jobs: {cores}\n" in result.stdout
    # physics on every core (nthread 0): one job at a time
    result = run(TRAIN, "--cfg", "all", "--resolve", "hydra/launcher=local_parallel", "task=Cartpole", cwd=tmp_path)
    assert "    n_jobs: 1\n" in result.stdout


def test_a_submitit_local_multirun_executes_each_job_in_its_folder(tmp_path):
    sweep = tmp_path / "sweep"
    result = run(TRAIN, "-m", "hydra/launcher=slurm_local", *SMALL, "num_envs=64", "max_iterations=2", "seed=0,1",
                 f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert os.path.isdir(sweep / ".submitit")
    for job, seed in (("0", 0), ("1", 1)):
        assert [row["iteration"] for row in rows(sweep / job)] == [0, 1]
        with open(sweep / job / "metrics.json") as f:
            assert json.load(f)["stopped_by"] is None
        assert f"- seed={seed}\n" in (sweep / job / ".hydra" / "overrides.yaml").read_text()


# the job's command under a stand-in for submitit's SIGUSR2 handler, installed before training starts as submitit
# installs its own: it records the call and exits like submitit after requeueing
UNDER_SUBMITIT = """
import signal, sys
marker = sys.argv[1]
def requeue(signum, frame):
    with open(marker, "w") as f:
        f.write("requeued")
    sys.exit(3)
signal.signal(signal.SIGUSR2, requeue)
from isaac_ppo.train import main
main(sys.argv[2:])
"""


def test_a_preempted_job_saves_hands_on_to_the_requeue_and_resumes_in_place(tmp_path):
    job = ["num_envs=64", "max_iterations=10", "seed=3", *SMALL]
    reference = train_in_process(tmp_path / "runs", *job).run_dir  # (the job itself runs as a real process)

    job_dir, marker = tmp_path / "job", tmp_path / "requeued"
    command = [sys.executable, "-c", UNDER_SUBMITIT, str(marker), *job, f"hydra.run.dir={job_dir}"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.time() + 120
    while time.time() < deadline and not (
            os.path.exists(job_dir / "metrics.jsonl") and len(rows(job_dir)) >= 3):
        time.sleep(0.05)
    process.send_signal(signal.SIGUSR2)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 3, err  # the requeue handler ran, after...
    assert marker.read_text() == "requeued"
    assert "stopped by SIGUSR2" in out  # ... the iteration finished and last.pt was saved
    stopped_at = torch.load(job_dir / "checkpoints" / "last.pt", weights_only=False)["counters"]["iteration"]
    assert 3 <= stopped_at < 10
    with open(job_dir / "metrics.json") as f:
        assert json.load(f)["stopped_by"] == "SIGUSR2"

    # the requeued job: the same command in the same folder
    requeued = run(TRAIN, *job, f"hydra.run.dir={job_dir}", cwd=tmp_path)
    assert requeued.returncode == 0, requeued.stderr
    assert f"resuming from {job_dir / 'checkpoints' / 'last.pt'}" in requeued.stdout
    assert [row["iteration"] for row in rows(job_dir)] == list(range(10))  # continued, no row twice
    expected = torch.load(os.path.join(reference, "checkpoints", "last.pt"), weights_only=False)["model"]
    final = torch.load(job_dir / "checkpoints" / "last.pt", weights_only=False)["model"]
    for name in expected:
        assert torch.equal(expected[name], final[name]), name
    with open(job_dir / "metrics.json") as f:
        assert json.load(f)["stopped_by"] is None


def test_a_real_multirun_and_the_report_over_it(tmp_path):
    sweep = tmp_path / "sweep"
    # (a pool of 64 envs: the base plan's 4 minibatches; the task's default pool would make it 32 of 32 samples)
    result = run(TRAIN, "-m", *SMALL, "num_envs=64", "max_iterations=3", "seed=0,1", "scheduler=budget",
                 "scheduler.num_envs=32,64", "scheduler.batch_size=1024", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    jobs = sorted(glob.glob(str(sweep / "[0-9]*")))
    assert len(jobs) == 4

    report = run(REPORT, str(sweep), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    table = [line for line in report.stdout.splitlines() if line.startswith(("32 ", "64 "))]
    assert len(table) == 2 and all(" 2/2 " in line for line in table), report.stdout
    out = sweep / "report"
    assert "metric: eval.return_mean (each run's end-of-run evaluation" in report.stdout  # the default
    for figure in ("final_vs_scheduler.num_envs.png", "diagnostics.png"):
        assert os.path.getsize(out / figure) > 10_000, figure

    # the numbers are the runs' own: two seeds per group, so the IQM is their mean and the CI spans them
    finals = {}
    for job in jobs:
        overrides = (sweep / job / ".hydra" / "overrides.yaml").read_text().split()
        envs = next(o for o in overrides if o.startswith("scheduler.num_envs=")).split("=")[1]
        with open(os.path.join(job, "metrics.json")) as f:
            finals.setdefault(envs, []).append(json.load(f)["final_eval"]["return_mean"])
    with open(out / "report.csv") as f:
        groups = {row["scheduler.num_envs"]: row for row in csv.DictReader(f)}
    assert sorted(groups) == ["32", "64"]
    for envs, values in finals.items():
        row = groups[envs]
        assert abs(float(row["iqm"]) - sum(values) / 2) < 1e-9
        assert abs(float(row["ci_low"]) - min(values)) < 1e-9 and abs(float(row["ci_high"]) - max(values)) < 1e-9
        assert row["runs_complete"] == "2" and float(row["env_steps_median"]) == 3 * 1024
    assert (out / "report.md").read_text().count("| 2/2 |") == 2


def test_a_sweep_with_one_bad_job_is_refused_before_any_job_runs(tmp_path):
    sweep = tmp_path / "sweep"
    for bad, named in ((["scheduler=budget", "scheduler.num_envs=32,100"], "scheduler.num_envs=100"),
                       (["preset=fixed_batch_splits", "num_envs=1024"], "a plan of scheduler BudgetScheduler"),
                       (["seed=0,1", "no_such_key=3"], "no_such_key")):
        result = run(TRAIN, "-m", *SMALL, *bad, f"hydra.sweep.dir={sweep}", cwd=tmp_path)
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and named in lines[0], result.stderr
        assert not os.path.exists(sweep)
