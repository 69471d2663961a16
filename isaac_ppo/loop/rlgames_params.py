"""agent=rl_games: our agent config translated into rl-games' `params` tree (IsaacGymEnvs' cfg/train/<task>PPO.yaml
is the model), which isaac_ppo/loop/rlgames.py hands to rl_games.torch_runner.Runner. What is translated, fixed
and refused: docs/rl-games.md."""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

from isaac_ppo.errors import UserError
from isaac_ppo.scheduler.plan import agent_minibatch_size

ENV_NAME = "isaac_ppo"  # rl-games' env_configurations key (IsaacGymEnvs: rlgpu)


def max_epochs(cfg: Any, num_envs: int) -> int:
    """rl-games' max_epochs from our budgets: max_iterations, or the whole batches max_env_steps allows."""
    from isaac_ppo.config import budgets

    max_iterations, max_env_steps = budgets(cfg)
    limits = [] if max_iterations is None else [int(max_iterations)]
    if max_env_steps is not None:
        limits.append(int(max_env_steps) // (num_envs * cfg.agent.horizon))
    epochs = min(limits)
    if epochs < 1:
        batch = num_envs * cfg.agent.horizon
        raise UserError(f"max_env_steps={max_env_steps} is smaller than one batch ({batch} env steps)")
    return epochs


def build_params(cfg: Any, num_envs: int, run_dir: str, device: Optional[str] = None,
                 states: int = 0) -> Dict[str, Any]:
    """rl-games' `params` tree for cfg.agent (IsaacGymEnvs' cfg/train/<task>PPO.yaml is the model); device:
    the env's (its tensors are rl-games' observations), default cfg.device; states: the env's critic observation
    size (above 0: rl-games' central value trains the critic on it)."""
    agent, net = cfg.agent, cfg.agent.network
    device = str(device or cfg.device)
    run_dir = os.path.abspath(run_dir)
    schedule = agent.lr_schedule
    return {
        "seed": cfg.seed,
        "torch_threads": cfg.torch_threads,
        "algo": {"name": "a2c_continuous"},
        "model": {"name": "continuous_a2c_logstd"},
        "network": {
            "name": "actor_critic",
            "separate": net.separate,
            "space": {
                "continuous": {
                    "mu_activation": "None",
                    "sigma_activation": "None",
                    "mu_init": {"name": "default"},
                    "sigma_init": {"name": "const_initializer", "val": net.init_log_std},
                    "fixed_sigma": True,
                }
            },
            "mlp": mlp_params(net),
            **rnn_params(net.rnn),
        },
        "config": {
            "name": cfg.task.name,
            # rl-games writes <train_dir>/<full_experiment_name>/{nn,summaries}: the run directory itself
            "train_dir": os.path.dirname(run_dir),
            "full_experiment_name": os.path.basename(run_dir),
            "env_name": ENV_NAME,
            "device": device,
            "multi_gpu": False,
            "ppo": True,
            "mixed_precision": agent.mixed_precision and device.startswith("cuda"),
            "normalize_input": agent.normalize_input,
            "normalize_value": agent.normalize_value,
            "normalize_advantage": agent.normalize_advantage,
            "value_bootstrap": True,
            "num_actors": int(num_envs),
            "reward_shaper": {"scale_value": agent.reward_scale},
            "gamma": agent.gamma,
            "tau": agent.lam,
            "learning_rate": agent.learning_rate,
            "lr_schedule": None if schedule == "constant" else schedule,
            "schedule_type": agent.schedule_type,
            "kl_threshold": agent.kl_threshold,
            "score_to_win": float("inf"),
            "max_epochs": max_epochs(cfg, num_envs),
            "save_best_after": 0,
            "save_frequency": cfg.save_interval_iterations,
            "print_stats": False,
            "grad_norm": agent.grad_norm,
            "entropy_coef": agent.entropy_coef,
            "truncate_grads": agent.truncate_grads,
            "e_clip": agent.clip,
            "clip_value": agent.clip_value,
            "clip_actions": True,
            "horizon_length": agent.horizon,
            "minibatch_size": agent_minibatch_size(cfg, num_envs),
            "mini_epochs": agent.mini_epochs,
            "critic_coef": agent.critic_coef,
            "bounds_loss_coef": agent.bounds_loss_coef,
            "games_to_track": cfg.agent.games_to_track,
            "torch_compile": False,
            "seq_length": agent.seq_length,
            "zero_rnn_on_done": agent.zero_rnn_on_done,
            **({"central_value_config": central_value_config(cfg, num_envs)} if states else {}),
        },
    }


def mlp_params(net: Any, units: Any = None) -> Dict[str, Any]:
    """rl-games' MLP of cfg.agent.network's activation and sizes (the actor-critic's; units: the central value's)."""
    return {
        "units": [int(u) for u in (units if units is not None else net.hidden)],
        "activation": net.activation,
        "d2rl": False,
        "initializer": {"name": "default"},
        "regularizer": {"name": "None"},
    }


def central_value_config(cfg: Any, num_envs: int) -> Dict[str, Any]:
    """rl-games' central value (its critic over the env's critic observations, "states"), as IsaacGymEnvs' asymmetric
    train YAMLs give it (ShadowHandPPOAsymm.yaml): the agent's own minibatch, epochs, learning rate and schedule,
    and an MLP of agent.network.critic_hidden's sizes (null: the actor's). rl-games trains it apart from the actor,
    with its own optimizer."""
    agent, net = cfg.agent, cfg.agent.network
    schedule = agent.lr_schedule
    return {
        "minibatch_size": agent_minibatch_size(cfg, num_envs),
        "mini_epochs": agent.mini_epochs,
        "learning_rate": agent.learning_rate,
        "lr_schedule": None if schedule == "constant" else schedule,
        "schedule_type": agent.schedule_type,
        "kl_threshold": agent.kl_threshold,
        "clip_value": agent.clip_value,
        "normalize_input": agent.normalize_input,
        "truncate_grads": agent.truncate_grads,
        "network": {
            "name": "actor_critic",
            "central_value": True,
            "mlp": mlp_params(net, net.get("critic_hidden")),
            **rnn_params(net.critic_rnn if net.critic_rnn.name is not None else net.rnn),
        },
    }


def rnn_params(rnn: Any) -> Dict[str, Any]:
    """rl-games' network.rnn block from agent.network.rnn (or critic_rnn); {} for a feed-forward network."""
    if rnn.name is None:
        return {}
    return {"rnn": {"name": rnn.name, "units": int(rnn.units), "layers": int(rnn.layers),
                    "before_mlp": bool(rnn.before_mlp), "layer_norm": bool(rnn.layer_norm),
                    "concat_input": bool(rnn.concat_input)}}
