"""Building a run's parts from its loaded config, each once: the env pool and scheduler, the model,
the learner, the probe, the batch source, the checkpointer and the logger, handed to the Runner.

Rank r of a multi_gpu run seeds with seed + r (its own action noise and minibatch order), simulates its own
pool on its device, and takes its share of the machine's cores; rank 0's initial parameters go everywhere.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch
from omegaconf import DictConfig, OmegaConf

from isaac_ppo.loop import batches
from isaac_ppo.agent.acting import Acting
from isaac_ppo.agent.model import ActorCritic
from isaac_ppo.agent.ppo import PPO
from isaac_ppo.loop.collect import SyncCollector
from isaac_ppo.config import budgets
from isaac_ppo.config.isaacgymenvs import isaacgym_options
from isaac_ppo.diagnostics.probe import Probe
from isaac_ppo.distributed import Local, cores
from isaac_ppo.envs.contract import num_states
from isaac_ppo.loop.evaluate import Evaluator
from isaac_ppo.io import wandb_sink
from isaac_ppo.io.checkpoint import Checkpointer
from isaac_ppo.io.logger import RunLogger
from isaac_ppo.loop.runner import Runner
from isaac_ppo.scheduler import Scheduler, build_scheduler, check_plans, pool_size
from isaac_ppo.io.video import TrainingVideos

# the collector's action noise is its own stream (it runs beside the learner's under concurrent collection)
COLLECT_SEED_OFFSET = 1_000_003
EVAL_SEED_OFFSET = 2_000_003  # the eval envs' resets: a stream of their own
VIDEO_SEED_OFFSET = 3_000_017  # the training videos' env: another


def build_env_and_scheduler(cfg: DictConfig, rank: int = 0, local_ranks: int = 1,
                            device: Optional[str] = None) -> Tuple[Any, Optional[Scheduler]]:
    """The scheduler, and the env pool sized once for the most envs it can ask for (or num_envs when set); in
    play mode (test=true), num_envs envs when given (as IsaacGymEnvs plays), else play_episodes: each plays one
    episode."""
    if cfg.test:
        return _make_env(cfg, cfg.num_envs or cfg.play_episodes, cfg.seed, device, local_ranks), None
    scheduler = build_scheduler(cfg)
    pool = pool_size(cfg, scheduler, *budgets(cfg))
    return _make_env(cfg, pool, cfg.seed + rank, device, local_ranks), scheduler


def _make_env(cfg: DictConfig, num_envs: int, seed: int, device: Optional[str], local_ranks: int = 1,
              evaluation: bool = False) -> Any:
    """The task's envs; evaluation: the evaluator's, with the task's eval_env values merged on (a task's own
    evaluation conditions, e.g. AnymalTerrain's every level, none moving)."""
    from isaac_ppo.envs import make

    task_cfg = OmegaConf.to_container(cfg.task, resolve=True)
    eval_env = task_cfg.pop("eval_env", None)
    if evaluation and eval_env:
        task_cfg = OmegaConf.to_container(OmegaConf.merge(task_cfg, eval_env), resolve=True)
    if cfg.get("asymmetric"):  # the task's critic observations on (IsaacGymEnvs' key, which its tasks read)
        task_cfg["env"] = dict(task_cfg["env"], asymmetric_observations=True)
    mujoco = task_cfg.get("mujoco") or {}
    if local_ranks > 1 and not mujoco.get("nthread"):  # 0 = every core: split them between the ranks
        task_cfg["mujoco"] = dict(mujoco, nthread=max(1, cores() // local_ranks))
    return make(cfg.task.name, num_envs, sim=cfg.sim, seed=seed, device=device or cfg.device, task_cfg=task_cfg,
                isaacgym_options=isaacgym_options(cfg))


def build_model(cfg: DictConfig, env: Any, device: torch.device, states: Optional[int] = None) -> ActorCritic:
    """The run's actor-critic for env's shapes; states: the critic observation's size when not env's (play and
    export rebuild a checkpoint's critic to load it, and then use the actor alone)."""
    agent, net = cfg.agent, cfg.agent.network
    rnn, critic_rnn = (recurrence(net, name) for name in ("rnn", "critic_rnn"))
    return ActorCritic(
        env.num_obs, env.num_actions, list(net.hidden), net.activation, net.separate, net.init_log_std,
        agent.normalize_input, agent.normalize_value, num_states(env) if states is None else states,
        net.get("critic_hidden"), rnn, critic_rnn, agent.get("zero_rnn_on_done", True),
    ).to(device)


def recurrence(net: Any, name: str) -> Optional[Dict[str, Any]]:
    """agent.network.<name> (rnn or critic_rnn) as ActorCritic takes it: None where it names no layer."""
    node = net.get(name)
    return OmegaConf.to_container(node, resolve=True) if node is not None and node.get("name") else None


def build_runner(cfg: DictConfig, env: Any, run_dir: str, scheduler: Optional[Scheduler] = None,
                 comm: Optional[Local] = None, device: Optional[str] = None) -> Runner:
    """A Runner with every part built for this rank (scheduler: the one build_env_and_scheduler sized the
    pool for)."""
    comm = comm if comm is not None else Local()
    device_ = torch.device(device or cfg.device)
    seed = cfg.seed + comm.rank
    generator = torch.Generator(device=device_).manual_seed(seed)
    collect_generator = torch.Generator(device=device_).manual_seed(seed + COLLECT_SEED_OFFSET)
    torch.manual_seed(seed)
    model = build_model(cfg, env, device_)
    comm.broadcast_module(model)  # rank 0's initial parameters and normalisers everywhere
    ppo = PPO(model, cfg.agent, device_, generator, comm)
    diagnostics = cfg.diagnostics if comm.is_main else OmegaConf.merge(cfg.diagnostics, {"enabled": False})
    probe = Probe(diagnostics, model, seed, cfg.task.name)
    scheduler = scheduler if scheduler is not None else build_scheduler(cfg)
    max_iterations, max_env_steps = budgets(cfg)
    check_plans(scheduler, env.num_envs, max_iterations, max_env_steps)
    collector = SyncCollector(env, model, cfg.agent.gamma, cfg.agent.reward_scale, collect_generator,
                              cfg.agent.games_to_track, cfg.agent.seq_length)
    # the ranks on one machine share its cores: each takes its part, for collection and for the update
    share = comm.local_world_size
    mode = cfg.scheduler.get("mode", "sync")
    update_threads = max(1, cfg.torch_threads // share)
    # concurrent runs keep the update's thread count for collection too: torch's count is the process's, so a second
    # one on the collection thread would make the floats a race
    # (benchmarks/history/ci.md, "The suite on a cold AVX2-only machine", 2026-12-02)
    collect_threads = update_threads if mode == "concurrent" else max(1, cfg.collect_torch_threads // share)
    source = batches.for_mode(mode, collector, collect_threads, model, lambda: build_model(cfg, env, device_))
    videos = None
    if cfg.capture_video and cfg.capture_video_interval_iterations > 0 and comm.is_main:  # an env of its own, one env
        video_env = _make_env(cfg, 1, cfg.seed + VIDEO_SEED_OFFSET, device)
        videos = TrainingVideos(video_env, run_dir, cfg.capture_video_interval_iterations, cfg.capture_video_len,
                                lambda: Acting(model))
    logger = RunLogger(run_dir, cfg.task.name, max_iterations, max_env_steps=max_env_steps, videos=videos,
                       wandb=wandb_sink.for_run(cfg, run_dir), thresholds=tuple(cfg.task.get("solve_thresholds") or ())
                       ) if comm.is_main else None
    return Runner(
        cfg, env, model=model, ppo=ppo, probe=probe, scheduler=scheduler, collector=collector, batches=source,
        checkpointer=Checkpointer(run_dir, cfg.save_interval_iterations, write=comm.is_main), logger=logger, comm=comm,
        update_threads=update_threads, budgets=(max_iterations, max_env_steps),
        evaluator=build_evaluator(cfg, env, device, comm.is_main),
    )


def build_evaluator(cfg: DictConfig, env: Any, device: Optional[str] = None, main: bool = True) -> Evaluator:
    """The run's evaluation on envs of its own. Rank 0 evaluates for the run. Not on Isaac Gym: it allows one
    simulation per process ("Foundation object exists already. Only one instance per process can be created":
    IsaacGymEnvs issue 145, legged_gym issue 46), so its eval envs would have to live in the training sim or in
    another process."""
    evaluates = main and (cfg.eval.interval_env_steps > 0 or cfg.eval.final) and "isaacgym" not in type(env).__module__
    seed = cfg.seed + EVAL_SEED_OFFSET
    eval_env = _make_env(cfg, cfg.eval.num_envs, seed, device, evaluation=True) if evaluates else None
    thresholds = tuple(cfg.task.get("solve_thresholds") or ())
    measures = {name: tuple(values) for name, values in (cfg.task.get("solve_measures") or {}).items()}
    return Evaluator(eval_env, cfg.eval.interval_env_steps, cfg.eval.final, cfg.eval.stochastic, seed, thresholds,
                     measures)
