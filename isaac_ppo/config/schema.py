"""The shape of the composed config: typed dataclasses, and the merge whose result the code reads.

Defaults live in the YAML tree (cfg/), not here: a field without a default is required, so a key missing from
a user's own agent or diagnostics YAML is reported by name instead of surfacing later as an OmegaConf error.
The task node is the task's own (IsaacGymEnvs keys) and the scheduler node is its class's constructor
arguments: both stay free-form here and are checked by what reads them.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, List, Optional

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from isaac_ppo.errors import UserError


@dataclasses.dataclass
class NetworkConfig:
    hidden: List[int]
    activation: str
    separate: bool
    init_log_std: float
    critic_hidden: Optional[List[int]] = None  # a separate critic's own widths (null: the actor's)


@dataclasses.dataclass
class AgentConfig:
    network: NetworkConfig
    horizon: int
    minibatch_size: int
    mini_epochs: int
    learning_rate: float
    lr_schedule: str
    kl_threshold: float
    gamma: float
    lam: float
    clip: float
    clip_value: bool
    critic_coef: float
    entropy_coef: float
    bounds_loss_coef: float
    truncate_grads: bool
    grad_norm: float
    reward_scale: float
    normalize_input: bool
    normalize_value: bool
    normalize_advantage: bool
    mixed_precision: bool
    stale_clip: str
    max_epochs: int  # IsaacGymEnvs' name: PPO iterations (a batch collected and learned from), not epochs over a batch
    num_mini_batches: Optional[int] = None  # rsl_rl's form: given, the minibatch is the batch / this
    games_to_track: int = 100  # the training-return window: the last this many finished episodes (rl-games')
    name: str = "PPO"
    backend: str = "isaac_ppo"  # isaac_ppo | rl_games (the same values trained by rl-games: isaac_ppo/loop/rlgames.py)


@dataclasses.dataclass
class DiagnosticsConfig:
    enabled: bool
    interval_iterations: int
    samples: int
    delta: float
    tau: float
    grid: int
    coverage: bool
    coverage_method: str
    variants: bool
    plot: bool
    probe_set: str = ""


@dataclasses.dataclass
class EvalConfig:
    interval_env_steps: int
    num_envs: int
    final: bool
    stochastic: bool = False


@dataclasses.dataclass
class Config:
    task: Any
    agent: AgentConfig
    scheduler: Any
    diagnostics: DiagnosticsConfig
    eval: EvalConfig
    experiment: str
    num_envs: Optional[int]
    seed: int
    max_iterations: Optional[int]
    max_env_steps: Optional[int]
    sim: str
    device: str
    headless: bool
    test: bool
    checkpoint: str
    resume: str
    save_interval_iterations: int
    max_diverged_fraction: float
    play_episodes: int
    capture_video: bool
    save_probe_set: str
    torch_threads: int
    collect_torch_threads: int
    runs_dir: str
    multi_gpu: bool
    dist_backend: str
    # keys added since runs were first written carry their cfg/config.yaml default here too: a config.yaml from
    # before them resumes (config.resume_mismatch)
    capture_video_interval_iterations: int = 50
    capture_video_len: int = 200
    # IsaacGymEnvs' keys (config/isaacgymenvs.py)
    torch_deterministic: bool = False
    rl_device: Optional[str] = None
    sim_device: Optional[str] = None
    pipeline: Optional[str] = None
    graphics_device_id: Optional[int] = None
    force_render: bool = False
    # Weights & Biases, IsaacGymEnvs' keys (io/wandb_sink.py)
    wandb_activate: bool = False
    wandb_project: str = "isaac-ppo"
    wandb_entity: Optional[str] = ""
    wandb_group: str = ""
    wandb_name: str = ""
    wandb_tags: List[str] = dataclasses.field(default_factory=list)
    wandb_logcode_dir: str = ""
    wandb_logcode: bool = False
    # a machine profile (cfg/profile/): its values were composed in; the name records which
    profile: str = "none"
    # the critic also sees the task's critic observations (IsaacGymEnvs' env.asymmetric_observations and states)
    asymmetric: bool = False


_TEMPLATE: List[DictConfig] = []  # the schemas as one structured config, built once (merge copies it, never changes it)


def typed(resolved: Any) -> DictConfig:
    """The schemas' merge of a resolved config (types converted, every required key present), unchecked."""
    if not _TEMPLATE:  # (building it is a third of a merge's cost: the config fuzzer merges ~1,700 times)
        _TEMPLATE.append(OmegaConf.structured(Config))
    try:
        # unsafe_merge: the resolved tree's nodes are moved into the copy, not copied again (merge's second deep
        # copy; the fuzzer's loads take a fifth less). Safe here: the first input is our own fresh copy, and the
        # second is a plain container that unsafe_merge wraps first, so neither the template nor the caller's
        # tree is touched
        cfg = OmegaConf.unsafe_merge(copy.deepcopy(_TEMPLATE[0]), resolved)
    except OmegaConfBaseException as error:
        key = str(getattr(error, "full_key", "") or "")
        raise UserError(f"config key {key}: {str(error).splitlines()[0]}") from None
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise UserError(f"config key {missing[0]} is missing: set it in your YAML or on the command line "
                        f"({missing[0]}=...)")
    OmegaConf.set_readonly(cfg, True)  # read everywhere, changed nowhere: a run's config.yaml is what ran
    return cfg
