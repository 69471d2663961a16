"""Diagnostics in a real training run: they do not change training, they land in metrics.jsonl, TensorBoard
and diagnostics.png, they reach the scheduler (runs in this process, through the CLI's composition and run()),
and bad settings are refused at start (the real console script: its exit status and one line)."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest
import torch
from helpers import train_in_process
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

SCRIPT = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-train")
SMALL = ["task=Cartpole", "num_envs=64", "agent.minibatch_size=256", "sim=mujoco", "seed=7"]


def train(tmp_path, *overrides):
    return train_in_process(tmp_path / "runs", *overrides)


def train_cli(tmp_path, *overrides):
    return subprocess.run([SCRIPT, f"runs_dir={tmp_path / 'runs'}", *overrides],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)


def run_dir(tmp_path, experiment):
    return sorted(glob.glob(str(tmp_path / "runs" / experiment / "*")))[-1]


@pytest.mark.slow
def test_diagnostics_do_not_change_training(tmp_path):
    for name, setting in (("off", "diagnostics=off"), ("full", "diagnostics=full")):
        train(tmp_path, *SMALL, setting, "max_iterations=4", f"experiment={name}", "diagnostics.plot=false")
    states = [torch.load(os.path.join(run_dir(tmp_path, n), "checkpoints", "last.pt"), weights_only=False)
              for n in ("off", "full")]
    for name in states[0]["model"]:
        assert torch.equal(states[0]["model"][name], states[1]["model"][name]), name
    rows = [json.loads(line) for line in open(os.path.join(run_dir(tmp_path, "full"), "metrics.jsonl"))]
    assert all("diagnostics" in r for r in rows)  # full: every iteration
    assert all("diagnostics" not in r for r in
               map(json.loads, open(os.path.join(run_dir(tmp_path, "off"), "metrics.jsonl"))))


@pytest.mark.slow
def test_default_diagnostics_land_in_metrics_tensorboard_and_a_panel(tmp_path):
    result = train(tmp_path, *SMALL, "max_iterations=12", "diagnostics.interval_iterations=5", "experiment=d")
    directory = run_dir(tmp_path, "d")
    rows = [json.loads(line) for line in open(os.path.join(directory, "metrics.jsonl"))]
    measured = [r["iteration"] for r in rows if "diagnostics" in r]
    assert measured == [0, 5, 10]
    diag = rows[5]["diagnostics"]
    for key in ("feature_rank", "dormant_fraction", "ess", "weight_norm_actor", "grad_kurtosis_actor",
                "policy_variance", "mu_variance"):
        assert key in diag, key
    assert 1 <= diag["feature_rank"] <= 32  # Cartpole's shared trunk: [32, 32]
    events = EventAccumulator(os.path.join(directory, "tb"))
    events.Reload()
    steps = [e.step for e in events.Scalars("diagnostics/feature_rank")]
    assert steps == [rows[i]["env_steps"] for i in measured]
    assert os.path.getsize(os.path.join(directory, "diagnostics.png")) > 10_000
    assert "diagnostics panel:" in result.stdout


@pytest.mark.slow
def test_diagnostics_reach_the_adaptive_scheduler(tmp_path):
    """With diagnostics every iteration and a hair-trigger rule, the ladder moves on measured values."""
    result = train(tmp_path, *SMALL, "diagnostics.interval_iterations=1", "scheduler=adaptive", "scheduler.min_dwell=1",
                   "scheduler.warmup=1", "scheduler.rank_drop=0.0001", "scheduler.dormant_rise=0.0001",
                   "scheduler.ess_low=0.9999", "scheduler.ess_high=1.0", "max_iterations=6", "experiment=adapt",
                   "diagnostics.plot=false")
    rows = [json.loads(line) for line in open(os.path.join(run_dir(tmp_path, "adapt"), "metrics.jsonl"))]
    events = [e for r in rows for e in r.get("scheduler_events", [])]
    assert events and "num_envs 16 -> 32" in events[0], events
    assert rows[-1]["num_envs"] > 16


@pytest.mark.parametrize("override,key", [
    ("diagnostics.tau=1.5", "diagnostics.tau"), ("diagnostics.delta=2", "diagnostics.delta"),
    ("diagnostics.interval_iterations=0", "diagnostics.interval_iterations"), ("diagnostics.samples=8", "diagnostics.samples"),
    ("diagnostics.samples=many", "diagnostics.samples"),
])
def test_bad_diagnostics_settings_are_one_line(tmp_path, override, key):
    result = train_cli(tmp_path, "task=Cartpole", "sim=mujoco", override, "experiment=bad")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and "Traceback" not in result.stderr, result.stderr
    assert not os.path.exists(tmp_path / "runs" / "bad")


@pytest.mark.slow
def test_a_probe_set_saved_by_play_is_what_runs_measure_on_and_changes_no_training(tmp_path):
    train(tmp_path, *SMALL, "max_iterations=2", "experiment=source", "diagnostics=off")
    source = os.path.join(run_dir(tmp_path, "source"), "checkpoints", "last.pt")
    probe_file = str(tmp_path / "cartpole_probe.pt")
    played = train_cli(tmp_path, *SMALL, "test=true", f"checkpoint={source}", "play_episodes=64",
                       f"save_probe_set={probe_file}")
    assert played.returncode == 0, played.stderr
    assert "probe set: 2048 of the " in played.stdout and f"observations played, in {probe_file}" in played.stdout, \
        played.stdout
    saved = torch.load(probe_file, weights_only=False)
    assert saved["task"] == "Cartpole" and tuple(saved["obs"].shape) == (2048, 4) and saved["source"] == source
    for name, extra in (("batch", []), ("fixed", [f"diagnostics.probe_set={probe_file}"])):
        train(tmp_path, *SMALL, "max_iterations=3", "diagnostics.interval_iterations=1", "diagnostics.plot=false",
              f"experiment={name}", *extra)
    rows = {name: [json.loads(line) for line in open(os.path.join(run_dir(tmp_path, name), "metrics.jsonl"))]
            for name in ("batch", "fixed")}
    assert all("feature_rank" in r["diagnostics"] for r in rows["fixed"])
    # the probe draws the same samples either way: the ESS (on the batch) is the same, the rest is measured on
    # other inputs, and training is untouched
    assert [r["diagnostics"]["ess"] for r in rows["batch"]] == [r["diagnostics"]["ess"] for r in rows["fixed"]]
    assert [r["diagnostics"]["mu_variance"] for r in rows["batch"]] != \
        [r["diagnostics"]["mu_variance"] for r in rows["fixed"]]
    assert [r["actor_loss"] for r in rows["batch"]] == [r["actor_loss"] for r in rows["fixed"]]
