"""wandb_activate=true for real, in W&B's offline mode: the run's transaction log (<run>/wandb/offline-run-*/
run-<id>.wandb) is read back and holds TensorBoard's scalars, under its tags, at its steps (env steps), with the
run's config; a resumed run continues the same W&B run; a sweep's jobs share a group; without wandb installed
the command refuses in one line naming the extra."""
from __future__ import annotations

import glob
import json
import os
import struct
import subprocess
import sys
import time

import pytest

from helpers import train_in_process

pytestmark = pytest.mark.slow  # trains (tiny Cartpoles, a few seconds each)

wandb = pytest.importorskip("wandb", reason="wandb is a test dependency: pip install -e '.[test]'")

TRAIN = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-train")
# 64 envs x 16 steps a batch, evaluated after the second iteration (2048 env steps) and at the end
SMALL = ["task=Cartpole", "sim=mujoco", "num_envs=64", "agent.minibatch_size=256", "eval.interval_env_steps=2048",
         "eval.num_envs=16"]
MISSING = "isaac-ppo-train: wandb_activate=true needs wandb: pip install 'isaac-ppo[wandb]'"
W_AND_B_OWN = {"_step", "_runtime", "_timestamp"}


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """W&B offline, its settings, cache and artifacts under tmp_path (nothing in ~/.config or ~/.cache)."""
    for name, value in {"WANDB_MODE": "offline", "WANDB_DIR": tmp_path / "wandb", "WANDB_CONFIG_DIR":
                        tmp_path / "wandb-config", "WANDB_CACHE_DIR": tmp_path / "wandb-cache",
                        "WANDB_DATA_DIR": tmp_path / "wandb-data", "WANDB_ARTIFACT_DIR": tmp_path / "wandb-artifacts",
                        "WANDB_SILENT": "true"}.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    monkeypatch.delenv("WANDB_RESUME", raising=False)
    return tmp_path


def records(path):
    """The records of a W&B transaction log (.wandb): LevelDB's log format, 32 KiB blocks, each record a
    protobuf `Record` (wandb.proto.wandb_internal_pb2)."""
    from wandb.proto import wandb_internal_pb2

    block, header = 32768, 7
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B", path
    pos, pending = header, b""
    while pos + header <= len(data):
        if block - pos % block < header:  # (a block's tail too short for a header is padding)
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + header])
        chunk = data[pos + header:pos + header + length]
        pos += header + length
        pending = chunk if kind in (1, 2) else pending + chunk  # full, first | middle, last
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def wandb_log(run_dir, patience_s=30.0):
    """The W&B run written in run_dir: its run record, its config and its history ({step: {key: value}}).

    wandb's service process writes the transaction log; on a loaded machine the run record was once not there yet
    when finish() had returned (CI, 2026-11-24): the log is read again until it holds one, for up to patience_s."""
    paths = glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "run-*.wandb"))
    assert len(paths) == 1, paths
    deadline = time.monotonic() + patience_s
    while True:
        found = _read_log(paths[0])
        if found[0] is not None or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def _read_log(path):
    run, config, history = None, {}, {}
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
            config.update({item.key: json.loads(item.value_json) for item in run.config.update})
        elif kind == "config":
            config.update({item.key: json.loads(item.value_json) for item in record.config.update})
        elif kind == "history":
            items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            history[record.history.step.num] = items
    return run, config, history


def wandb_summary(run_dir):
    """The W&B run's summary (its last value of each key, and what was set on it) from its transaction log."""
    [path] = glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "run-*.wandb"))
    summary = {}
    for record in records(path):
        if record.WhichOneof("record_type") == "summary":
            summary.update({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                            for item in record.summary.update})
    return summary


def read_rows(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def tensorboard(run_dir):
    """{step: {tag: value}} of the run's TensorBoard scalars."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(os.path.join(run_dir, "tb"))
    events.Reload()
    steps = {}
    for tag in events.Tags()["scalars"]:
        for event in events.Scalars(tag):
            steps.setdefault(event.step, {})[tag] = event.value
    return steps


def test_a_run_logs_tensorboards_scalars_at_env_steps_and_its_resume_continues_the_w_and_b_run(offline):
    runs = offline / "runs"
    first = train_in_process(runs, *SMALL, "max_iterations=2", "experiment=wb", "wandb_activate=true",
                             "wandb_tags=[cartpole,smoke]", "wandb_group=trial")
    rows = read_rows(first.run_dir)
    run, config, history = wandb_log(first.run_dir)

    # the W&B run: the keys it was given, its id kept in the run folder
    with open(os.path.join(first.run_dir, "wandb_run_id")) as f:
        run_id = f.read().strip()
    assert run.run_id == run_id and run.project == "isaac-ppo" and run.run_group == "trial"
    assert run.display_name == "wb/000" and list(run.tags) == ["cartpole", "smoke"]
    assert config["wandb_activate"] is True and config["task"]["name"] == "Cartpole"
    assert config["max_iterations"] == 2 and config["agent"]["minibatch_size"] == 256

    # one W&B step per row, at its env steps, with TensorBoard's tags and values
    assert sorted(history) == [row["env_steps"] for row in rows] == [1024, 2048]
    last, row = history[2048], rows[-1]
    assert last["train/return_window"] == row["window_mean_return"]
    assert last["loss/actor"] == row["actor_loss"] and last["policy/lr"] == row["lr"]
    assert last["plan/num_envs"] == 64 and last["eval/return_mean"] == row["eval"]["return_mean"]
    board = tensorboard(first.run_dir)
    for step, logged in history.items():
        values = {k: v for k, v in logged.items() if k not in W_AND_B_OWN}
        assert set(values) == set(board[step]), set(values) ^ set(board[step])
        for tag, value in values.items():  # (TensorBoard stores float32)
            assert value == pytest.approx(board[step][tag], rel=1e-6, abs=1e-6), tag

    with open(os.path.join(first.run_dir, "metrics.json")) as f:
        final_eval = json.load(f)["final_eval"]
    assert wandb_summary(first.run_dir)["final_eval/return_mean"] == final_eval["return_mean"]

    # resumed into a new folder (resume=auto): the same W&B run, from the next row on
    second = train_in_process(runs, *SMALL, "max_iterations=3", "experiment=wb", "wandb_activate=true",
                              "wandb_tags=[cartpole,smoke]", "wandb_group=trial", "resume=auto")
    assert second.run_dir != first.run_dir and "resuming from" in second.stdout
    resumed, config, history = wandb_log(second.run_dir)
    assert resumed.run_id == run_id and config["max_iterations"] == 3
    with open(os.path.join(second.run_dir, "wandb_run_id")) as f:
        assert f.read().strip() == run_id  # (a resume of the resumed run continues it too)
    assert sorted(history) == [read_rows(second.run_dir)[-1]["env_steps"]] == [3072]
    assert history[3072]["loss/actor"] == read_rows(second.run_dir)[-1]["actor_loss"]


def test_the_jobs_of_a_sweep_share_a_group_named_for_the_sweep_folder(offline):
    runs = offline / "runs"
    env = dict(os.environ)
    result = subprocess.run([TRAIN, "-m", *SMALL, "max_iterations=1", "eval.final=false", "wandb_activate=true",
                             f"runs_dir={runs}", "seed=1,2"], capture_output=True, text=True, timeout=300,
                            cwd=offline, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [sweep] = glob.glob(str(runs / "multirun" / "*"))
    jobs = sorted(glob.glob(os.path.join(sweep, "[0-9]*")))
    assert len(jobs) == 2, jobs
    logged = [wandb_log(job)[0] for job in jobs]
    assert [run.run_group for run in logged] == [os.path.basename(sweep)] * 2
    assert logged[0].run_id != logged[1].run_id
    assert [run.display_name for run in logged] == ["Cartpole/0", "Cartpole/1"]


def test_play_uploads_its_numbers_and_video(offline):
    """log_play (play mode's W&B run): the numbers played in its summary, the mp4 as a W&B video."""
    import imageio
    import numpy as np

    from isaac_ppo.io import wandb_sink
    from isaac_ppo.config.compose import compose_config

    cfg = compose_config([f"runs_dir={offline / 'runs'}", "task=Cartpole", "wandb_activate=true"])
    run_dir = offline / "play"
    run_dir.mkdir()
    video = str(run_dir / "play.mp4")
    imageio.mimwrite(video, np.zeros((8, 64, 64, 3), dtype=np.uint8), fps=10)
    wandb_sink.log_play(cfg, str(run_dir), {"return_mean": 12.5, "episodes": 3, "video": video, "frames": 8})
    assert not wandb_sink.log_video(video, 0)  # (the play run is finished: nothing open to log to)

    run, _, history = wandb_log(str(run_dir))
    assert run.job_type == "play" and wandb_summary(str(run_dir))["play/return_mean"] == 12.5
    [logged] = history.values()
    assert logged["play/video/_type"] == "video-file" and logged["play/video/path"].endswith(".mp4")
    [uploaded] = glob.glob(os.path.join(str(run_dir), "wandb", "offline-run-*", "files", "media", "videos", "**",
                                        "*.mp4"), recursive=True)
    with open(uploaded, "rb") as a, open(video, "rb") as b:
        assert a.read() == b.read()
    assert not os.path.exists(run_dir / "wandb_run_id")  # (play never continues a training's W&B run)


def test_wandb_activate_without_wandb_is_one_line_naming_the_extra(tmp_path):
    shim = tmp_path / "shim" / "wandb"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'wandb'\", name='wandb')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "shim"))
    result = subprocess.run([TRAIN, *SMALL, "max_iterations=1", "wandb_activate=true", f"runs_dir={tmp_path / 'runs'}"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [MISSING], result.stderr
    assert not glob.glob(str(tmp_path / "runs" / "*" / "*")), "a refused run leaves no run folder"
