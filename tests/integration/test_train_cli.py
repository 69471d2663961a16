"""isaac-ppo-train end to end: the real console script, Hydra composition, MuJoCo, TensorBoard files. A run that
only prepares what the command under test reads (a reference, a checkpoint to play) trains in this process."""
from __future__ import annotations

import glob
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from helpers import require_system, train_in_process

SCRIPT = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-train")
# a small, fast Cartpole: 64 envs x 16 steps, 4 minibatches
SMALL = ["task=Cartpole", "num_envs=64", "agent.minibatch_size=256", "sim=mujoco",
         "diagnostics.plot=false"]  # (the end-of-run panel costs ~4 s a run: test_diagnostics_runs draws it)


def train(tmp_path, *overrides, timeout=300):
    return subprocess.run(
        [SCRIPT, f"runs_dir={tmp_path / 'runs'}", *overrides],
        capture_output=True, text=True, timeout=timeout, cwd=tmp_path,
    )


def run_dirs(tmp_path, experiment):
    return sorted(glob.glob(str(tmp_path / "runs" / experiment / "*")))


def last_params(run_dir):
    state = torch.load(os.path.join(run_dir, "checkpoints", "last.pt"), weights_only=False)
    return state["model"], state["counters"]



@pytest.mark.slow
def test_outputs_metrics_tensorboard_config_checkpoints(tmp_path):
    result = train(tmp_path, *SMALL, "max_iterations=4", "save_interval=2", "experiment=out")
    assert result.returncode == 0, result.stderr
    (run_dir,) = run_dirs(tmp_path, "out")
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    assert [r["iteration"] for r in rows] == [0, 1, 2, 3]
    for key in ("env_steps", "wall_s", "num_envs", "rollout_length", "mean_return", "mean_length", "actor_loss",
                "critic_loss", "kl", "clip_fraction", "lr", "entropy", "fps", "fps_collect", "fps_update"):
        assert key in rows[-1], key
    assert rows[-1]["env_steps"] == 4 * 64 * 16 and rows[-1]["num_envs"] == 64
    summary = json.load(open(os.path.join(run_dir, "metrics.json")))
    assert summary["iterations"] == 4 and summary["mean_fps"] > 0
    assert os.path.isfile(os.path.join(run_dir, "config.yaml"))
    names = sorted(os.listdir(os.path.join(run_dir, "checkpoints")))
    assert names == ["best.pt", "iter_000002.pt", "iter_000004.pt", "last.pt"]

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(os.path.join(run_dir, "tb"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for tag in ("loss/actor", "loss/critic", "policy/kl", "policy/lr", "fps/collect", "fps/update", "fps/total"):
        assert tag in tags, tag
    assert [e.step for e in events.Scalars("loss/actor")] == [r["env_steps"] for r in rows]



@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_and_resume_auto_finishes_the_run(tmp_path):
    train_in_process(tmp_path / "runs", *SMALL, "max_iterations=10", "experiment=ref")
    process = subprocess.Popen(
        [SCRIPT, f"runs_dir={tmp_path / 'runs'}", *SMALL, "max_iterations=10", "experiment=pre"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    deadline = time.time() + 120
    metrics = None
    while time.time() < deadline:
        found = glob.glob(str(tmp_path / "runs" / "pre" / "*" / "metrics.jsonl"))
        if found and sum(1 for _ in open(found[0])) >= 3:
            metrics = found[0]
            break
        time.sleep(0.05)
    assert metrics is not None, "the run never got going"
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 75, err  # stopped early, resumable: `train && next` must not go on
    assert "stopped by SIGTERM" in out and "resume=auto" in out and "done" not in out
    (pre_dir,) = run_dirs(tmp_path, "pre")
    _, counters = last_params(pre_dir)
    assert 3 <= counters["iteration"] < 10
    time.sleep(1.1)
    resumed = train(tmp_path, *SMALL, "max_iterations=10", "experiment=pre", "resume=auto")
    assert resumed.returncode == 0, resumed.stderr
    expected, _ = last_params(run_dirs(tmp_path, "ref")[0])
    final, counters = last_params(run_dirs(tmp_path, "pre")[-1])
    assert counters["iteration"] == 10
    for name in expected:
        assert torch.equal(expected[name], final[name]), name


@pytest.mark.slow
def test_play_mode_reports_mean_return_and_length(tmp_path):
    train_in_process(tmp_path / "runs", *SMALL, "max_iterations=2", "experiment=p")
    (run_dir,) = run_dirs(tmp_path, "p")
    result = train(tmp_path, *SMALL, "test=true", "play_episodes=5",
                   f"checkpoint={os.path.join(run_dir, 'checkpoints', 'last.pt')}")
    assert result.returncode == 0, result.stderr
    assert "5 episodes: mean return" in result.stdout and "mean length" in result.stdout


@pytest.mark.slow
def test_play_mode_records_a_video_of_env_0(tmp_path):
    import imageio

    from isaac_ppo.video import gl_backend, offscreen_gl_problem

    require_system(offscreen_gl_problem(gl_backend("cpu")))

    train_in_process(tmp_path / "runs", *SMALL, "max_iterations=1", "experiment=v")
    (run_dir,) = run_dirs(tmp_path, "v")
    result = train(tmp_path, *SMALL, "test=true", "play_episodes=2", "capture_video=true", "experiment=v",
                   f"checkpoint={os.path.join(run_dir, 'checkpoints', 'last.pt')}")
    assert result.returncode == 0, result.stderr
    (video,) = glob.glob(str(tmp_path / "runs" / "v" / "*" / "play.mp4"))
    frames = imageio.mimread(video)
    assert len(frames) >= 2 and frames[0].shape == (480, 640, 3)
    assert f"frames): {video}" in result.stdout


def one_line_error(result, *fragments):
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    "overrides,fragments",
    [
        (["colour=red"], ["unknown config key 'colour'"]),
        (["agent.learning_rat=1e-3"], ["agent.learning_rat"]),
        (["max_iterations=many"], ["max_iterations"]),
        (["agent.horizon=2.5"], ["agent.horizon"]),
        (["sim=bullet"], ["sim='bullet'", "auto, mujoco, isaacgym"]),
        (["task=Walker"], ["Walker"]),
        (["task=Cartpole", "agent.minibatch_size=1000"], ["agent.minibatch_size=1000", "8192"]),
        (["num_envs=0"], ["num_envs"]),
    ],
)
def test_bad_config_is_one_line_and_no_run_directory(tmp_path, overrides, fragments):
    one_line_error(train(tmp_path, *overrides), *fragments)
    assert not os.path.exists(tmp_path / "runs")


@pytest.mark.slow
def test_missing_and_corrupt_checkpoints_are_one_line(tmp_path):
    one_line_error(train(tmp_path, *SMALL, "test=true", "checkpoint=/nonexistent/last.pt"),
                   "checkpoint not found: /nonexistent/last.pt")
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"not a checkpoint at all")
    one_line_error(train(tmp_path, *SMALL, f"resume={corrupt}"), str(corrupt), "cannot be read")
    one_line_error(train(tmp_path, *SMALL, "resume=auto", "experiment=never"), "resume=auto found no")


@pytest.mark.slow
def test_isaacgym_without_isaacgym_is_one_line(tmp_path):
    one_line_error(train(tmp_path, "task=Ant", "sim=isaacgym"), "Isaac Gym", "docker")


@pytest.mark.slow
def test_non_finite_reward_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    good_dir = train_in_process(tmp_path / "runs", *SMALL, "max_iterations=2", "experiment=good").run_dir
    checkpoint = os.path.join(good_dir, "checkpoints", "last.pt")
    digest = hashlib.sha256(open(checkpoint, "rb").read()).hexdigest()
    result = train(tmp_path, *SMALL, "max_iterations=4", "experiment=good", f"resume={checkpoint}",
                   "agent.reward_scale=inf")
    one_line_error(result, "non-finite reward")
    assert hashlib.sha256(open(checkpoint, "rb").read()).hexdigest() == digest
    failed_dir = run_dirs(tmp_path, "good")[-1]
    assert failed_dir != good_dir and not os.path.exists(os.path.join(failed_dir, "checkpoints", "last.pt"))


@pytest.mark.slow
def test_user_config_directory_and_python_dash_m(tmp_path):
    user = tmp_path / "my_configs" / "agent"
    user.mkdir(parents=True)
    from importlib.resources import files

    own = (files("isaac_ppo.cfg") / "agent" / "CartpolePPO.yaml").read_text()
    (user / "TinyPPO.yaml").write_text(own.replace("hidden: [32, 32]", "hidden: [8]").replace("CartpolePPO", "TinyPPO"))
    result = subprocess.run(
        [sys.executable, "-m", "isaac_ppo.train", f"runs_dir={tmp_path / 'runs'}", *SMALL, "max_iterations=1",
         "experiment=mine", "agent=TinyPPO", f"hydra.searchpath=[file://{tmp_path / 'my_configs'}]"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    (run_dir,) = run_dirs(tmp_path, "mine")
    from omegaconf import OmegaConf

    saved = OmegaConf.load(os.path.join(run_dir, "config.yaml"))
    assert saved.agent.name == "TinyPPO" and list(saved.agent.network.hidden) == [8]
    model = torch.load(os.path.join(run_dir, "checkpoints", "last.pt"), weights_only=False)["model"]
    assert model["actor_body.0.weight"].shape == (8, 4)


@pytest.mark.slow
def test_two_runs_started_at_once_never_share_a_folder(tmp_path):
    """The same resolved run directory for both (as two starts in the same second have): each run gets its own,
    with its own config, rows and checkpoints."""
    same = "hydra.run.dir=${fresh_run_dir:" + str(tmp_path / "runs" / "same") + "}"
    processes = [subprocess.Popen([SCRIPT, *SMALL, "max_iterations=2", f"seed={seed}", same], cwd=tmp_path,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in (1, 2)]
    for process in processes:
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
    folders = sorted(glob.glob(str(tmp_path / "runs" / "same*")))
    assert [os.path.basename(f) for f in folders] == ["same", "same-2"]
    seeds = set()
    for folder in folders:
        seeds.add(next(line for line in open(os.path.join(folder, "config.yaml")) if line.startswith("seed:")))
        rows = [json.loads(line) for line in open(os.path.join(folder, "metrics.jsonl"))]
        assert [row["iteration"] for row in rows] == [0, 1]
        assert os.path.isfile(os.path.join(folder, "checkpoints", "last.pt"))
    assert seeds == {"seed: 1\n", "seed: 2\n"}
