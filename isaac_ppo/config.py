"""Structured schemas for the composed config, and their validation as one-line errors.

Hydra's struct mode already refuses keys that are not in the tree; these schemas add types and allowed
values for the top level and the agent node. The task node is the task's own (IsaacGymEnvs keys).
"""
from __future__ import annotations

import dataclasses
from typing import Any, List, Optional, Tuple

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from isaac_ppo.errors import UserError


@dataclasses.dataclass
class NetworkSchema:
    hidden: List[int] = dataclasses.field(default_factory=lambda: [256, 128, 64])
    activation: str = "elu"
    separate: bool = False
    init_log_std: float = 0.0


@dataclasses.dataclass
class AgentSchema:
    name: str = "PPO"
    backend: str = "isaac_ppo"  # isaac_ppo | rl_games (the same values trained by rl-games: isaac_ppo/rlgames.py)
    network: NetworkSchema = dataclasses.field(default_factory=NetworkSchema)
    horizon: int = 16
    minibatch_size: int = 32768
    mini_epochs: int = 4
    learning_rate: float = 3e-4
    lr_schedule: str = "adaptive"
    kl_threshold: float = 0.008
    gamma: float = 0.99
    lam: float = 0.95
    clip: float = 0.2
    clip_value: bool = True
    critic_coef: float = 2.0
    entropy_coef: float = 0.0
    bounds_loss_coef: float = 0.0001
    truncate_grads: bool = False
    grad_norm: float = 1.0
    reward_scale: float = 1.0
    normalize_input: bool = True
    normalize_value: bool = True
    normalize_advantage: bool = True
    mixed_precision: bool = True
    stale_clip: str = "behaviour"
    max_epochs: int = 500


@dataclasses.dataclass
class DiagnosticsSchema:
    enabled: bool = True
    interval: int = 10
    samples: int = 2048
    delta: float = 0.01
    tau: float = 0.025
    grid: int = 20
    coverage: bool = False
    coverage_method: str = "pca"
    variants: bool = False
    plot: bool = True


@dataclasses.dataclass
class TopSchema:
    experiment: str = ""
    num_envs: Optional[int] = None
    seed: int = 42
    max_iterations: Optional[int] = None
    max_env_steps: Optional[int] = None
    sim: str = "auto"
    device: str = "cpu"
    headless: bool = True
    test: bool = False
    checkpoint: str = ""
    resume: str = ""
    save_interval: int = 50
    play_episodes: int = 10
    capture_video: bool = False
    torch_threads: int = 2
    collect_torch_threads: int = 1
    runs_dir: str = "runs"
    multi_gpu: bool = False
    dist_backend: str = "auto"


CHOICES = {
    "sim": ("auto", "mujoco", "isaacgym"),
    "dist_backend": ("auto", "nccl", "gloo"),
    "agent.backend": ("isaac_ppo", "rl_games"),
    "agent.lr_schedule": ("adaptive", "linear", "constant"),
    "agent.stale_clip": ("behaviour", "proximal"),
    "diagnostics.coverage_method": ("pca", "umap"),
    "agent.network.activation": ("elu", "relu", "tanh", "selu"),
}
POSITIVE = ("agent.horizon", "agent.minibatch_size", "agent.mini_epochs", "save_interval", "play_episodes",
            "torch_threads", "collect_torch_threads", "max_iterations", "max_env_steps", "num_envs",
            "agent.max_epochs")


def validate(cfg: DictConfig) -> None:
    """Raise UserError naming the first key whose value has the wrong type or is out of range."""
    top = {k: cfg[k] for k in (f.name for f in dataclasses.fields(TopSchema)) if k in cfg}
    _merge(TopSchema, OmegaConf.create(top), "")
    _merge(AgentSchema, cfg.agent, "agent.")
    _merge(DiagnosticsSchema, cfg.diagnostics, "diagnostics.")
    for key, allowed in CHOICES.items():
        value = OmegaConf.select(cfg, key, default=allowed[0])  # absent (a user's own agent config): the default
        if value not in allowed:
            raise UserError(f"{key}={value!r} is not one of: {', '.join(allowed)}")
    if OmegaConf.select(cfg, "agent.backend", default="isaac_ppo") == "rl_games":
        from isaac_ppo.rlgames import check_config as check_rl_games  # (imports no rl-games)

        check_rl_games(cfg)
    for key in POSITIVE:
        value = OmegaConf.select(cfg, key)
        if value is not None and value < 1:
            raise UserError(f"{key}={value!r} must be a positive integer")
    for key in ("task.env.numEnvs", "task.env.episodeLength"):
        if not isinstance(OmegaConf.select(cfg, key), int):
            raise UserError(f"{key}={OmegaConf.select(cfg, key)!r} must be an integer")
    from isaac_ppo.diagnostics.probe import check_config

    check_config(cfg.diagnostics, list(cfg.agent.network.hidden))
    # every plan the scheduler can ask for, checked against the env pool before a run directory exists
    from isaac_ppo.scheduler.plan import build_scheduler, check_plans, pool_size

    scheduler = build_scheduler(cfg)
    max_iterations, max_env_steps = budgets(cfg)
    check_plans(scheduler, pool_size(cfg, scheduler, max_iterations, max_env_steps), max_iterations, max_env_steps)
    first = scheduler.plan(0, [])
    if max_env_steps is not None and first.batch_size > max_env_steps:
        raise UserError(f"max_env_steps={max_env_steps} is smaller than the first batch ({first.batch_size} env steps)")


def budgets(cfg: DictConfig) -> Tuple[Optional[int], Optional[int]]:
    """(max_iterations, max_env_steps). max_iterations null means agent.max_epochs, unless max_env_steps is
    set: then the env steps alone end the run."""
    max_env_steps = int(cfg.max_env_steps) if cfg.get("max_env_steps") is not None else None
    if cfg.max_iterations is not None:
        return int(cfg.max_iterations), max_env_steps
    return (None if max_env_steps is not None else int(cfg.agent.max_epochs)), max_env_steps


def _merge(schema: Any, node: Any, prefix: str) -> None:
    try:
        OmegaConf.merge(OmegaConf.structured(schema), node)
    except OmegaConfBaseException as error:
        key = prefix + str(getattr(error, "full_key", "") or "")
        first_line = str(error).splitlines()[0]
        raise UserError(f"config key {key}: {first_line}") from None
