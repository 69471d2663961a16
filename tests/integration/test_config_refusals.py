"""Values that parse but mean nothing are refused at the boundary, in one line naming the key (the composed
config through isaac_ppo.config.load, as isaac-ppo-train does before a run directory exists)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from isaac_ppo.errors import UserError
from isaac_ppo.config.compose import compose_config

BASE = ["task=Cartpole", "sim=mujoco"]


@pytest.mark.parametrize("override,message", [
    ("agent.network.hidden=[]", "agent.network.hidden=[] must list at least one layer"),
    ("agent.network.hidden=[64,0]", "agent.network.hidden=[64, 0] must list at least one layer"),
    ("agent.learning_rate=-1", "agent.learning_rate=-1.0 is outside its domain: a number in (0, inf)"),
    ("agent.learning_rate=0", "agent.learning_rate=0.0 is outside its domain: a number in (0, inf)"),
    ("agent.gamma=1.5", "agent.gamma=1.5 is outside its domain: a number in (0, 1]"),
    ("agent.lam=-0.1", "agent.lam=-0.1 is outside its domain: a number in [0, 1]"),
    ("agent.clip=0", "agent.clip=0.0 is outside its domain: a number in (0, inf)"),
    ("agent.entropy_coef=-1", "agent.entropy_coef=-1.0 is outside its domain: a number in [0, inf)"),
    ("+unknown_key=1",
     "unknown config key 'unknown_key': nothing reads it; `isaac-ppo-train --cfg job` lists the keys"),
    # a newcomer's typos (issue 89): the key meant, and a + key that nothing would read refused, not carried
    ("num_env=64", "unknown config key 'num_env' (did you mean num_envs?)"),
    ("+num_env=64", "unknown config key 'num_env' (did you mean num_envs?): nothing reads it"),
    ("task.env.episodeLenght=100",
     "unknown config key 'task.env.episodeLenght' (did you mean task.env.episodeLength?)"),
    ("+task.env.episodeLenght=100",
     "task.env.episodeLenght=100: task Cartpole has no such parameter (did you mean task.env.episodeLength?)"),
    ("+agent.gama=0.9", "unknown config key 'agent.gama' (did you mean agent.gamma?): nothing reads it"),
    ("task=ant", "task=ant does not exist: did you mean task=Ant? (task options: AllegroHand, Ant, Anymal, AnymalTerrain, BallBalance, Cartpole, FrankaCabinet, FrankaCubeStack, Humanoid, Ingenuity, Quadcopter, ShadowHand, ShadowHandOpenAI_FF, ShadowHandOpenAI_LSTM)"),
])
def test_meaningless_values_are_refused_naming_the_key(override, message):
    with pytest.raises(UserError) as error:
        compose_config([*BASE, override])
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("overrides,message", [
    (["agent.stale_correction=vtrace", "agent.stale_update=delayed"],
     "agent.stale_correction=vtrace and agent.stale_update=delayed both answer the one-update lag"),
    (["agent.stale_correction=vtrace", "agent.network.rnn.name=lstm", "agent.network.rnn.units=8"],
     "agent.stale_correction=vtrace is for feed-forward networks"),
    (["agent.stale_clip=behaviour", "agent.stale_weight=truncated"],
     "agent.stale_weight=truncated weights the proximal clip's surrogate, and agent.stale_clip=behaviour has none"),
])
def test_the_stale_batch_updates_that_do_not_combine_are_refused(overrides, message):
    with pytest.raises(UserError) as error:
        compose_config([*BASE, *overrides])
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_runs_dir_that_cannot_be_made_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "a_file").write_text("not a folder")
    with pytest.raises(UserError, match=r"runs_dir=\S+a_file/runs cannot be made: \S+a_file is not a folder"):
        compose_config([*BASE, f"runs_dir={tmp_path / 'a_file' / 'runs'}"])
    with pytest.raises(UserError, match=r"max_diverged_fraction=1.5 is outside its domain: a number in \[0, 1\]"):
        compose_config([*BASE, "max_diverged_fraction=1.5"])
    disk = tmp_path / "full_disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode == 0:  # (needs root, as on this project's machines: a real full disk)
        try:
            subprocess.run(["dd", "if=/dev/zero", f"of={disk / 'filler'}", "bs=1k", "count=100"], capture_output=True)
            with pytest.raises(UserError, match=r"runs_dir=\S+: no space left on its device \(0 bytes free"):
                compose_config([*BASE, f"runs_dir={disk / 'runs'}"])
        finally:
            subprocess.run(["umount", str(disk)], capture_output=True)
    compose_config([*BASE, f"runs_dir={tmp_path / 'new' / 'deeper'}"])  # made when the run starts
    assert not (tmp_path / "new").exists()


def test_the_edges_that_mean_something_are_accepted():
    compose_config([*BASE, "agent.gamma=1.0", "agent.lam=0", "agent.entropy_coef=0", "agent.network.hidden=[1]"])


def test_a_misspelt_task_on_the_command_line_is_one_line_and_exit_2(tmp_path):
    script = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-train")
    result = subprocess.run([script, "task=humanoid", f"runs_dir={tmp_path / 'runs'}"], capture_output=True,
                            text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "isaac-ppo-train: task=humanoid does not exist: did you mean task=Humanoid? "
        "(task options: AllegroHand, Ant, Anymal, AnymalTerrain, BallBalance, Cartpole, FrankaCabinet, FrankaCubeStack, Humanoid, Ingenuity, Quadcopter, ShadowHand, ShadowHandOpenAI_FF, ShadowHandOpenAI_LSTM)"]
    assert not (tmp_path / "runs").exists()


def test_run_directories_are_claimed_never_shared(tmp_path, monkeypatch):
    """Two runs resolving the same directory name (started in the same second) get two directories."""
    from isaac_ppo.config import compose

    base = str(tmp_path / "runs" / "Ant" / "2026-01-01_00-00-00")
    monkeypatch.setattr(compose, "_claimed", {})
    first = compose._fresh_run_dir(base)
    assert compose._fresh_run_dir(base) == first == base  # the same process: the same directory
    monkeypatch.setattr(compose, "_claimed", {})  # another process
    assert compose._fresh_run_dir(base) == base + "-2" and os.path.isdir(base + "-2")


def test_a_probe_set_that_cannot_serve_or_is_asked_of_training_is_refused_at_the_boundary(tmp_path):
    import torch

    from isaac_ppo.diagnostics import probe_set

    small = str(tmp_path / "small.pt")
    probe_set.save(small, torch.zeros(10, 4), "Cartpole", "a.pt")
    for override, message in (
            (f"diagnostics.probe_set={tmp_path / 'none.pt'}", "none.pt: no such file (make one with test=true"),
            (f"diagnostics.probe_set={small}",
             "holds 10 observations, fewer than the widest hidden layer (32 units): feature rank needs as many"),
            (f"save_probe_set={small}", f"save_probe_set={small} is play's: add test=true checkpoint=PATH")):
        with pytest.raises(UserError) as error:
            compose_config([*BASE, override])
        assert message in str(error.value) and "\n" not in str(error.value), str(error.value)
    compose_config([*BASE, f"diagnostics.probe_set={small}", "diagnostics=off"])  # nothing measured: not read


def test_videos_while_training_with_rl_games_or_without_a_length_are_refused():
    from isaac_ppo.io.video import gl_backend, offscreen_gl_problem

    if offscreen_gl_problem(gl_backend("cpu")):
        pytest.skip("no offscreen OpenGL here: capture_video=true is refused for that first")
    for override, message in (("agent.backend=rl_games", "capture_video=true while training films our learner's"),
                              ("capture_video_len=0", "capture_video_len=0 is outside its domain: an integer in [1, inf)"),
                              ("capture_video_interval_iterations=-1", "capture_video_interval_iterations=-1 is outside its domain: an integer in [0, inf)")):
        with pytest.raises(UserError) as error:
            compose_config([*BASE, "capture_video=true", override])
        assert message in str(error.value), str(error.value)


@pytest.mark.parametrize("overrides,message", [
    (["task=Ant", "num_envs=64"], "num_envs=64 x agent.horizon=16 is a batch of 1,024 transitions, smaller than Ant's "
     "minibatch (agent.minibatch_size=32768, sized for its 4,096 envs): add agent.num_mini_batches=2 (Ant's 2 "
     "minibatches an epoch, of 512 transitions here)"),
    (["task=Cartpole", "num_envs=3"], "add agent.num_mini_batches=1 (Cartpole's 1 minibatch an epoch, of 48"),
    (["task=Ant", "num_envs=4000"], "not a multiple of Ant's minibatch (agent.minibatch_size=32768"),
])
def test_a_batch_the_tasks_minibatch_does_not_divide_says_the_override_that_fits(overrides, message):
    """num_envs=64 on a task sized for thousands (issue 89): the batch, the minibatch and the override, in a user's
    words; following it composes and checks."""
    with pytest.raises(UserError) as error:
        compose_config([*overrides, "sim=mujoco"])
    assert message in str(error.value) and "\n" not in str(error.value)
    fix = str(error.value).split(": add ", 1)[1].split(" ", 1)[0]
    compose_config([*overrides, "sim=mujoco", fix])
