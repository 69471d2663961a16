"""Actor-critic for continuous actions: Gaussian policy with a state-independent log-std.

With ``separate=False`` actor and critic share one MLP trunk (rl-games' default for IsaacGymEnvs); with
``separate=True`` each has its own MLP of the same sizes. Observation and value normalisers live here, so
a checkpoint of the model carries them.
"""
from __future__ import annotations

import math
from typing import List, Tuple

import torch
from torch import nn

from isaac_ppo.agent.normalize import RunningMeanStd

ACTIVATIONS = {"elu": nn.ELU, "relu": nn.ReLU, "tanh": nn.Tanh, "selu": nn.SELU}


def mlp(sizes: List[int], activation: str) -> nn.Sequential:
    layers: List[nn.Module] = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(n_in, n_out), ACTIVATIONS[activation]()]
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    def __init__(
        self,
        num_obs: int,
        num_actions: int,
        hidden: List[int],
        activation: str = "elu",
        separate: bool = False,
        init_log_std: float = 0.0,
        normalize_input: bool = True,
        normalize_value: bool = True,
    ):
        super().__init__()
        self.separate = separate
        self.actor_body = mlp([num_obs] + list(hidden), activation)
        self.critic_body = mlp([num_obs] + list(hidden), activation) if separate else None
        self.mu = nn.Linear(hidden[-1], num_actions)
        self.value = nn.Linear(hidden[-1], 1)
        self.log_std = nn.Parameter(torch.full((num_actions,), float(init_log_std)))
        self.obs_norm = RunningMeanStd((num_obs,)) if normalize_input else None
        # normalised value targets are not clipped (rl-games clips them at +-5 as well)
        self.value_norm = RunningMeanStd((1,), clip=math.inf) if normalize_value else None

    def normalize_obs(self, obs: torch.Tensor) -> torch.Tensor:
        return self.obs_norm.normalize(obs) if self.obs_norm is not None else obs

    def forward(self, obs: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(mu, log_std, value) for raw observations; value in the normalised space when normalize_value."""
        x = self.normalize_obs(obs)
        actor_features = self.actor_body(x)
        critic_features = self.critic_body(x) if self.critic_body is not None else actor_features
        mu = self.mu(actor_features)
        return mu, self.log_std.expand_as(mu), self.value(critic_features).squeeze(-1)

    def denormalize_value(self, value: torch.Tensor) -> torch.Tensor:
        if self.value_norm is None:
            return value
        return self.value_norm.denormalize(value.unsqueeze(-1)).squeeze(-1)

    def normalize_value(self, value: torch.Tensor) -> torch.Tensor:
        if self.value_norm is None:
            return value
        return self.value_norm.normalize(value.unsqueeze(-1)).squeeze(-1)


def gaussian_log_prob(actions: torch.Tensor, mu: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Log-density of actions under a diagonal Gaussian, summed over action dimensions."""
    return (-0.5 * ((actions - mu) / log_std.exp()).pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    return (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)


def gaussian_kl(mu_old, log_std_old, mu_new, log_std_new) -> torch.Tensor:
    """KL(old || new) of diagonal Gaussians, summed over action dimensions."""
    var_old, var_new = (2 * log_std_old).exp(), (2 * log_std_new).exp()
    return (log_std_new - log_std_old + (var_old + (mu_old - mu_new).pow(2)) / (2 * var_new) - 0.5).sum(-1)
