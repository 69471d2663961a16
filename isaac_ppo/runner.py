"""The training loop of DESIGN.md: plan, collect, update, log, checkpoint; owns counters and history.

Per iteration k:
    plan  = scheduler.plan(k, history)
    batch = collector.collect(plan)
    stats = ppo.update(batch, plan)
    scheduler.observe(k, stats, {}); logger.log(...); checkpointer.after_iteration(...)
"""
from __future__ import annotations

import random
import signal
import time
from typing import Any, Dict, List, Mapping, Optional

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from isaac_ppo.agent.model import ActorCritic
from isaac_ppo.agent.ppo import PPO
from isaac_ppo.collect import SyncCollector
from isaac_ppo.errors import UserError
from isaac_ppo.io import checkpoint
from isaac_ppo.io.logger import RunLogger
from isaac_ppo.scheduler import FixedScheduler, Plan


def build_model(cfg: DictConfig, env: Any, device: torch.device) -> ActorCritic:
    agent, net = cfg.agent, cfg.agent.network
    return ActorCritic(
        env.num_obs, env.num_actions, list(net.hidden), net.activation, net.separate, net.init_log_std,
        agent.normalize_input, agent.normalize_value,
    ).to(device)


class Runner:
    def __init__(self, cfg: DictConfig, env: Any, run_dir: str):
        self.cfg = cfg
        self.env = env
        self.run_dir = run_dir
        agent = cfg.agent
        self.device = torch.device(cfg.device)
        self.max_iterations = int(cfg.max_iterations or agent.max_epochs)
        self.generator = torch.Generator(device=self.device).manual_seed(int(cfg.seed))
        torch.manual_seed(int(cfg.seed))
        self.model = build_model(cfg, env, self.device)
        self.ppo = PPO(self.model, agent, self.device, self.generator)
        plan = Plan(env.num_envs, int(agent.horizon), int(agent.mini_epochs), int(agent.minibatch_size))
        self.scheduler = FixedScheduler(plan.check(env.num_envs))
        self.collector = SyncCollector(env, self.model, float(agent.gamma), float(agent.reward_scale), self.generator)
        self.iteration = 0
        self.env_steps = 0
        self.wall_s = 0.0
        self.history: List[Dict[str, Any]] = []
        self.stop_requested: Optional[str] = None

    # ---------------------------------------------------------------------------------------------- state

    def state_dict(self) -> Dict[str, Any]:
        env_state = self.env.state_dict() if hasattr(self.env, "state_dict") else None
        return {
            "model": self.model.state_dict(),
            "ppo": self.ppo.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "counters": {"iteration": self.iteration, "env_steps": self.env_steps, "wall_s": self.wall_s},
            "rng": {
                "agent": self.generator.get_state(),
                "torch": torch.get_rng_state(),
                "numpy": np.random.get_state(),
                "python": random.getstate(),
            },
            "env": env_state,
            "obs": self.collector.obs,
            "episodes": self.collector.tracker.state_dict(),
            "best_return": self.checkpointer.best_return if hasattr(self, "checkpointer") else None,
            "config": OmegaConf.to_yaml(self.cfg, resolve=True),
            "task": self.cfg.task.name,
            "num_obs": self.env.num_obs,
            "num_actions": self.env.num_actions,
        }

    def load_state_dict(self, state: Mapping[str, Any], path: str) -> None:
        if (state["num_obs"], state["num_actions"]) != (self.env.num_obs, self.env.num_actions):
            raise UserError(
                f"checkpoint {path} is for {state['task']} (obs {state['num_obs']}, actions {state['num_actions']}),"
                f" not {self.cfg.task.name}: resume with task={state['task']}"
            )
        self.model.load_state_dict(state["model"])
        self.ppo.load_state_dict(state["ppo"])
        self.scheduler.load_state_dict(state["scheduler"])
        counters = state["counters"]
        self.iteration, self.env_steps, self.wall_s = counters["iteration"], counters["env_steps"], counters["wall_s"]
        self.generator.set_state(state["rng"]["agent"])
        torch.set_rng_state(state["rng"]["torch"])
        np.random.set_state(state["rng"]["numpy"])
        random.setstate(state["rng"]["python"])
        if state["env"] is not None and hasattr(self.env, "load_state_dict"):
            self.env.load_state_dict(state["env"])
            self.collector.obs = state["obs"].to(self.device)
        self.collector.tracker.load_state_dict(state["episodes"])
        self.best_return_at_resume = state.get("best_return")

    # ---------------------------------------------------------------------------------------------- loop

    def run(self, resume_from: Optional[str] = None) -> Dict[str, Any]:
        self.checkpointer = checkpoint.Checkpointer(self.run_dir, int(self.cfg.save_interval))
        if resume_from:
            self.load_state_dict(checkpoint.load(resume_from, self.device), resume_from)
            self.checkpointer.best_return = self.best_return_at_resume
            print(f"resumed from {resume_from} at iteration {self.iteration}")
        logger = RunLogger(self.run_dir, self.cfg.task.name, self.max_iterations, self.iteration)
        if self.checkpointer.best_return is not None:
            logger.best_return = self.checkpointer.best_return
        previous = {sig: signal.signal(sig, self._request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            while self.iteration < self.max_iterations and self.stop_requested is None:
                row = self._iterate()
                logger.log(row)
                self.checkpointer.after_iteration(row["iteration"], self.state_dict, row["mean_return"])
            # the end of the run and a preemption (SIGTERM, Ctrl-C) both leave last.pt at an iteration boundary
            path = self.checkpointer.save("last.pt", self.state_dict())
            summary = logger.summary({"last_checkpoint": path, "stopped_by": self.stop_requested})
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            logger.close()
        if self.stop_requested:
            print(f"stopped by {self.stop_requested} after iteration {self.iteration}; checkpoint {path}")
        return summary

    def _request_stop(self, signum: int, frame: Any) -> None:
        if self.stop_requested is not None:  # a second signal: stop now, last.pt stays the previous one
            raise KeyboardInterrupt
        self.stop_requested = signal.Signals(signum).name
        print(f"\n{self.stop_requested}: saving a checkpoint at the end of this iteration (again to abort)")

    def _iterate(self) -> Dict[str, Any]:
        k = self.iteration
        t0 = time.perf_counter()
        plan = self.scheduler.plan(k, self.history)
        self.ppo.schedule_lr(k, self.max_iterations)
        # on a CPU the env's physics threads and torch's share the cores: small per-step tensor ops run best
        # on collect_torch_threads (1 here), the update's large matrix products on torch_threads
        torch.set_num_threads(int(self.cfg.collect_torch_threads))
        buffer, info = self.collector.collect(plan)
        buffer.compute_gae(info["last_values"], float(self.cfg.agent.gamma), float(self.cfg.agent.lam))
        t1 = time.perf_counter()
        torch.set_num_threads(int(self.cfg.torch_threads))
        stats = self.ppo.update(buffer, plan)
        self._absorb_batch_statistics(buffer)
        t2 = time.perf_counter()
        self.scheduler.observe(k, stats, {})
        tracker = self.collector.tracker
        finished = tracker.drain()  # episodes that ended in this batch
        recent = tracker.recent()  # each env's last finished episode: defined even when none ended now
        steps = plan.batch_size
        self.iteration += 1
        self.env_steps += steps
        self.wall_s += t2 - t0
        row = {
            "iteration": k, "env_steps": self.env_steps, "wall_s": round(self.wall_s, 3),
            "num_envs": plan.num_envs, "rollout_length": plan.rollout_length, "epochs": plan.epochs,
            "minibatch_size": plan.minibatch_size,
            "mean_return": recent["mean_return"], "mean_length": recent["mean_length"],
            "episodes": finished["episodes"], "batch_mean_return": finished["mean_return"],
            "diverged": info["diverged"],
            "collect_s": round(t1 - t0, 4), "update_s": round(t2 - t1, 4),
            "fps_collect": steps / (t1 - t0), "fps_update": steps / (t2 - t1), "fps": steps / (t2 - t0),
        }
        row.update(stats)
        self.history.append(row)
        return row

    @torch.no_grad()
    def _absorb_batch_statistics(self, buffer: Any) -> None:
        """Fold the batch into the normalisers after the update, so rollout and update saw the same ones."""
        if self.model.obs_norm is not None:
            self.model.obs_norm.update(buffer.obs.view(-1, buffer.obs.shape[-1]))
        if self.model.value_norm is not None:
            self.model.value_norm.update(buffer.returns.view(-1, 1))


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
    from isaac_ppo.envs.episodes import EpisodeTracker

    tracker = EpisodeTracker(env.num_envs, env.device)
    wanted = int(cfg.play_episodes)
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


class VideoRecorder:
    """An mp4 of env 0 through MuJoCo's offscreen renderer (MUJOCO_GL=osmesa on CPUs, egl on GPU nodes)."""

    def __init__(self, env: Any, path: str, max_frames: int = 1000, size: tuple = (480, 640)):
        if not hasattr(env, "batch"):
            raise UserError("capture_video=true renders the MuJoCo ports only: run it with sim=mujoco")
        try:
            import imageio
        except ImportError:
            raise UserError("capture_video=true needs imageio and imageio-ffmpeg: pip install 'isaac-ppo[video]'") from None
        import mujoco

        self.env, self.path, self.max_frames = env, path, max_frames
        self.mujoco = mujoco
        self.data = mujoco.MjData(env.model)
        try:
            self.renderer = mujoco.Renderer(env.model, *size)
        except Exception as error:
            raise UserError(
                f"MuJoCo's offscreen renderer failed ({error}): on a CPU machine install libosmesa6 and set "
                "MUJOCO_GL=osmesa; on a GPU node MUJOCO_GL=egl"
            ) from None
        self.writer = imageio.get_writer(path, fps=round(1.0 / env.dt))
        self.frames = 0

    def capture(self) -> None:
        if self.frames >= self.max_frames:
            return
        self.env.batch.get_data(0, self.data)
        self.mujoco.mj_forward(self.env.model, self.data)
        self.renderer.update_scene(self.data, camera="track")
        self.writer.append_data(self.renderer.render())
        self.frames += 1

    def close(self) -> None:
        self.writer.close()
        self.renderer.close()
