"""isaac-ppo-train end to end: the real console script, Hydra composition, MuJoCo, TensorBoard files. A run that
only prepares what the command under test reads (a reference, a checkpoint to play) trains in this process."""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from helpers import one_line_error, require_system, train_in_process

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
    result = train(tmp_path, *SMALL, "max_iterations=4", "save_interval_iterations=2", "experiment=out")
    assert result.returncode == 0, result.stderr
    (run_dir,) = run_dirs(tmp_path, "out")
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    assert [r["iteration"] for r in rows] == [0, 1, 2, 3]
    for key in ("env_steps", "wall_s", "num_envs", "rollout_length", "window_mean_return", "window_mean_length",
                "batch_mean_return", "batch_mean_length", "window_episodes", "episodes", "actor_loss",
                "critic_loss", "kl", "clip_fraction", "lr", "entropy", "fps", "fps_collect", "fps_update"):
        assert key in rows[-1], key
    assert rows[-1]["env_steps"] == 4 * 64 * 16 and rows[-1]["num_envs"] == 64
    assert "| train return " in result.stdout and "lagged); results in" in result.stdout
    summary = json.load(open(os.path.join(run_dir, "metrics.json")))
    assert summary["iterations"] == 4 and summary["mean_fps"] > 0
    assert os.path.isfile(os.path.join(run_dir, "config.yaml"))
    names = sorted(os.listdir(os.path.join(run_dir, "checkpoints")))
    assert names == ["best.pt", "iter_000002.pt", "iter_000004.pt", "last.pt"]

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(os.path.join(run_dir, "tb"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for tag in ("loss/actor", "loss/critic", "policy/kl", "policy/lr", "fps/collect", "fps/update", "fps/total",
                "train/return_window", "train/length_window", "train/episodes", "episode/rew_alive",
                "episode/rew_pole_angle", "episode/rew_death"):
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
    (pre_dir,) = run_dirs(tmp_path, "pre")
    assert "stopped by SIGTERM" in out and f"isaac-ppo-train resume={pre_dir}" in out and "done" not in out
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


def test_a_stopped_run_is_told_exactly_what_to_type(tmp_path):
    """`isaac-ppo-train resume=RUN_DIR` (issue 89: resume=auto alone composed the default task, and found nothing):
    wherever the run's folder is, pinned or not; a multi-GPU run's is its torchrun command; a folder without Hydra's
    record of the command line is told the same command with resume=<its last.pt>."""
    from isaac_ppo.config.compose import compose_config
    from isaac_ppo.loop.resume import how_to_continue as _how_to_continue

    cfg = compose_config([*SMALL, f"runs_dir={tmp_path / 'runs'}", "experiment=e"])
    last = "x/checkpoints/last.pt"
    for run_dir in (tmp_path / "runs" / "e" / "2026-11-24_10-00-00", tmp_path / "elsewhere"):
        (run_dir / ".hydra").mkdir(parents=True)
        (run_dir / ".hydra" / "overrides.yaml").write_text("- task=Cartpole\n")
        assert _how_to_continue(cfg, str(run_dir), last) == f"`isaac-ppo-train resume={run_dir}`"
    multi = compose_config([*SMALL, f"runs_dir={tmp_path / 'runs'}", "multi_gpu=true"])
    assert "torchrun" in _how_to_continue(multi, str(tmp_path / "elsewhere"), last)
    assert _how_to_continue(cfg, str(tmp_path / "bare"), last) == f"the same command and resume={last}"


@pytest.mark.slow
def test_resume_run_dir_continues_a_run_in_place_from_its_folder_alone(tmp_path):
    """The run's own command line comes from its folder: another working directory, no task= or profile= typed."""
    done = train(tmp_path, *SMALL, "max_iterations=2", "agent.network.hidden=[16]", "experiment=r")
    assert done.returncode == 0, done.stderr
    (run_dir,) = run_dirs(tmp_path, "r")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    resumed = subprocess.run([SCRIPT, f"resume={run_dir}", "max_iterations=3"], capture_output=True, text=True,
                             timeout=300, cwd=elsewhere)
    assert resumed.returncode == 0, resumed.stderr
    assert run_dirs(tmp_path, "r") == [run_dir] and not list(elsewhere.iterdir())  # (in place: no new folder)
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    assert [row["iteration"] for row in rows] == [0, 1, 2]
    one_line_error(train(tmp_path, f"resume={elsewhere}"), "no checkpoints/last.pt in that folder")


@pytest.mark.slow
def test_play_mode_reports_mean_return_and_length(tmp_path):
    train_in_process(tmp_path / "runs", *SMALL, "max_iterations=2", "experiment=p")
    (run_dir,) = run_dirs(tmp_path, "p")
    # (play's envs: num_envs when given, as IsaacGymEnvs plays, else play_episodes)
    result = train(tmp_path, *[o for o in SMALL if not o.startswith("num_envs=")], "test=true", "play_episodes=5",
                   f"checkpoint={os.path.join(run_dir, 'checkpoints', 'last.pt')}")
    assert result.returncode == 0, result.stderr
    assert "5 episodes (one per env, from reset): mean return" in result.stdout, result.stdout
    assert "IQM" in result.stdout and "95% CI" in result.stdout and "mean length" in result.stdout


@pytest.mark.slow
def test_play_mode_reports_the_tasks_measures_beside_the_return(tmp_path):
    """A task's measures (BallBalance's ball distance and speed; ShadowHand's successes) are what its play shows
    beyond the return: the line carries each one's mean over the episodes played."""
    ball = ["task=BallBalance", "sim=mujoco", "num_envs=16", "agent.minibatch_size=64", "diagnostics.plot=false"]
    train_in_process(tmp_path / "runs", *ball, "max_iterations=1", "experiment=m")
    (run_dir,) = run_dirs(tmp_path, "m")
    result = train(tmp_path, *[o for o in ball if not o.startswith("num_envs=")], "test=true", "play_episodes=2",
                   f"checkpoint={os.path.join(run_dir, 'checkpoints', 'last.pt')}")
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if "episodes (one per env, from reset)" in x]
    shown = re.search(r"\), ball_distance_m ([0-9.e+-]+), ball_speed_mps ([0-9.e+-]+), mean length", line)
    assert shown, line
    assert 0 < float(shown.group(1)) < 2 and float(shown.group(2)) >= 0, line  # (a ball on a 0.5 m tray, m)


@pytest.mark.slow
def test_play_mode_records_a_video_of_env_0(tmp_path):
    import imageio

    from isaac_ppo.io.video import gl_backend, offscreen_gl_problem

    require_system(offscreen_gl_problem(gl_backend("cpu")))

    train_in_process(tmp_path / "runs", *SMALL, "max_iterations=1", "experiment=v")
    (run_dir,) = run_dirs(tmp_path, "v")
    result = train(tmp_path, *[o for o in SMALL if not o.startswith("num_envs=")], "test=true", "play_episodes=2",
                   "capture_video=true", "experiment=v",
                   f"checkpoint={os.path.join(run_dir, 'checkpoints', 'last.pt')}")
    assert result.returncode == 0, result.stderr
    (video,) = glob.glob(str(tmp_path / "runs" / "v" / "*" / "play.mp4"))
    frames = imageio.mimread(video)
    assert len(frames) >= 2 and frames[0].shape == (480, 640, 3)
    assert f"frames): {video}" in result.stdout
    assert "[INFO]" not in result.stdout + result.stderr  # (OpenGL announced its missing accelerate module)


@pytest.mark.parametrize(
    "overrides,fragments",
    [
        (["colour=red"], ["unknown config key 'colour'"]),
        (["agent.learning_rat=1e-3"], ["agent.learning_rat"]),
        (["max_iterations=many"], ["max_iterations"]),
        (["agent.horizon=2.5"], ["agent.horizon"]),
        (["sim=bullet"], ["sim='bullet'", "auto, mujoco, mjwarp, isaacgym"]),
        (["task=Walker"], ["Walker"]),
        (["task=Cartpole", "agent.minibatch_size=1000"], ["agent.minibatch_size=1000", "8,192"]),
        (["num_envs=0"], ["num_envs"]),
    ],
)
def test_bad_config_is_one_line_and_no_run_directory(tmp_path, overrides, fragments):
    one_line_error(train(tmp_path, *overrides), *fragments)
    assert not os.path.exists(tmp_path / "runs")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU: device=cuda is no mistake here")
def test_device_cuda_without_a_gpu_names_the_device_not_a_backend(tmp_path):
    """device=cuda on a CPU machine (issue 89): with sim=auto MuJoCo Warp was picked and its message blamed MuJoCo
    Warp, which the user never chose; now one line names the device, and no run folder is left."""
    for sim in ("auto", "mujoco"):
        one_line_error(train(tmp_path, "task=Cartpole", "device=cuda", f"sim={sim}"),
                       "device=cuda: this machine has no CUDA GPU", "drop device=")
        assert not list((tmp_path / "runs").rglob("config.yaml"))


@pytest.mark.parametrize("flags", [["-m", "--cfg", "job"], ["--multirun", "-c", "job"], ["--cfg", "job", "--info"]])
def test_two_of_hydras_modes_are_one_line_naming_both(tmp_path, flags):
    """`-m task=Ant seed=0,1 --cfg job` (issue 92): Hydra itself answers with a ValueError's traceback."""
    done = train(tmp_path, "task=Ant", "seed=0,1", *flags)
    long_names = {"-m": "--multirun", "-c": "--cfg", "-i": "--info"}
    named = [long_names.get(f, f) for f in flags if f.startswith("-")]
    one_line_error(done, f"{named[0]} and {named[1]} cannot be combined", "keep one")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "multirun").exists()


def test_a_refused_config_is_refused_before_torch_is_imported(tmp_path):
    """A typo costs its user a fraction of a second, not torch's import (~1.5 s of the 2 s it once took): the
    checks before Hydra runs import nothing that imports torch."""
    probe = ("import sys\nfrom isaac_ppo.train import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as stop:\n"
             "    print(stop.code, 'torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe, "task=Cartpole", "agent.learning_rate=nan",
                           f"runs_dir={tmp_path / 'runs'}"], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)  # (not the checkout: `python -c` puts the folder it runs in on sys.path)
    assert done.stdout.split() == ["2", "False"], (done.stdout, done.stderr)
    assert "agent.learning_rate=nan" in done.stderr and not (tmp_path / "runs").exists()
    # nor does checking a valid config whose task node is its shipped YAML (a study's or a sweep's parent process);
    # a changed task key loads the task's spec, whose module imports torch
    for words, loaded in (([], False), (["task.env.episodeLength=300"], True)):
        probe = ("import sys\nfrom isaac_ppo.config.compose import compose_config\n"
                 f"compose_config(['task=Ant', *{words!r}])\nprint('torch' in sys.modules)\n")
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert done.stdout.split() == [str(loaded)], (done.stdout, done.stderr)


@pytest.mark.slow
def test_a_single_run_composes_its_config_once_and_hydra_records_it_as_before(tmp_path):
    """The launch's own check and Hydra's run share one composition, and Hydra's question of the mode is not asked
    (config/compose.py composed_once: three compositions were ~0.7 s of every launch on 2 cores). What Hydra records
    is what it recorded before: the job named for the script (its log: train.log) and hydra.mode RUN; Hydra's
    methods are its own again after the launch."""
    probe = ("import sys\nfrom hydra._internal.config_loader_impl import ConfigLoaderImpl as Loader\n"
             "from hydra._internal.hydra import Hydra\nimpl, asked, seen = Loader._load_configuration_impl, "
             "Hydra.get_mode, []\n"
             "def counted(*args, **kwargs):\n    seen.append(1)\n    return impl(*args, **kwargs)\n"
             "Loader._load_configuration_impl = counted\nfrom isaac_ppo.train import main\ntry:\n"
             "    main(sys.argv[1:])\nfinally:\n    print('compositions', len(seen), Hydra.get_mode is asked)\n")
    run_dir = tmp_path / "pinned"
    done = subprocess.run([sys.executable, "-c", probe, *SMALL, "max_iterations=1", "eval.final=false",
                           "diagnostics=off", f"hydra.run.dir={run_dir}"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "compositions 1 True", done.stdout
    recorded = (run_dir / ".hydra" / "hydra.yaml").read_text()
    assert "  mode: RUN\n" in recorded and "    name: train\n" in recorded and (run_dir / "train.log").is_file()


@pytest.mark.slow
def test_missing_and_corrupt_checkpoints_are_one_line(tmp_path):
    one_line_error(train(tmp_path, *SMALL, "test=true", "checkpoint=/nonexistent/last.pt"),
                   "checkpoint not found: /nonexistent/last.pt")
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"not a checkpoint at all")
    one_line_error(train(tmp_path, *SMALL, f"resume={corrupt}"), str(corrupt), "cannot be read")
    one_line_error(train(tmp_path, *SMALL, "resume=auto", "experiment=never"), "resume=auto found no")


@pytest.mark.slow
def test_test_true_with_a_checkpoint_alone_plays_it_with_its_runs_task_and_network(tmp_path):
    """`isaac-ppo-train test=true checkpoint=PATH` (issue 89): the run's task, agent values and network come from its
    config.yaml, or from the checkpoint itself when it travels alone; nothing has to be repeated."""
    done = train_in_process(tmp_path / "made", *SMALL, "max_iterations=1", "agent.network.hidden=[16]")
    checkpoint = os.path.join(done.run_dir, "checkpoints", "last.pt")
    alone = tmp_path / "alone.pt"
    shutil.copy(checkpoint, alone)
    for path in (checkpoint, str(alone)):
        played = train(tmp_path, "test=true", f"checkpoint={path}", "play_episodes=2", "num_envs=2")
        assert played.returncode == 0, played.stderr
        assert "its run's task=Cartpole agent=CartpolePPO agent.network.hidden=[16]" in played.stdout
        assert "2 episodes (one per env, from reset)" in played.stdout


@pytest.mark.slow
def test_playing_a_checkpoint_of_another_network_leaves_no_folder_not_even_the_runs_dir(tmp_path):
    """Refused after Hydra made the run directory (the checkpoint is read then): the run directory goes, and so do
    the folders above it that this run made (runs_dir and its experiment's), while a folder that was there stays."""
    done = train_in_process(tmp_path / "made", *SMALL, "max_iterations=1", "agent.network.hidden=[16]")
    checkpoint = os.path.join(done.run_dir, "checkpoints", "last.pt")
    one_line_error(train(tmp_path, *SMALL, "test=true", f"checkpoint={checkpoint}"), "holds another network")
    assert not (tmp_path / "runs").exists()
    (tmp_path / "runs" / "Cartpole").mkdir(parents=True)  # the user's, already there
    one_line_error(train(tmp_path, *SMALL, "test=true", f"checkpoint={checkpoint}"), "holds another network")
    assert os.listdir(tmp_path / "runs" / "Cartpole") == []


@pytest.mark.slow
def test_isaacgym_without_isaacgym_is_one_line(tmp_path):
    one_line_error(train(tmp_path, "task=Ant", "sim=isaacgym"), "Isaac Gym", "docker")


@pytest.mark.slow
def test_non_finite_reward_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    good_dir = train_in_process(tmp_path / "runs", *SMALL, "max_iterations=2", "experiment=good").run_dir
    checkpoint = os.path.join(good_dir, "checkpoints", "last.pt")
    digest = hashlib.sha256(open(checkpoint, "rb").read()).hexdigest()
    # (inf itself is refused by the config now: 1e39 is a finite number that overflows the float32 rewards)
    result = train(tmp_path, *SMALL, "max_iterations=4", "experiment=good", f"resume={checkpoint}",
                   "agent.reward_scale=1e39")
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


@pytest.mark.slow
def test_exploding_physics_is_one_line_and_mujoco_warnings_go_to_the_log(tmp_path):
    """MuJoCo prints a warning line per diverged simulation (thousands an iteration): they go to the run's
    train.log, not to the console or a MUJOCO_LOG.TXT in the working directory; the stop is one line, exit 2."""
    result = train(tmp_path, *SMALL, "max_iterations=3", "task.env.maxEffort=1e9", "experiment=boom")
    one_line_error(result, "diverged in", "task.env.maxEffort")
    assert "unstable" not in result.stdout and "unstable" not in result.stderr
    assert not os.path.exists(tmp_path / "MUJOCO_LOG.TXT")
    (run_dir,) = run_dirs(tmp_path, "boom")
    log = open(os.path.join(run_dir, "train.log")).read()
    assert "The simulation is unstable" in log


def _file_size_limit(limit):
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


@pytest.mark.slow
def test_a_file_size_limit_is_one_line_and_keeps_every_file_written(tmp_path):
    """`ulimit -f` below a checkpoint's size (87 kB here): the first numbered save fails; the run ends with exit 1
    and one line naming the file and the cause; the rows written stay whole and no .tmp is left."""
    result = subprocess.run(
        [SCRIPT, f"runs_dir={tmp_path / 'runs'}", *SMALL, "max_iterations=6", "save_interval_iterations=3", "experiment=big"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, preexec_fn=_file_size_limit(40_000))
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "cannot write" in lines[0] and "iter_000003.pt: File too large" in lines[0], lines[0]
    assert "last.pt could not be saved either" in lines[0]
    (run_dir,) = run_dirs(tmp_path, "big")
    assert not glob.glob(os.path.join(run_dir, "**", "*.tmp"), recursive=True)
    assert [json.loads(line)["iteration"] for line in open(os.path.join(run_dir, "metrics.jsonl"))] == [0, 1, 2]
    for name in os.listdir(os.path.join(run_dir, "checkpoints")):  # (none may be there: best.pt comes from evals)
        assert "model" in torch.load(os.path.join(run_dir, "checkpoints", name), weights_only=False)


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_resume_auto_continues_after_space_is_freed(tmp_path):
    """A real full disk (a 700 kB tmpfs; needs root, as on this project's machines): every save_interval_iterations=1 save
    takes 87 kB, so a few iterations in a write fails with 'No space left on device'. Nothing is lost: the
    rows on disk are whole, every checkpoint loads, and once space is freed resume=auto finishes the run with
    every iteration logged once across the two folders."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=700k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()}): the file size limit test stands in")
    try:
        job = [SCRIPT, f"runs_dir={disk / 'runs'}", *SMALL, "max_iterations=12", "experiment=full"]
        result = subprocess.run([*job, "save_interval_iterations=1"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert result.returncode == 1, (result.stdout, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "No space left on device" in lines[0] and "Traceback" not in result.stderr, lines
        (first,) = glob.glob(str(disk / "runs" / "full" / "*"))
        assert not glob.glob(os.path.join(first, "**", "*.tmp"), recursive=True)
        logged = [json.loads(line)["iteration"] for line in open(os.path.join(first, "metrics.jsonl"))]
        assert logged == list(range(len(logged))) and 0 < len(logged) < 12
        for name in os.listdir(os.path.join(first, "checkpoints")):
            torch.load(os.path.join(first, "checkpoints", name), weights_only=False)  # every file loads
        saved = torch.load(os.path.join(first, "checkpoints", "last.pt"), weights_only=False)["counters"]["iteration"]
        for numbered in glob.glob(os.path.join(first, "checkpoints", "iter_*.pt")):
            os.remove(numbered)  # the user frees space
        resumed = subprocess.run([*job, "resume=auto", "save_interval_iterations=100"], capture_output=True, text=True,
                                 timeout=300, cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        (second,) = [d for d in glob.glob(str(disk / "runs" / "full" / "*")) if d != first]
        continued = [json.loads(line)["iteration"] for line in open(os.path.join(second, "metrics.jsonl"))]
        assert continued == list(range(saved, 12)) and logged[:saved] == list(range(saved))
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


@pytest.mark.slow
def test_a_pinned_directory_of_another_run_keeps_its_record(tmp_path):
    """Starting seed 99 in seed 42's pinned hydra.run.dir is refused before Hydra writes its .hydra/ record
    there: config.yaml and .hydra/overrides.yaml still say seed 42. The same finished command again (a requeue
    after the end) has nothing to do: exit 0, its files untouched."""
    pinned = tmp_path / "pinned"
    assert train(tmp_path, *SMALL, "max_iterations=1", "seed=42", f"hydra.run.dir={pinned}").returncode == 0
    before = {name: (pinned / name).read_bytes() for name in ("config.yaml", ".hydra/overrides.yaml",
                                                               ".hydra/config.yaml", "metrics.json",
                                                               "metrics.jsonl", "checkpoints/last.pt")}
    again = train(tmp_path, *SMALL, "max_iterations=1", "seed=42", f"hydra.run.dir={pinned}")
    assert again.returncode == 0 and "is of a finished run (1 iterations" in again.stdout, again.stderr
    assert "nothing to do" in again.stdout
    assert {name: (pinned / name).read_bytes() for name in before} == before
    one_line_error(train(tmp_path, *SMALL, "max_iterations=1", "seed=99", f"hydra.run.dir={pinned}"),
                   "holds another run (seed=42 there, 99 here)")
    assert {name: (pinned / name).read_bytes() for name in before} == before


@pytest.mark.slow
def test_a_refusal_after_the_run_directory_is_made_leaves_no_folder(tmp_path):
    """resume=auto of a finished run is refused (its budget is used up) and its would-be folder is removed."""
    train_in_process(tmp_path / "runs", *SMALL, "max_iterations=2", "experiment=done")
    one_line_error(train(tmp_path, *SMALL, "max_iterations=2", "experiment=done", "resume=auto"),
                   "is of a finished run (2 iterations, 2,048 env steps)")
    assert len(run_dirs(tmp_path, "done")) == 1


def test_help_and_version_are_ours(tmp_path):
    shown = subprocess.run([SCRIPT, "--help"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: isaac-ppo-train")
    for words in ("task=Ant", "resume=auto", "test=true checkpoint=PATH", "metrics.json", "--cfg job", "-m"):
        assert words in shown.stdout, words
    assert "powered by Hydra" not in shown.stdout
    version = subprocess.run([SCRIPT, "--version"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    from isaac_ppo import __version__

    assert version.returncode == 0 and version.stdout.startswith(f"isaac-ppo {__version__} (python ")
    assert "torch " in version.stdout and "mujoco " in version.stdout
    report = subprocess.run([os.path.join(os.path.dirname(SCRIPT), "isaac-ppo-report"), "--help"],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert report.returncode == 0 and "95%" in report.stdout and "%%" not in report.stdout



@pytest.mark.slow
def test_videos_while_training_land_in_the_run_folder_and_tensorboard(tmp_path):
    import imageio
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from isaac_ppo.io.video import gl_backend, offscreen_gl_problem

    require_system(offscreen_gl_problem(gl_backend("cpu")))
    result = train(tmp_path, *SMALL, "max_iterations=4", "capture_video=True", "capture_video_interval_iterations=2",
                   "capture_video_len=12", "diagnostics=off", "eval.final=false", "experiment=films")
    assert result.returncode == 0, result.stderr
    (run_dir,) = run_dirs(tmp_path, "films")
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    assert [r.get("video") for r in rows] == [None, "videos/iter_000002.mp4", None, "videos/iter_000004.mp4"]
    for name in ("iter_000002.mp4", "iter_000004.mp4"):
        frames = imageio.mimread(os.path.join(run_dir, "videos", name))
        assert len(frames) == 12 and frames[0].shape == (240, 320, 3)
    events = EventAccumulator(os.path.join(run_dir, "tb"), size_guidance={"images": 0})
    events.Reload()
    shown = events.Images("video/env0")
    assert [s.step for s in shown] == [rows[1]["env_steps"], rows[3]["env_steps"]]
    assert all(s.encoded_image_string[:6] == b"GIF89a" and (s.width, s.height) == (160, 120) for s in shown)
