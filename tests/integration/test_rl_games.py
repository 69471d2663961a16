"""agent=rl_games through the real CLIs: rl-games trains our env with the task's values and writes our metrics
beside its own outputs; isaac-ppo-report compares it with an isaac-ppo run; what cannot run says so in one line."""
from __future__ import annotations

import csv
import glob
import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest
import yaml

# every test here launches processes that train (the whole suite runs them). One xdist worker takes
# them all (xdist_group): the module's fixture then trains once, not once per worker that draws one of its
# tests (13 s twice on a 2-core machine, 2026-12-02)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("rl_games")]

BIN = os.path.dirname(sys.executable)
TRAIN = os.path.join(BIN, "isaac-ppo-train")
REPORT = os.path.join(BIN, "isaac-ppo-report")
# the same tiny Cartpole for both agents: 64 envs x 16 steps, 4 minibatches of 256, 3 iterations; evaluated
# after the second iteration (2048 env steps) and at the end, on 16 envs
SMALL = ["task=Cartpole", "sim=mujoco", "max_iterations=3", "num_envs=64", "agent.minibatch_size=256",
         "eval.interval_env_steps=2048", "eval.num_envs=16", "eval.stochastic=true"]
MISSING = "isaac-ppo-train: agent=rl_games needs rl-games: pip install 'isaac-ppo[rl_games]'"


def run(*command, cwd, env=None, timeout=300):
    return subprocess.run(list(command), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def read_rows(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def read_summary(run_dir):
    with open(os.path.join(run_dir, "metrics.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An rl-games run and an isaac-ppo run with the same overrides but agent.backend, in one runs_dir."""
    if importlib.util.find_spec("rl_games") is None:
        pytest.fail("rl-games is missing: it is a test dependency, install it with pip install '.[test]' "
                    "(or pip install 'rl-games>=1.6,<1.7')")
    root = tmp_path_factory.mktemp("rl_games")
    runs_dir = root / "runs"
    theirs = run(TRAIN, *SMALL, "agent=rl_games", f"runs_dir={runs_dir}", cwd=root)
    assert theirs.returncode == 0, theirs.stderr
    ours = run(TRAIN, *SMALL, f"runs_dir={runs_dir}", cwd=root)
    assert ours.returncode == 0, ours.stderr
    dirs = {read_summary(d).get("agent", "isaac_ppo"): d for d in glob.glob(str(runs_dir / "Cartpole" / "*"))}
    assert sorted(dirs) == ["isaac_ppo", "rl_games"], dirs
    return {"root": root, "runs_dir": runs_dir, "rl_games": dirs["rl_games"], "isaac_ppo": dirs["isaac_ppo"],
            "stdout": theirs.stdout}


def test_rl_games_trains_our_env_and_writes_our_metrics_and_its_outputs(runs):
    run_dir = runs["rl_games"]
    assert "[Cartpole] training with rl-games 1.6" in runs["stdout"] and "with 64 envs" in runs["stdout"]
    rows = read_rows(run_dir)
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    assert [r["env_steps"] for r in rows] == [64 * 16 * k for k in (1, 2, 3)]
    for row in rows:
        assert row["num_envs"] == 64 and row["rollout_length"] == 16 and row["batch_size"] == 1024
        assert row["epochs"] == 8 and row["minibatch_size"] == 256 and row["agent"] == "rl_games"
        for key in ("wall_s", "fps", "kl", "lr", "collect_s", "update_s", "actor_loss", "critic_loss"):
            assert isinstance(row[key], float) and row[key] == row[key], key
    assert rows[-1]["episodes"] >= 0 and rows[-1]["window_mean_return"] > 0 and rows[-1]["window_mean_length"] > 0
    assert 0 < rows[-1]["window_episodes"] <= 100
    assert rows[-1]["rl_games_mean_return"] > 0  # rl-games' own window, logged beside ours
    # our evaluation of rl-games' policy, where an isaac-ppo run evaluates: after the update that crossed 2048
    assert ["eval" in row for row in rows] == [False, True, False]
    evaluation = rows[1]["eval"]
    assert evaluation["env_steps"] == 2048 and evaluation["policy_version"] == 2 and evaluation["episodes"] == 16
    assert evaluation["return_ci95"][0] <= evaluation["return_iqm"] <= evaluation["return_ci95"][1]
    sampled = evaluation["stochastic"]  # rl-games' sampled actions: its log-std, as its model samples them
    assert sampled["episodes"] == 16 and math.isfinite(sampled["return_mean"]) and sampled["return_mean"] > 0
    assert rows[0]["wall_s"] < rows[1]["wall_s"] < rows[2]["wall_s"]

    summary = read_summary(run_dir)
    assert summary["stopped_by"] is None and summary["agent"] == "rl_games"
    assert summary["task"] == "Cartpole" and summary["iterations"] == 3 and summary["env_steps"] == 3 * 1024
    for key in ("wall_s", "final_window_mean_return", "mean_fps", "last_checkpoint"):
        assert summary[key] is not None, key
    assert summary["final_eval"]["env_steps"] == 3 * 1024 and summary["final_eval"]["episodes"] == 16
    assert "done (rl-games): evaluation over 16 episodes: mean return" in runs["stdout"]
    assert os.path.isfile(summary["last_checkpoint"]) and summary["last_checkpoint"].startswith(run_dir)
    assert os.path.basename(summary["last_checkpoint"]).startswith("last_Cartpole_ep_3")
    assert glob.glob(os.path.join(run_dir, "nn", "*.pth"))
    assert glob.glob(os.path.join(run_dir, "summaries", "events.out.tfevents.*"))  # rl-games' TensorBoard
    assert glob.glob(os.path.join(run_dir, "tb", "events.out.tfevents.*"))  # ours, same tags as isaac-ppo runs
    assert os.path.isfile(os.path.join(run_dir, "config.yaml"))

    with open(os.path.join(run_dir, "rl_games_params.yaml")) as f:
        params = yaml.safe_load(f)["params"]
    config = params["config"]
    assert params["algo"]["name"] == "a2c_continuous" and params["model"]["name"] == "continuous_a2c_logstd"
    assert params["network"]["mlp"]["units"] == [32, 32] and params["network"]["mlp"]["activation"] == "elu"
    assert config["horizon_length"] == 16 and config["minibatch_size"] == 256 and config["num_actors"] == 64
    assert config["mini_epochs"] == 8 and config["max_epochs"] == 3 and params["seed"] == 42
    assert config["reward_shaper"]["scale_value"] == 0.1 and config["tau"] == 0.95 and config["e_clip"] == 0.2
    assert config["value_bootstrap"] is True and config["lr_schedule"] == "adaptive"


def test_report_compares_both_agents_in_one_table(runs):
    # both agents evaluate (our evaluation, on rl-games' policy too): they meet on the evaluated return
    result = run(REPORT, str(runs["runs_dir"]), cwd=runs["root"])
    assert result.returncode == 0, result.stderr
    with open(runs["runs_dir"] / "report" / "report.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 2, table
    assert sorted(row["agent.backend"] for row in table) == ["isaac_ppo", "rl_games"], table
    assert "rl_games" in result.stdout and "isaac_ppo" in result.stdout
    assert "metric: eval.return_mean" in result.stdout, result.stdout


def test_missing_rl_games_is_one_line_naming_the_extra(tmp_path):
    shim = tmp_path / "shim" / "rl_games"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'rl_games'\", name='rl_games')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "shim"))
    result = run(TRAIN, *SMALL, "agent=rl_games", f"runs_dir={tmp_path / 'runs'}", cwd=tmp_path, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [MISSING], result.stderr


def test_what_rl_games_cannot_do_is_refused_in_one_line(tmp_path):
    result = run(TRAIN, *SMALL, "agent=rl_games", "scheduler=concurrent", f"runs_dir={tmp_path / 'runs'}",
                 cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "agent.backend=rl_games" in lines[0] and "scheduler" in lines[0], result.stderr


def test_a_stopped_rl_games_run_is_not_reported_finished(tmp_path):
    """SIGTERM: rl-games ends at its epoch with its checkpoint; the run neither finished nor can be resumed here,
    so the status is 1 (not 0: `train && next` must not go on) with one line, and no 'done'."""
    import signal
    import time

    process = subprocess.Popen([TRAIN, *SMALL[:2], "num_envs=64", "agent.minibatch_size=256", "max_iterations=500",
                                "agent=rl_games", f"runs_dir={tmp_path / 'runs'}", "experiment=cut"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.time() + 120
    logs = str(tmp_path / "runs" / "cut" / "*" / "metrics.jsonl")
    while time.time() < deadline and not any(sum(1 for _ in open(p)) >= 2 for p in glob.glob(logs)):
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 1, (out[-500:], err[-500:])
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "stopped early by SIGTERM" in lines[0] and "cannot be resumed" in lines[0], err
    assert "stopped by SIGTERM" in out and "done" not in out
