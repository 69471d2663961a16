"""Actor-critic for continuous actions: Gaussian policy with a state-independent log-std.

With ``separate=False`` actor and critic share one MLP trunk (rl-games' default for IsaacGymEnvs); with
``separate=True`` each has its own MLP of the same sizes. Observation and value normalisers live here, so
a checkpoint of the model carries them.

Asymmetric observations (``num_states > 0``: IsaacGymEnvs' ``states``, rl-games' central value, Isaac Lab's critic
group): the critic is its own MLP (of the same sizes) over the env's critic observation, normalised by its own
``state_norm``; the actor sees the observation alone and nothing of the states. ``forward(obs)`` without states
then returns no value (None): the actor's callers (evaluation, play, video, export) need none.

Recurrent (``rnn``: rl-games' network.rnn block, agent/recurrent.py): an LSTM or GRU before the MLP
(``before_mlp``) or after it (its input the MLP's output, with the normalised observation beside it when
``concat_input``), its output layer-normed when ``layer_norm``. A shared trunk shares the recurrence; a separate
critic (symmetric, or over the critic observation) has its own, of ``critic_rnn``'s shape, else of the actor's
(rl-games' c_rnn, and the central value's rnn block in IsaacGymEnvs' recurrent asymmetric configs). A recurrent
model acts with ``step(obs, states, hidden)``, its state a row per env (``state_size`` floats; zeros at an
episode's start); ``step`` of a feed-forward model is its forward with the hidden state passed through.
"""
from __future__ import annotations

import math
from typing import Any, List, Mapping, Optional, Tuple

import torch
from torch import nn

from isaac_ppo.agent.normalize import RunningMeanStd
from isaac_ppo.agent.recurrent import Recurrence, recurrence

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
        rnn: Optional[Mapping[str, Any]] = None,
        critic_rnn: Optional[Mapping[str, Any]] = None,
        zero_rnn_on_done: bool = True,
    ):
        super().__init__()
        self.num_obs = int(num_obs)
        self.zero_on_done = bool(zero_rnn_on_done)  # (recurrent: every user of the state zeroes it at an episode's end)
        self.num_states = int(num_states)
        self.separate = separate or self.num_states > 0  # (a critic over other inputs cannot share the trunk)
        # a separate critic's widths: its own (IsaacGymEnvs' asymmetric central value) or the actor's
        critic_widths = list(critic_hidden) if critic_hidden and self.separate else list(hidden)
        self.actor_rnn, actor_features = _recurrent_body(self, "actor", num_obs, list(hidden), activation, rnn)
        critic_inputs = self.num_states or num_obs
        self.critic_rnn, critic_features = None, actor_features
        if self.separate:
            self.critic_rnn, critic_features = _recurrent_body(self, "critic", critic_inputs, critic_widths,
                                                               activation, (critic_rnn or rnn) if rnn else None)
        else:
            self.critic_body = None
        self.recurrent = self.actor_rnn is not None
        self.actor_state = self.actor_rnn.state_size if self.recurrent else 0
        self.state_size = self.actor_state + (self.critic_rnn.state_size if self.critic_rnn is not None else 0)
        self.mu = nn.Linear(actor_features, num_actions)
        self.value = nn.Linear(critic_features, 1)
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
        them the value is None); value in the normalised space when normalize_value. Feed-forward models only: a
        recurrent one acts with step()."""
        if self.recurrent:
            raise TypeError("a recurrent ActorCritic acts with step(obs, states, hidden): it needs its state")
        x = self.normalize_obs(obs)
        actor_features = self.actor_body(x)
        mu = self.mu(actor_features)
        if self.num_states:
            value = None if states is None else self.value(self.critic_body(self.normalize_states(states))).squeeze(-1)
            return mu, self.log_std.expand_as(mu), value
        critic_features = self.critic_body(x) if self.critic_body is not None else actor_features
        return mu, self.log_std.expand_as(mu), self.value(critic_features).squeeze(-1)

    def initial_state(self, envs: int, device: Any = None) -> Optional[torch.Tensor]:
        """The state at an episode's start for `envs` envs (zeros); None for a feed-forward model."""
        if not self.recurrent:
            return None
        return torch.zeros(envs, self.state_size, device=device if device is not None else self.log_std.device)

    def step(self, obs: torch.Tensor, states: Optional[torch.Tensor] = None, hidden: Optional[torch.Tensor] = None
             ) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
        """(mu, log_std, value, next hidden) of one step; a feed-forward model's forward, hidden passed through.
        Without critic observations (num_states > 0) the critic is not run: value None, its state unchanged."""
        if not self.recurrent:
            return self(obs) + (hidden,) if states is None else self(obs, states) + (hidden,)
        x = self.normalize_obs(obs)
        actor_features, actor_next = _run(self.actor_body, self.actor_rnn, x, hidden[:, :self.actor_state])
        mu = self.mu(actor_features)
        log_std = self.log_std.expand_as(mu)
        if self.critic_body is None:  # the shared trunk
            return mu, log_std, self.value(actor_features).squeeze(-1), actor_next
        critic_in = x if not self.num_states else (None if states is None else self.normalize_states(states))
        critic_state = hidden[:, self.actor_state:]
        if critic_in is None:  # (the actor alone: evaluation, play, export)
            return mu, log_std, None, torch.cat((actor_next, critic_state), dim=1)
        if self.critic_rnn is None:
            critic_features, critic_next = self.critic_body(critic_in), critic_state
        else:
            critic_features, critic_next = _run(self.critic_body, self.critic_rnn, critic_in,
                                                critic_state)
        return mu, log_std, self.value(critic_features).squeeze(-1), torch.cat((actor_next, critic_next), dim=1)

    def denormalize_value(self, value: torch.Tensor) -> torch.Tensor:
        if self.value_norm is None:
            return value
        return self.value_norm.denormalize(value.unsqueeze(-1)).squeeze(-1)

    def normalize_value(self, value: torch.Tensor) -> torch.Tensor:
        if self.value_norm is None:
            return value
        return self.value_norm.normalize(value.unsqueeze(-1)).squeeze(-1)


def _recurrent_body(model: nn.Module, role: str, inputs: int, widths: List[int], activation: str,
                    rnn: Optional[Mapping[str, Any]]) -> Tuple[Optional[Recurrence], int]:
    """Set model.<role>_body (the MLP) and make <role>'s recurrence (None without rnn); (it, the features'
    width that the head reads)."""
    if not rnn:
        setattr(model, f"{role}_body", mlp([inputs] + widths, activation))
        return None, widths[-1]
    units, layers, norm = int(rnn["units"]), int(rnn.get("layers", 1)), bool(rnn.get("layer_norm", False))
    if rnn.get("before_mlp", False):  # observation -> rnn -> MLP -> head
        setattr(model, f"{role}_body", mlp([units] + widths, activation))
        return recurrence(rnn["name"], inputs, units, layers, norm, before_mlp=True), widths[-1]
    # observation -> MLP -> rnn (over the MLP's output, and the observation beside it with concat_input) -> head
    setattr(model, f"{role}_body", mlp([inputs] + widths, activation))
    concat = bool(rnn.get("concat_input", False))
    return recurrence(rnn["name"], widths[-1] + (inputs if concat else 0), units, layers, norm,
                      concat_input=concat), units


def _run(body: nn.Module, recurrence: Recurrence, x: torch.Tensor,
         state: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """One network's features and next state for one step of (normalised) input x."""
    if recurrence.before_mlp:
        out, state = recurrence(x, state)
        return body(out), state
    features = body(x)
    if recurrence.concat_input:
        features = torch.cat((features, x), dim=1)
    return recurrence(features, state)


def gaussian_log_prob(actions: torch.Tensor, mu: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Log-density of actions under a diagonal Gaussian, summed over action dimensions."""
    return (-0.5 * ((actions - mu) / log_std.exp()).pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    return (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)


def gaussian_kl(mu_old, log_std_old, mu_new, log_std_new) -> torch.Tensor:
    """KL(old || new) of diagonal Gaussians, summed over action dimensions."""
    var_old, var_new = (2 * log_std_old).exp(), (2 * log_std_new).exp()
    return (log_std_new - log_std_old + (var_old + (mu_old - mu_new).pow(2)) / (2 * var_new) - 0.5).sum(-1)
