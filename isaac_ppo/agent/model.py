"""Actor-critic for continuous actions: Gaussian policy with a state-independent log-std.

With ``separate=False`` actor and critic share one MLP trunk (rl-games' default for IsaacGymEnvs); with
``separate=True`` each has its own MLP of the same sizes. Observation and value normalisers live here, so
a checkpoint of the model carries them.

Asymmetric observations (``num_states > 0``: IsaacGymEnvs' ``states``, rl-games' central value, Isaac Lab's critic
group): the critic is its own MLP (of the same sizes) over the env's critic observation, normalised by its own
``state_norm``; the actor sees the observation alone and nothing of the states. ``forward(obs)`` without states
then returns no value (None): the actor's callers (evaluation, play, video, export) need none.
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

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
        num_states: int = 0,
        critic_hidden: Optional[List[int]] = None,
    ):
        super().__init__()
        self.num_states = int(num_states)
        self.separate = separate or self.num_states > 0  # (a critic over other inputs cannot share the trunk)
        # a separate critic's widths: its own (IsaacGymEnvs' asymmetric central value) or the actor's
        critic_widths = list(critic_hidden) if critic_hidden and self.separate else list(hidden)
        self.actor_body = mlp([num_obs] + list(hidden), activation)
        critic_inputs = self.num_states or num_obs
        self.critic_body = mlp([critic_inputs] + critic_widths, activation) if self.separate else None
        self.mu = nn.Linear(hidden[-1], num_actions)
        self.value = nn.Linear(critic_widths[-1], 1)
        self.log_std = nn.Parameter(torch.full((num_actions,), float(init_log_std)))
        self.obs_norm = RunningMeanStd((num_obs,)) if normalize_input else None
        # normalised value targets are not clipped (rl-games clips them at +-5 as well)
        self.value_norm = RunningMeanStd((1,), clip=math.inf) if normalize_value else None
        # the critic observation's own normaliser (normalize_input covers both inputs, as rl-games' central value)
        self.state_norm = RunningMeanStd((self.num_states,)) if self.num_states and normalize_input else None

    def normalize_obs(self, obs: torch.Tensor) -> torch.Tensor:
        return self.obs_norm.normalize(obs) if self.obs_norm is not None else obs

    def normalize_states(self, states: torch.Tensor) -> torch.Tensor:
        return self.state_norm.normalize(states) if self.state_norm is not None else states

    def forward(self, obs: torch.Tensor,
                states: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """(mu, log_std, value) for raw observations (and, with num_states, the raw critic observations: without
        them the value is None); value in the normalised space when normalize_value."""
        x = self.normalize_obs(obs)
        actor_features = self.actor_body(x)
        mu = self.mu(actor_features)
        if self.num_states:
            value = None if states is None else self.value(self.critic_body(self.normalize_states(states))).squeeze(-1)
            return mu, self.log_std.expand_as(mu), value
        critic_features = self.critic_body(x) if self.critic_body is not None else actor_features
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
