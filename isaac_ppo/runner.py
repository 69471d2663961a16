"""The training loop of DESIGN.md: plan, collect, update, log, checkpoint; owns counters and history.

Per iteration k:
    plan  = scheduler.plan(k, history)            (asked once per k; checked against the env pool)
    batch = collector.collect(plan)               (or the batch collected concurrently during update k-1)
    stats = ppo.update(batch, plan)               (with a concurrent plan, batch k+1 is collected meanwhile)
    diag  = probe.measure(k, batch)               (every diagnostics.interval iterations, else {})
    scheduler.observe(k, row, diag); logger.log(row); checkpointer.after_iteration(...)
"""
from __future__ import annotations

import dataclasses
import random
import signal
import time
from typing import Any, Dict, List, Mapping, Optional

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from isaac_ppo.agent.model import ActorCritic
from isaac_ppo.agent.ppo import PPO
from isaac_ppo.agent.rollout import RolloutBuffer
from isaac_ppo.collect import BackgroundCollection, Collected, SyncCollector
from isaac_ppo.config import budgets
from isaac_ppo.diagnostics.probe import Probe
from isaac_ppo.distributed import Local
from isaac_ppo.errors import UserError
from isaac_ppo.io import checkpoint
from isaac_ppo.io.logger import RunLogger
from isaac_ppo.scheduler import Plan, Scheduler, build_scheduler, check_plans

# SIGTERM and Ctrl-C stop a run at the end of its iteration with last.pt saved; so does SIGUSR2, the signal a
# submitit (SLURM) job gets before its time limit or on preemption
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGUSR2") if hasattr(signal, name))

# the collector's action noise is its own stream (it runs beside the learner's under concurrent collection)
COLLECT_SEED_OFFSET = 1_000_003
BUFFER_FIELDS = ("obs", "actions", "log_probs", "mu", "log_std", "values", "rewards", "dones")


def build_model(cfg: DictConfig, env: Any, device: torch.device) -> ActorCritic:
    agent, net = cfg.agent, cfg.agent.network
    return ActorCritic(
        env.num_obs, env.num_actions, list(net.hidden), net.activation, net.separate, net.init_log_std,
        agent.normalize_input, agent.normalize_value,
    ).to(device)


class Runner:
    """One rank's loop. With several ranks (`comm`, multi_gpu=true) each collects its own batch from its own envs;
    the learner stays one (distributed.py), and rank 0 alone decides plans, measures diagnostics and writes."""

    def __init__(self, cfg: DictConfig, env: Any, run_dir: str, scheduler: Optional[Scheduler] = None,
                 comm: Optional[Local] = None, device: Optional[str] = None):
        self.cfg = cfg
        self.env = env
        self.run_dir = run_dir
        self.comm = comm if comm is not None else Local()
        agent = cfg.agent
        self.device = torch.device(device or cfg.device)
        self.max_iterations, self.max_env_steps = budgets(cfg)
        seed = cfg.seed + self.comm.rank  # each rank its own action noise and minibatch order
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.collect_generator = torch.Generator(device=self.device).manual_seed(seed + COLLECT_SEED_OFFSET)
        torch.manual_seed(seed)
        self.model = build_model(cfg, env, self.device)
        self.comm.broadcast_module(self.model)  # rank 0's initial parameters and normalisers everywhere
        self.ppo = PPO(self.model, agent, self.device, self.generator, self.comm)
        diagnostics = cfg.diagnostics if self.comm.is_main else OmegaConf.merge(cfg.diagnostics, {"enabled": False})
        self.probe = Probe(diagnostics, self.model, seed)
        self.scheduler = scheduler if scheduler is not None else build_scheduler(cfg)
        check_plans(self.scheduler, env.num_envs, self.max_iterations, self.max_env_steps)
        self.collector = SyncCollector(
            env, self.model, agent.gamma, agent.reward_scale, self.collect_generator
        )
        self.background: Optional[BackgroundCollection] = None  # made at the first concurrent plan
        self.ready: Optional[Collected] = None  # a batch collected ahead (restored from a checkpoint)
        self.behaviour: Optional[Dict[str, torch.Tensor]] = None  # concurrent: the policy for a batch not yet begun
        self.planned: Dict[int, Plan] = {}  # plans asked of the scheduler for iterations not yet run
        self.iteration = 0
        self.env_steps = 0
        self.wall_s = 0.0
        self.history: List[Dict[str, Any]] = []  # this process's rows (not restored on resume)
        self.stop_requested: Optional[str] = None
        self.stop_agreed = False  # every rank knows of a stop request (checked once per iteration, together)

    # ---------------------------------------------------------------------------------------------- state

    def state_dict(self) -> Dict[str, Any]:
        """The whole training state. With several ranks every rank must call it (their own envs, batches and
        random streams are gathered to rank 0, under "ranks"); only rank 0's return value is complete."""
        self._settle()  # a batch in flight is finished first and saved with the rest
        local = self._rank_state()
        ranks = self.comm.gather_objects(local) if self.comm.world_size > 1 else None
        state = dict(local)
        if ranks is not None:
            state["ranks"] = ranks
        state.update({
            "model": self.model.state_dict(),
            "ppo": self.ppo.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "planned": {k: dataclasses.asdict(plan) for k, plan in self.planned.items()},
            "counters": {"iteration": self.iteration, "env_steps": self.env_steps, "wall_s": self.wall_s},
            "world_size": self.comm.world_size,
            "best_return": self.checkpointer.best_return if hasattr(self, "checkpointer") else None,
            "config": OmegaConf.to_yaml(self.cfg, resolve=True),
            "task": self.cfg.task.name,
            "num_obs": self.env.num_obs,
            "num_actions": self.env.num_actions,
        })
        return state

    def _rank_state(self) -> Dict[str, Any]:
        """What differs between ranks: the envs, the batch collected ahead, the random streams."""
        return {
            "pending": _collected_state(self.ready),
            "behaviour": self.behaviour,
            "rng": {
                "agent": self.generator.get_state(),
                "collect": self.collect_generator.get_state(),
                "probe": self.probe.state_dict(),
                "torch": torch.get_rng_state(),
                "numpy": np.random.get_state(),
                "python": random.getstate(),
            },
            "env": self.env.state_dict() if hasattr(self.env, "state_dict") else None,
            "obs": self.collector.obs,
            "episodes": self.collector.tracker.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any], path: str) -> None:
        if (state["num_obs"], state["num_actions"]) != (self.env.num_obs, self.env.num_actions):
            raise UserError(
                f"checkpoint {path} is for {state['task']} (obs {state['num_obs']}, actions {state['num_actions']}),"
                f" not {self.cfg.task.name}: resume with task={state['task']}"
            )
        saved_world = int(state.get("world_size", 1))
        if saved_world != self.comm.world_size:
            raise UserError(
                f"checkpoint {path} was written by {saved_world} rank(s) and this run has {self.comm.world_size}: "
                f"resume with {saved_world} process(es) (torchrun --nproc_per_node)"
            )
        self.model.load_state_dict(state["model"])
        self.ppo.load_state_dict(state["ppo"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.planned = {int(k): Plan(**plan) for k, plan in state.get("planned", {}).items()}
        counters = state["counters"]
        self.iteration, self.env_steps, self.wall_s = counters["iteration"], counters["env_steps"], counters["wall_s"]
        self.best_return_at_resume = state.get("best_return")
        self._load_rank_state(state["ranks"][self.comm.rank] if "ranks" in state else state)

    def _load_rank_state(self, state: Mapping[str, Any]) -> None:
        self.ready = self._restore_collected(state.get("pending"))
        self.behaviour = state.get("behaviour")
        rng = state["rng"]
        self.generator.set_state(rng["agent"])
        if "collect" in rng:
            self.collect_generator.set_state(rng["collect"])
        self.probe.load_state_dict(rng.get("probe"))
        torch.set_rng_state(rng["torch"])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
        if state["env"] is not None and hasattr(self.env, "load_state_dict"):
            self.env.load_state_dict(state["env"])
            self.collector.obs = state["obs"].to(self.device)
        self.collector.tracker.load_state_dict(state["episodes"])

    def _restore_collected(self, saved: Optional[Mapping[str, Any]]) -> Optional[Collected]:
        if saved is None:
            return None
        plan, slot = Plan(**saved["plan"]), int(saved["slot"])
        buffer = RolloutBuffer(plan.rollout_length, plan.num_envs, self.env.num_obs, self.env.num_actions, self.device)
        for name in BUFFER_FIELDS:
            getattr(buffer, name).copy_(saved["buffer"][name])
        self.collector.buffers[slot] = buffer
        info = dict(saved["info"])
        info["last_values"] = info["last_values"].to(self.device)
        return Collected(plan, slot, buffer, info, int(saved["policy_version"]), concurrent=bool(saved["concurrent"]))

    # ---------------------------------------------------------------------------------------------- loop

    def run(self, resume_from: Optional[str] = None) -> Dict[str, Any]:
        main = self.comm.is_main
        # every rank builds the checkpoints' state (it is gathered), rank 0 writes them
        self.checkpointer = checkpoint.Checkpointer(self.run_dir, self.cfg.save_interval, write=main)
        if resume_from:
            self.load_state_dict(checkpoint.load(resume_from, self.device), resume_from)
            self.checkpointer.best_return = self.best_return_at_resume
            if main:
                print(f"resumed from {resume_from} at iteration {self.iteration}")
        logger = RunLogger(self.run_dir, self.cfg.task.name, self.max_iterations, self.iteration,
                           max_env_steps=self.max_env_steps, start_env_steps=self.env_steps) if main else None
        if logger is not None and self.checkpointer.best_return is not None:
            logger.best_return = self.checkpointer.best_return
        previous = {sig: signal.signal(sig, self._request_stop) for sig in STOP_SIGNALS}
        summary: Dict[str, Any] = {}
        try:
            while not self._stop_agreed_now():
                row = self.step()
                if row is None:  # a budget (iterations or env steps) is used up
                    break
                if logger is not None:
                    logger.log(row)
                self.checkpointer.after_iteration(row["iteration"], self.state_dict, row["mean_return"])
            # the end of the run and a preemption (SIGTERM, Ctrl-C) both leave last.pt at an iteration boundary
            path = self.checkpointer.save("last.pt", self.state_dict())
            extra: Dict[str, Any] = {"last_checkpoint": path, "stopped_by": self.stop_requested}
            if self.comm.world_size > 1:  # equal digests: every rank ends with bit-identical learner state
                extra.update(world_size=self.comm.world_size, rank_digests=self.comm.digests(self._learner_tensors()))
            if logger is not None:
                summary = logger.summary(extra)
            if self.probe.enabled and self.cfg.diagnostics.plot:
                from isaac_ppo.diagnostics.panel import write_panel

                panel = write_panel(self.run_dir)
                if panel:
                    print(f"[{self.cfg.task.name}] diagnostics panel: {panel}")
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._abandon_background()
            if logger is not None:
                logger.close()
        if self.stop_requested and main:
            print(f"stopped by {self.stop_requested} after iteration {self.iteration}; checkpoint {path}")
        if self.stop_requested:
            _hand_on_preemption(self.stop_requested, previous)
        return summary

    def _stop_agreed_now(self) -> bool:
        """Whether the run stops before the next iteration: a stop request on any rank stops them all there."""
        if self.comm.world_size == 1:
            self.stop_agreed = self.stop_requested is not None
        else:
            self.stop_agreed = self.comm.any(self.stop_requested is not None)
            if self.stop_agreed and self.stop_requested is None:
                self.stop_requested = "a stop request on another rank"
        return self.stop_agreed

    def _learner_tensors(self) -> List[torch.Tensor]:
        """What must be identical on every rank: parameters and buffers (normaliser statistics) in order."""
        return [t for _, t in sorted(self.model.state_dict().items())]

    def _request_stop(self, signum: int, frame: Any) -> None:
        if self.stop_requested is not None:  # a second signal: stop now, last.pt stays the previous one
            raise KeyboardInterrupt
        self.stop_requested = signal.Signals(signum).name
        print(f"\n{self.stop_requested}: saving a checkpoint at the end of this iteration (again to abort)")

    def plan_of(self, k: int, env_steps_before: int) -> Optional[Plan]:
        """Iteration k's plan, asked of the scheduler once; None when a budget ends before iteration k."""
        if self.max_iterations is not None and k >= self.max_iterations:
            return None
        if k not in self.planned:
            # decided on rank 0 (whose scheduler alone sees the diagnostics) and the same everywhere
            plan = self.comm.broadcast_object(self.scheduler.plan(k, self.history) if self.comm.is_main else None)
            self.planned[k] = plan.check(self.env.num_envs, f"iteration {k}'s plan from scheduler._target_")
        plan = self.planned[k]
        steps = plan.batch_size * self.comm.world_size  # env steps count every rank's envs
        if self.max_env_steps is not None and env_steps_before + steps > self.max_env_steps:
            return None  # the budget is never exceeded: the run ends at or just under max_env_steps
        return plan

    def step(self) -> Optional[Dict[str, Any]]:
        """Run iteration self.iteration; None when a budget is used up."""
        k = self.iteration
        plan = self.plan_of(k, self.env_steps)
        if plan is None:
            return None
        t0 = time.perf_counter()
        self.ppo.schedule_lr(self._progress())
        batch = self._take_batch(k, plan)
        t1 = time.perf_counter()
        staleness = k - batch.policy_version
        # HTS-RL's contract: a batch collected beside update k-1 is exactly one update stale, any other none
        assert staleness == (1 if batch.concurrent else 0), f"batch of iteration {k} is {staleness} updates stale"
        buffer, info = batch.buffer, batch.info
        buffer.compute_gae(info["last_values"], self.cfg.agent.gamma, self.cfg.agent.lam)
        if plan.mode == "concurrent" and not self._collect_ahead(
                k + 1, self.env_steps + plan.batch_size * self.comm.world_size, batch.slot):
            # the run ends (or stops) here: keep the behaviour policy, so a resumed run collects batch k+1
            # with exactly the parameters the uninterrupted run would have collected it with
            self.behaviour = {name: value.clone() for name, value in self.model.state_dict().items()}
        torch.set_num_threads(self.cfg.torch_threads)
        self.ppo.grad_observer = self.probe.arm(k)
        stats = self.ppo.update(buffer, plan, stale=staleness > 0)
        self.ppo.grad_observer = None
        t_probe = time.perf_counter()
        diag = self.probe.measure(k, buffer)  # {} unless due; sees the normalisers the update used
        probe_s = time.perf_counter() - t_probe
        self._absorb_batch_statistics(buffer)
        t2 = time.perf_counter()
        steps = plan.batch_size * self.comm.world_size
        info = self._episodes_of_all_ranks(info)
        self.iteration += 1
        self.env_steps += steps
        self.wall_s += t2 - t0
        self.planned.pop(k, None)
        collect_s = info["collect_s"]
        row = {
            "iteration": k, "env_steps": self.env_steps, "wall_s": round(self.wall_s, 3),
            "num_envs": plan.num_envs, "rollout_length": plan.rollout_length, "batch_size": steps,
            "epochs": plan.epochs, "minibatch_size": plan.minibatch_size, "mode": plan.mode, "staleness": staleness,
            "mean_return": info["mean_return"], "mean_length": info["mean_length"],
            "episodes": info["episodes"], "batch_mean_return": info["batch_mean_return"],
            "diverged": info["diverged"],
            "collect_s": round(collect_s, 4), "wait_s": round(t1 - t0, 4), "update_s": round(t2 - t1, 4),
            "iteration_s": round(t2 - t0, 4),
            "fps_collect": steps / collect_s, "fps_update": steps / (t2 - t1), "fps": steps / (t2 - t0),
        }
        row.update(stats)
        if diag:
            row["diagnostics"] = diag
            row["diagnostics_s"] = round(probe_s, 4)  # the measurement's own cost (inside update_s)
        self.scheduler.observe(k, row, diag)
        events = self.scheduler.take_events()
        if events:
            row["scheduler_events"] = events
        self.history.append(row)
        return row

    def _episodes_of_all_ranks(self, info: Dict[str, Any]) -> Dict[str, Any]:
        """The batch's episode statistics over every rank's envs (weighted by episodes, and by envs with a
        finished episode for the recent return and length)."""
        if self.comm.world_size == 1:
            return info
        def weighted(mean: float, count: float) -> float:
            return mean * count if count else 0.0
        episodes, recent = float(info["episodes"]), float(info["recent_envs"])
        sums = self.comm.sum(torch.tensor([
            episodes, weighted(info["batch_mean_return"], episodes), recent,
            weighted(info["mean_return"], recent), weighted(info["mean_length"], recent), float(info["diverged"]),
        ], dtype=torch.float64)).tolist()
        nan = float("nan")
        return dict(info, episodes=int(sums[0]), batch_mean_return=sums[1] / sums[0] if sums[0] else nan,
                    recent_envs=int(sums[2]), mean_return=sums[3] / sums[2] if sums[2] else nan,
                    mean_length=sums[4] / sums[2] if sums[2] else nan, diverged=int(sums[5]))

    def _progress(self) -> float:
        """How far through its budget the run is, in [0, 1] (for the linear learning-rate schedule)."""
        parts = [0.0]
        if self.max_iterations:
            parts.append(self.iteration / self.max_iterations)
        if self.max_env_steps:
            parts.append(self.env_steps / self.max_env_steps)
        return max(parts)

    def _take_batch(self, k: int, plan: Plan) -> Collected:
        """Iteration k's batch: collected ahead (concurrent) or now, with the live policy (sync)."""
        self._settle()
        if self.ready is not None:
            batch, self.ready = self.ready, None
            if batch.plan != plan:
                raise RuntimeError(f"the batch collected ahead was for {batch.plan}, iteration {k} plans {plan}")
            return batch
        if self.behaviour is not None and plan.mode == "concurrent":  # resumed where no batch was in flight
            behaviour, self.behaviour = self._behaviour_model(), None
            torch.set_num_threads(self.cfg.collect_torch_threads)
            buffer, info = self.collector.collect(plan, behaviour, slot=0)
            return Collected(plan, 0, buffer, info, policy_version=k - 1, concurrent=True)
        self.behaviour = None
        # on a CPU the env's physics threads and torch's share the cores: small per-step tensor ops run best
        # on collect_torch_threads (1 here), the update's large matrix products on torch_threads
        torch.set_num_threads(self.cfg.collect_torch_threads)
        buffer, info = self.collector.collect(plan, self.model, slot=0)
        return Collected(plan, 0, buffer, info, policy_version=k, concurrent=False)

    def _collect_ahead(self, k: int, env_steps_before: int, busy_slot: int) -> bool:
        """Start collecting iteration k's batch with a snapshot of the policy as it is now (before the update);
        False when iteration k will not run in this process (a budget or a stop request ends it first)."""
        if self.stop_agreed if self.comm.world_size > 1 else self.stop_requested:
            return False  # (several ranks must all ask for the next plan, or none)
        plan = self.plan_of(k, env_steps_before)
        if plan is None or plan.mode != "concurrent":
            return False
        if self.background is None:
            self.background = BackgroundCollection(self.collector, self.model)
        self.background.start(plan, self.model, policy_version=k - 1, slot=1 - busy_slot)
        return True

    def _behaviour_model(self) -> ActorCritic:
        model = build_model(self.cfg, self.env, self.device)
        model.load_state_dict(self.behaviour)
        return model

    def _settle(self) -> None:
        """Wait for a batch in flight, keeping it for its iteration."""
        if self.background is not None and self.background.running:
            self.ready = self.background.wait()

    def _abandon_background(self) -> None:
        """On the way out (also on errors): never leave a thread stepping the env."""
        if self.background is not None and self.background.running:
            try:
                self.background.wait()
            except BaseException:  # the run is ending with the error that brought us here
                pass

    @torch.no_grad()
    def _absorb_batch_statistics(self, buffer: Any) -> None:
        """Fold the batch into the normalisers after the update, so rollout and update saw the same ones."""
        merge = self.comm.merge_moments  # every rank's batch, exactly
        if self.model.obs_norm is not None:
            self.model.obs_norm.update(buffer.obs.view(-1, buffer.obs.shape[-1]), merge)
        if self.model.value_norm is not None:
            self.model.value_norm.update(buffer.returns.view(-1, 1), merge)


def _collected_state(batch: Optional[Collected]) -> Optional[Dict[str, Any]]:
    if batch is None:
        return None
    return {
        "plan": dataclasses.asdict(batch.plan), "slot": batch.slot, "policy_version": batch.policy_version,
        "concurrent": batch.concurrent, "buffer": {name: getattr(batch.buffer, name) for name in BUFFER_FIELDS},
        "info": dict(batch.info),
    }


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


def _hand_on_preemption(stopped_by: str, previous: Mapping[int, Any]) -> None:
    """After last.pt is saved, pass SIGUSR2 on to the handler that was there before the run: under submitit that
    handler requeues the job (which resumes in place from last.pt) and exits."""
    usr2 = getattr(signal, "SIGUSR2", None)
    handler = previous.get(usr2) if usr2 is not None and stopped_by == "SIGUSR2" else None
    if callable(handler):
        handler(usr2, None)
