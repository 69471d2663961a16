"""rl-games checkpoints (.pth, IsaacGymEnvs' runs/<name>/nn/) played by isaac-ppo: a real rl-games run of our
rl_games backend writes them; our ActorCritic loaded from one gives rl-games' own network's mean action; the real
CLI plays it as it plays our checkpoints; another network is one line, exit 2."""
from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
import yaml

from helpers import one_line_error
from isaac_ppo.agent.model import ActorCritic
from isaac_ppo.errors import UserError
from isaac_ppo.io import rlgames_checkpoint

# trains with rl-games in a subprocess, then plays with the CLI. One xdist worker takes
# them all (xdist_group): the module's fixture then trains once, not once per worker that draws one of its
# tests (7 s twice on a 2-core machine, 2026-12-02)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("rl_games_checkpoint")]

TRAIN = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-train")
HIDDEN = [48, 24]  # not Cartpole's default [32, 32]: play must be told the network, and is
SMALL = ["task=Cartpole", "sim=mujoco", "max_iterations=3", "num_envs=64", "agent.minibatch_size=256"]
TOLERANCE = 1e-5


def run(*command, cwd, timeout=300):
    return subprocess.run(list(command), capture_output=True, text=True, timeout=timeout, cwd=cwd)


@pytest.fixture(scope="module")
def rl_games_run(tmp_path_factory):
    """A tiny Cartpole trained by rl-games through agent=rl_games: its run folder, .pth files and params."""
    if importlib.util.find_spec("rl_games") is None:
        pytest.fail("rl-games is missing: it is a test dependency (pip install 'rl-games>=1.6,<1.7')")
    root = tmp_path_factory.mktemp("rl_games_checkpoint")
    hidden = "[" + ",".join(str(h) for h in HIDDEN) + "]"
    result = run(TRAIN, *SMALL, "agent=rl_games", f"agent.network.hidden={hidden}", f"runs_dir={root / 'runs'}",
                 cwd=root)
    assert result.returncode == 0, result.stderr
    (run_dir,) = (root / "runs" / "Cartpole").iterdir()
    with open(run_dir / "metrics.json") as f:
        last = json.load(f)["last_checkpoint"]
    best = run_dir / "nn" / "Cartpole.pth"  # rl-games' best (whenever its mean reward improved)
    assert last and os.path.isfile(last) and best.is_file(), sorted(os.listdir(run_dir / "nn"))
    with open(run_dir / "rl_games_params.yaml") as f:
        params = yaml.safe_load(f)["params"]
    return {"root": root, "run_dir": run_dir, "checkpoints": [last, str(best)], "params": params, "hidden": hidden}


def rl_games_model(params, num_obs, num_actions):
    """rl-games' own model, built by its ModelBuilder from the params our backend gave it."""
    from rl_games.algos_torch.model_builder import ModelBuilder

    config = params["config"]
    return ModelBuilder().load(params).build({
        "actions_num": num_actions, "input_shape": (num_obs,), "num_seqs": 1, "value_size": 1,
        "normalize_value": config["normalize_value"], "normalize_input": config["normalize_input"]})


def observations(model, count=4096, seed=0):
    """Observations around the checkpoint's statistics, spread to 3 std: some normalised values are clamped at 5."""
    generator = torch.Generator().manual_seed(seed)
    stats = model.running_mean_std
    std = stats.running_var.float().sqrt()
    noise = torch.randn(count, std.shape[0], generator=generator)
    return stats.running_mean.float() + 3.0 * std * noise


def differences(theirs, ours, obs):
    """Max abs differences, rl-games' network (as isaac_ppo/loop/rlgames.py's RlGamesPolicy calls it: eval mode, its
    own observation normaliser) vs our ActorCritic, of the mean action, log-std, normalised value and obs."""
    theirs.eval()
    ours.eval()
    with torch.no_grad():
        normalised = theirs.norm_obs(obs)
        mu, log_std, value, _ = theirs.a2c_network({"obs": normalised})  # (fixed sigma: the log-std)
        our_mu, our_log_std, our_value = ours(obs)
        return {"mu": (mu - our_mu).abs().max().item(), "log_std": (log_std - our_log_std).abs().max().item(),
                "value": (value.squeeze(-1) - our_value).abs().max().item(),
                "obs": (normalised - ours.normalize_obs(obs)).abs().max().item(),
                "clamped": (normalised.abs() >= 5.0).float().mean().item()}


def test_parity_with_rl_games_own_network(rl_games_run):
    env = SimpleNamespace(num_obs=4, num_actions=1)
    for path in rl_games_run["checkpoints"]:
        theirs = rl_games_model(rl_games_run["params"], env.num_obs, env.num_actions)
        theirs.load_state_dict(torch.load(path, map_location="cpu", weights_only=False)["model"])
        ours = ActorCritic(env.num_obs, env.num_actions, HIDDEN)
        rlgames_checkpoint.load_model(ours, path, env, "Cartpole")
        diff = differences(theirs, ours, observations(theirs))
        print(f"{os.path.basename(path)}: max abs differences {diff}")  # (shown with pytest -s)
        assert diff["clamped"] > 0, diff  # the clamp at 5 is exercised
        assert diff["mu"] < TOLERANCE and diff["log_std"] == 0.0 and diff["value"] < TOLERANCE, (path, diff)


def test_parity_of_a_separate_compiled_network_with_its_normalisers(rl_games_run, tmp_path):
    """separate=True (critic_mlp) and torch.compile's '_orig_mod.' key prefix, on random weights and statistics
    (no training needed: the mapping, not the learning, is under test)."""
    params = copy.deepcopy(rl_games_run["params"])
    params["network"]["separate"] = True
    theirs = rl_games_model(params, 4, 1)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for tensor in list(theirs.parameters()):
            tensor.copy_(0.5 * torch.randn(tensor.shape, generator=generator))
        for stats in (theirs.running_mean_std, theirs.value_mean_std):
            stats.running_mean.copy_(torch.randn(stats.running_mean.shape, generator=generator, dtype=torch.float64))
            stats.running_var.copy_(torch.rand(stats.running_var.shape, generator=generator, dtype=torch.float64) * 4)
            stats.count.fill_(1234.0)
    path = tmp_path / "compiled.pth"
    state = {"_orig_mod." + key: value for key, value in theirs.state_dict().items()}
    torch.save({"model": state, "epoch": 1, "frame": 1024, "optimizer": {}}, path)

    shared = ActorCritic(4, 1, HIDDEN)
    with pytest.raises(UserError, match=r"agent\.network\.separate=true"):
        rlgames_checkpoint.load_model(shared, str(path), SimpleNamespace(num_obs=4, num_actions=1), "Cartpole")
    ours = ActorCritic(4, 1, HIDDEN, separate=True)
    rlgames_checkpoint.load_model(ours, str(path), SimpleNamespace(num_obs=4, num_actions=1), "Cartpole")
    assert torch.equal(ours.obs_norm.count, theirs.running_mean_std.count)
    assert torch.equal(ours.value_norm.var, theirs.value_mean_std.running_var)
    diff = differences(theirs, ours, observations(theirs))
    print(f"separate, compiled: max abs differences {diff}")
    assert diff["mu"] < TOLERANCE and diff["log_std"] == 0.0 and diff["value"] < TOLERANCE, diff


def test_the_cli_plays_an_rl_games_checkpoint(rl_games_run):
    root, hidden = rl_games_run["root"], rl_games_run["hidden"]
    for path in rl_games_run["checkpoints"]:
        result = run(TRAIN, "task=Cartpole", "sim=mujoco", "test=true", "play_episodes=8", f"checkpoint={path}",
                     f"agent.network.hidden={hidden}", cwd=root)
        assert result.returncode == 0, result.stderr
        assert "[Cartpole] 8 episodes (one per env, from reset): mean return" in result.stdout, result.stdout
        assert "IQM" in result.stdout and "95% CI" in result.stdout and "mean length" in result.stdout


def _play_in_process(*overrides):
    """play as isaac-ppo-train test=true runs it, in this process (the refusals need no process of their own)."""
    from isaac_ppo.loop.build import build_env_and_scheduler
    from isaac_ppo.loop.play import play
    from isaac_ppo.config.compose import compose_config

    cfg = compose_config(list(overrides))
    return play(cfg, build_env_and_scheduler(cfg)[0], cfg.checkpoint)


def test_another_network_or_file_is_one_line(rl_games_run, tmp_path):
    from helpers import train_in_process

    root, hidden = rl_games_run["root"], rl_games_run["hidden"]
    path = rl_games_run["checkpoints"][0]
    play = ["task=Cartpole", "sim=mujoco", "test=true", "play_episodes=2"]
    # the real CLI once: exit 2, one line
    one_line_error(run(TRAIN, *play, f"checkpoint={path}", "agent.network.hidden=[64,64]", cwd=root),
                   path, "hidden [48,24] there, [64,64] here", f"play it with agent.network.hidden={hidden}")
    for overrides, fragments in (
            ([], [f"agent.network.hidden={hidden}"]),  # Cartpole's default network, [32, 32]
            ([f"agent.network.hidden={hidden}", "agent.normalize_input=false"], ["agent.normalize_input=true"])):
        with pytest.raises(UserError) as error:
            _play_in_process(*play, f"checkpoint={path}", *overrides)
        assert all(f in str(error.value) for f in fragments) and "\n" not in str(error.value), str(error.value)
    with pytest.raises(UserError, match=r"4 observations and 1 actions.*task="):
        _play_in_process("task=Ant", "sim=mujoco", "test=true", "play_episodes=2", f"checkpoint={path}")
    foreign = tmp_path / "foreign.pth"
    torch.save({"state_dict": {"fc.weight": torch.zeros(2, 2)}}, foreign)
    with pytest.raises(UserError, match="not an rl-games checkpoint"):
        _play_in_process(*play, f"checkpoint={foreign}")
    # training does not start from rl-games weights: refused as not ours, in one line
    for key in ("checkpoint", "resume"):
        with pytest.raises(UserError, match="not an isaac-ppo checkpoint"):
            train_in_process(tmp_path / "runs", *SMALL, f"{key}={path}", f"agent.network.hidden={hidden}")
