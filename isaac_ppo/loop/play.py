"""Play mode: a checkpoint's deterministic policy, one complete episode per env from reset, optionally filmed.

  isaac-ppo-train task=Ant test=true checkpoint=runs/Ant/<date>/checkpoints/best.pt [capture_video=true]
      [save_probe_set=PATH]

checkpoint=*.pth plays an rl-games checkpoint (IsaacGymEnvs' runs/<name>/nn/) the same way
(isaac_ppo/io/rlgames_checkpoint.py).
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

import torch
from omegaconf import DictConfig

from isaac_ppo.loop.build import build_model
from isaac_ppo.diagnostics import probe_set
from isaac_ppo.errors import UserError
from isaac_ppo.loop.evaluate import first_episodes, mean_action, summarise
from isaac_ppo.io import checkpoint, rlgames_checkpoint
from isaac_ppo.io.video import VideoRecorder


def run_config(checkpoint_path: str) -> Optional[str]:
    """<run>/config.yaml for <run>/checkpoints/<name>.pt, when it is there (a run folder's layout)."""
    candidate = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(checkpoint_path))), "config.yaml")
    return candidate if os.path.isfile(candidate) else None


def load_checkpoint_model(cfg: DictConfig, env: Any, checkpoint_path: str, device: Any = "cpu") -> Any:
    """The model of a checkpoint (ours, or an rl-games .pth) for env, its normalisers loaded, in eval mode: what
    play, the gait check and the benchmarks' replays act with (mean_action of it)."""
    device = torch.device(device)
    if rlgames_checkpoint.is_rl_games_path(checkpoint_path):
        model = build_model(cfg, env, device)
        rlgames_checkpoint.load_model(model, checkpoint_path, env, cfg.task.name, device)
    else:
        state = checkpoint.load(checkpoint_path, device)
        if (state["num_obs"], state["num_actions"]) != (env.num_obs, env.num_actions):
            raise UserError(f"checkpoint {checkpoint_path} is for {state['task']}, not {cfg.task.name}: play with task={state['task']}")
        # (a critic over critic observations is rebuilt only to load it: the actor plays alone)
        model = build_model(cfg, env, device, states=int(state.get("num_states", 0)))
        checkpoint.load_model(model, state, checkpoint_path)
    model.eval()
    return model


def play(cfg: DictConfig, env: Any, checkpoint_path: str, video_path: Optional[str] = None) -> Dict[str, Any]:
    """The deterministic policy (the Gaussian's mean) of a checkpoint, each env of the play set (play_episodes
    envs) counting its first episode from reset (isaac_ppo/loop/evaluate.py: unbiased whatever the episode lengths);
    with video_path, also record env 0 (up to its first 1000 steps) to that mp4; with cfg.save_probe_set, also
    save diagnostics.samples of the observations played (diagnostics/probe_set.py)."""
    device = torch.device(cfg.device)
    model = load_checkpoint_model(cfg, env, checkpoint_path, device)
    recorder = VideoRecorder(env, video_path) if video_path else None
    policy = mean_action(model)
    sampler = None
    if cfg.save_probe_set:
        sampler = probe_set.StateSampler(policy, cfg.diagnostics.samples, cfg.seed)
        policy = sampler
    episodes = first_episodes(env, policy, recorder.capture if recorder is not None else None)
    result: Dict[str, Any] = {}
    if sampler is not None:
        states = sampler.sample()
        probe_set.save(cfg.save_probe_set, states, cfg.task.name, checkpoint_path)
        result.update(probe_set=cfg.save_probe_set, probe_states=states.shape[0], states_played=sampler.seen)
    if recorder is not None:
        recorder.close()
        result.update(video=video_path, frames=recorder.frames)
    result.update(summarise(episodes["returns"], episodes["lengths"], seed=cfg.seed, diverged=episodes["diverged"],
                            measures=episodes["measures"]), measure_names=list(episodes["measures"]))
    return result
