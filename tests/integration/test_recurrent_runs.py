"""Recurrent runs end to end (issue 86): exact resume with the in-flight states (sync and concurrent), the probe
reading the recurrent output, export parity over a sequence, IsaacGymEnvs' recurrent configs composed as they
are, and bad input refused in one line before anything is written."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

from helpers import MJWARP_WORKER, one_line_error, require_system
from isaac_ppo.config.compose import compose_config
from isaac_ppo.errors import UserError
from isaac_ppo.io.checkpoint import load
from isaac_ppo.loop.build import build_env_and_scheduler, build_runner

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")  # (torch >= 2.11 deprecates jit; rl-games scripts a helper)
TRAIN = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-train")
EXPORT = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-export")
LSTM = ["agent.network.rnn.name=lstm", "agent.network.rnn.units=16"]
SMALL = ["task=Cartpole", "num_envs=32", "agent.minibatch_size=160", "sim=mujoco", "diagnostics=off",
         "task.env.episodeLength=20", "agent.horizon=10", "agent.seq_length=4", *LSTM]


def _train(run_dir, *overrides, resume_from=None):
    cfg = compose_config([*SMALL, *overrides])
    env, scheduler = build_env_and_scheduler(cfg)
    runner = build_runner(cfg, env, str(run_dir), scheduler)
    if resume_from:
        assert runner.resume(resume_from)
    return runner, runner.run()


def _rows(run_dir):
    strip = {"wall_s", "collect_s", "wait_s", "update_s", "iteration_s", "fps", "fps_collect", "fps_update"}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in strip} for line in f]


@pytest.mark.parametrize("scheduler", ["fixed", "concurrent"])
def test_a_recurrent_run_stopped_and_resumed_is_the_uninterrupted_run(tmp_path, scheduler):
    """4 iterations against 2 then 2 more from last.pt: the same rows and parameters; last.pt holds the envs'
    recurrent states (nonzero: 10-step rollouts of 20-step episodes end mid-episode), and the horizon of 10 is cut
    into chunks of 4, 4 and 2 (the last padded)."""
    common = ["scheduler=" + scheduler, "seed=3"]
    whole, _ = _train(tmp_path / "whole", "max_iterations=4", *common)
    _train(tmp_path / "part", "max_iterations=2", *common)
    saved = load(str(tmp_path / "part" / "checkpoints" / "last.pt"))
    assert saved["hidden"].shape == (32, 2 * 16) and float(saved["hidden"].abs().sum()) > 0
    resumed, summary = _train(tmp_path / "part", "max_iterations=4", *common,
                              resume_from=str(tmp_path / "part" / "checkpoints" / "last.pt"))
    assert summary["iterations"] == 4
    assert _rows(tmp_path / "part") == _rows(tmp_path / "whole")
    for name, value in whole.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name
    assert torch.equal(whole.collector.hidden, resumed.collector.hidden)


def test_the_probe_reads_the_recurrent_output(tmp_path):
    """Feature rank and dormancy of a recurrent network include its LSTM's output (the features its heads read):
    sampled at chunks' first steps, whose states the batch holds."""
    runner, _ = _train(tmp_path, "max_iterations=2", "diagnostics=default", "diagnostics.interval_iterations=1",
                       "diagnostics.samples=64", "diagnostics.plot=false", "agent.network.separate=true")
    rows = runner.history
    diagnostics = rows[-1]["diagnostics"]
    for key in ("feature_rank", "feature_rank_critic", "dormant_fraction", "weight_norm_actor", "ess"):
        assert key in diagnostics, sorted(diagnostics)
    assert 0 < diagnostics["feature_rank"] <= 16  # the LSTM's 16 units are the last layer the actor's head reads


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_an_exported_recurrent_policy_matches_the_checkpoint_over_200_steps(tmp_path, fmt):
    """The file's (obs, hidden) -> (actions, hidden_out) against the checkpoint's model stepped the same way, over a
    200-step sequence with episode ends (the caller zeroes those rows, as the docs say): within 1e-6."""
    from isaac_ppo.agent.acting import Acting
    from isaac_ppo.export import export
    from isaac_ppo.loop.play import load_checkpoint_model

    if fmt == "onnx" and importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("needs onnxruntime: pip install 'isaac-ppo[export]'")
    runner, _ = _train(tmp_path, "max_iterations=2", "agent.network.separate=true")
    path = str(tmp_path / "checkpoints" / "last.pt")
    written = export(path, fmt, str(tmp_path / f"policy.{fmt}"))
    assert int(written["state_size"]) == 2 * 16  # the actor's h and c: the critic's state stays out
    model = load_checkpoint_model(compose_config(SMALL + ["agent.network.separate=true"]), runner.env, path)
    ours = Acting(model)
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(written["out"], providers=["CPUExecutionProvider"])

        def step(obs, hidden):
            return session.run(None, {"obs": obs.numpy(), "hidden": hidden.numpy()})
    else:
        scripted = torch.jit.load(written["out"])

        def step(obs, hidden):
            with torch.no_grad():
                return [t.numpy() for t in scripted(obs, hidden)]
    generator = torch.Generator().manual_seed(0)
    hidden = torch.zeros(5, 32)
    worst = 0.0
    with torch.no_grad():
        for _ in range(200):
            obs = torch.randn(5, 4, generator=generator)
            actions, hidden_out = step(obs, hidden)
            expected = ours(obs).clamp(-1.0, 1.0)
            worst = max(worst, float((torch.from_numpy(actions) - expected).abs().max()))
            ended = torch.rand(5, generator=generator) < 0.05
            ours.episodes_ended(ended)
            hidden = torch.from_numpy(hidden_out) * (~ended).float().unsqueeze(-1)
    assert worst <= 1e-6, worst


@pytest.mark.parametrize("task,agent,extra", [
    ("AnymalTerrain", "AnymalTerrainPPO_LSTM", []),
    ("ShadowHand", "ShadowHandPPOAsymmLSTM", ["asymmetric=true"]),
])
def test_isaacgymenvs_recurrent_configs_compose_as_written(task, agent, extra):
    """train=NAME (IsaacGymEnvs' spelling) reads our copy of its recurrent config: the rnn block's keys as rl-games
    reads them."""
    from isaac_ppo.config.compose import rewrite_argv

    argv, _ = rewrite_argv([f"task={task}", f"train={agent}", *extra])
    cfg = compose_config(argv)
    rnn = cfg.agent.network.rnn
    if agent == "AnymalTerrainPPO_LSTM":
        assert (rnn.name, rnn.units, rnn.before_mlp, rnn.concat_input, rnn.layer_norm) == ("lstm", 256, False, True, False)
        assert list(cfg.agent.network.hidden) == [512] and cfg.agent.network.separate and cfg.agent.horizon == 24
    else:
        assert (rnn.name, rnn.units, rnn.before_mlp, rnn.layer_norm) == ("lstm", 1024, True, True)
        assert list(cfg.agent.network.critic_hidden) == [512] and cfg.agent.gamma == 0.998
    assert cfg.agent.seq_length == 4 and cfg.agent.zero_rnn_on_done


@pytest.mark.parametrize("sim", ["mujoco", pytest.param("mjwarp", marks=[MJWARP_WORKER, pytest.mark.slow,
                                                                        pytest.mark.mjwarp_models])])
@pytest.mark.parametrize("task,agent,extra", [
    ("AnymalTerrain", "AnymalTerrainPPO_LSTM", []),
    ("ShadowHand", "ShadowHandPPOAsymmLSTM", ["asymmetric=true"]),
])
def test_isaacgymenvs_recurrent_configs_train_on_both_backends(tmp_path, sim, task, agent, extra):
    """One small iteration of each (the learning figures are benchmarks). On MuJoCo Warp with --mjwarp-all-models
    (their models' kernels: ~43 s of compile on a fresh 2-core machine); the default suite's recurrent run on MuJoCo
    Warp is the next test's."""
    from helpers import train_in_process

    if sim == "mjwarp" and importlib.util.find_spec("mujoco_warp") is None:
        require_system("sim=mjwarp needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    small = ["num_envs=8", "agent.horizon=8", "agent.num_mini_batches=2", "max_iterations=1", "eval.final=false",
             "diagnostics=off", "agent.network.rnn.units=32"]
    if task == "AnymalTerrain":
        small += ["task.env.terrain.numLevels=1", "task.env.terrain.numTerrains=1", "task.env.terrain.maxInitMapLevel=0"]
    result = train_in_process(str(tmp_path), f"task={task}", f"agent={agent}", f"sim={sim}", *extra, *small)
    assert result.summary["iterations"] == 1
    state = load(os.path.join(result.run_dir, "checkpoints", "last.pt"))
    assert "actor_rnn.rnn.weight_hh_l0" in state["model"] and state["hidden"].shape[0] == 8


@MJWARP_WORKER
@pytest.mark.slow
@pytest.mark.parametrize("rnn", ["gru", "lstm"])
def test_a_recurrent_policy_trains_and_resumes_on_mujoco_warp(tmp_path, rnn):
    """A recurrent actor-critic on sim=mjwarp in the default suite, on the model it compiles anyway (Cartpole): one
    iteration, then a resume to two from its checkpoint, whose hidden state is one row per world."""
    from helpers import train_in_process

    if importlib.util.find_spec("mujoco_warp") is None:
        require_system("sim=mjwarp needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    small = ["task=Cartpole", "sim=mjwarp", "num_envs=8", "agent.horizon=8", "agent.num_mini_batches=2",
             "agent.seq_length=4", f"agent.network.rnn.name={rnn}", "agent.network.rnn.units=16", "eval.final=false",
             "diagnostics=off"]
    first = train_in_process(str(tmp_path / "first"), *small, "max_iterations=1")
    assert first.summary["iterations"] == 1
    last = os.path.join(first.run_dir, "checkpoints", "last.pt")
    state = load(last)
    assert "actor_rnn.rnn.weight_hh_l0" in state["model"] and state["hidden"].shape[0] == 8
    resumed = train_in_process(str(tmp_path / "resumed"), *small, "max_iterations=2", f"resume={last}")
    assert resumed.summary["iterations"] == 2 and resumed.summary["env_steps"] == 2 * 8 * 8


@pytest.mark.parametrize("override,message", [
    ("agent.seq_length=0", "agent.seq_length=0 is outside its domain: an integer in [1, inf)"),
    ("agent.seq_length=11", "agent.seq_length=11 is longer than the rollout (agent.horizon=10 steps)"),
    ("agent.network.rnn.name=rnn", "agent.network.rnn.name='rnn' is outside its domain: one of lstm, gru or null"),
    ("agent.network.rnn.units=0", "agent.network.rnn.units=0 is outside its domain: an integer in [1, inf)"),
    ("agent.network.rnn.concat_output=true", "unknown config key 'agent.network.rnn.concat_output'"),
    ("agent.num_mini_batches=160", "96 chunks of agent.seq_length=4 steps (32 envs) cannot fill 160 minibatches"),
])
def test_bad_recurrent_values_are_refused_naming_the_key(override, message):
    with pytest.raises(UserError) as error:
        compose_config([*SMALL, override])
    assert message in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_a_layer_without_units_and_a_critic_rnn_without_an_actor_rnn_are_refused():
    with pytest.raises(UserError, match=r"agent.network.rnn.name=gru needs agent.network.rnn.units=N"):
        compose_config(["task=Cartpole", "agent.network.rnn.name=gru"])
    with pytest.raises(UserError, match=r"critic_rnn.name=lstm makes the critic recurrent, and the actor is "
                                        r"feed-forward"):
        compose_config(["task=Cartpole", "agent.network.separate=true", "agent.network.critic_rnn.name=lstm",
                        "agent.network.critic_rnn.units=8"])


def test_a_recurrent_checkpoint_played_with_a_feed_forward_config_and_the_reverse_is_one_line(tmp_path):
    """The CLI: exit 2, one line naming the overrides of the checkpoint's network, nothing written (no run folder);
    the reverse (a feed-forward checkpoint, a recurrent network) in play's own loader, the same refusal."""
    from isaac_ppo.loop.play import load_checkpoint_model

    _train(tmp_path / "lstm", "max_iterations=1")
    runs = tmp_path / "runs"
    result = subprocess.run([TRAIN, "task=Cartpole", "test=true", f"checkpoint={tmp_path / 'lstm' / 'checkpoints' / 'last.pt'}",
                             "play_episodes=2", f"runs_dir={runs}"], capture_output=True, text=True, timeout=300,
                            cwd=tmp_path)
    one_line_error(result, "holds another network (actor_rnn.", "agent.network.rnn.name=lstm agent.network.rnn.units=16")
    assert not runs.exists()
    feed_forward = [w for w in SMALL if not w.startswith("agent.network.rnn")]
    cfg = compose_config([*feed_forward, "max_iterations=1"])  # (a checkpoint is all it needs: not Cartpole's budget)
    env, scheduler = build_env_and_scheduler(cfg)
    build_runner(cfg, env, str(tmp_path / "ff"), scheduler).run()
    with pytest.raises(UserError, match=r"holds another network \(actor_rnn\.rnn\.weight_ih_l0 absent there\)"):
        load_checkpoint_model(compose_config(SMALL), env, str(tmp_path / "ff" / "checkpoints" / "last.pt"))
