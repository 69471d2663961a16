"""Play mode: a checkpoint's deterministic policy run for whole episodes, optionally filmed.

  isaac-ppo-train task=Ant test=true checkpoint=runs/Ant/<date>/checkpoints/best.pt [capture_video=true]
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch
from omegaconf import DictConfig

from isaac_ppo.build import build_model
from isaac_ppo.envs.episodes import EpisodeTracker
from isaac_ppo.errors import UserError
from isaac_ppo.io import checkpoint
from isaac_ppo.video import VideoRecorder


def play(cfg: DictConfig, env: Any, checkpoint_path: str, video_path: Optional[str] = None) -> Dict[str, Any]:
    """Run the deterministic policy (the Gaussian's mean) until play_episodes episodes have ended; with
    video_path, also record env 0 (up to its first 1000 steps) to that mp4."""
    device = torch.device(cfg.device)
    state = checkpoint.load(checkpoint_path, device)
    if (state["num_obs"], state["num_actions"]) != (env.num_obs, env.num_actions):
        raise UserError(f"checkpoint {checkpoint_path} is for {state['task']}, not {cfg.task.name}: play with task={state['task']}")
    model = build_model(cfg, env, device)
    model.load_state_dict(state["model"])
    model.eval()
    tracker = EpisodeTracker(env.num_envs, env.device)
    wanted = cfg.play_episodes
    returns: List[float] = []
    lengths: List[float] = []
    obs = env.reset()["obs"]
    recorder = VideoRecorder(env, video_path) if video_path else None
    with torch.no_grad():
        while len(returns) < wanted:
            mu = model(obs)[0]
            obs_dict, rewards, resets, _ = env.step(mu)
            if recorder is not None:
                recorder.capture()
            tracker.update(rewards, resets)
            if bool(resets.any()):
                done = resets.nonzero().flatten()
                returns += tracker.last_return[done].tolist()
                lengths += tracker.last_length[done].float().tolist()
            obs = obs_dict["obs"]
    result: Dict[str, Any] = {}
    if recorder is not None:
        recorder.close()
        result.update(video=video_path, frames=recorder.frames)
    returns, lengths = returns[:wanted], lengths[:wanted]
    result.update(episodes=wanted, mean_return=sum(returns) / wanted, mean_length=sum(lengths) / wanted)
    return result
