"""The rollout buffer, sized by the plan, and GAE(lambda) over it; for a recurrent model also the state at each
chunk's start and the batch cut into chunks (agent/recurrent.py)."""
from __future__ import annotations

from typing import Dict, Optional

import torch

from isaac_ppo.agent.recurrent import chunk_count, sequence_batch


class RolloutBuffer:
    """Time-major storage of one batch: (rollout_length, num_envs, ...); with num_states, the critic's
    observations beside the actor's (None without). With state_size (a recurrent model's state per env), the
    state at the start of each chunk of seq_length steps: hidden (chunks, num_envs, state_size)."""

    def __init__(self, rollout_length: int, num_envs: int, num_obs: int, num_actions: int, device: torch.device,
                 num_states: int = 0, state_size: int = 0, seq_length: int = 1, zero_on_done: bool = True):
        shape = (rollout_length, num_envs)
        self.rollout_length, self.num_envs = rollout_length, num_envs
        self.obs = torch.zeros(*shape, num_obs, device=device)
        self.states: Optional[torch.Tensor] = torch.zeros(*shape, num_states, device=device) if num_states else None
        self.actions = torch.zeros(*shape, num_actions, device=device)
        self.log_probs = torch.zeros(*shape, device=device)
        self.mu = torch.zeros(*shape, num_actions, device=device)
        self.log_std = torch.zeros(num_actions, device=device)  # the behaviour policy's (state-independent)
        self.values = torch.zeros(*shape, device=device)  # in reward units (denormalised)
        self.rewards = torch.zeros(*shape, device=device)  # scaled, time-outs already bootstrapped
        self.dones = torch.zeros(*shape, device=device)  # the transition ended its episode
        self.advantages = torch.zeros(*shape, device=device)
        self.returns = torch.zeros(*shape, device=device)
        self.last_values = torch.zeros(num_envs, device=device)  # the bootstrap past the last step
        self.seq_length, self.zero_on_done = seq_length, zero_on_done
        self.hidden: Optional[torch.Tensor] = torch.zeros(
            chunk_count(rollout_length, seq_length), num_envs, state_size, device=device) if state_size else None

    def fits(self, rollout_length: int, num_envs: int) -> bool:
        return (self.rollout_length, self.num_envs) == (rollout_length, num_envs)

    def sequences(self, flat: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Flat (rollout_length * num_envs, ...) tensors of this batch as chunks (agent/recurrent.py,
        sequence_batch): (seq_length, chunks * num_envs, ...), with the chunks' starting states, the steps where
        the state is zeroed and the padding's mask."""
        shaped = {name: value.view(self.rollout_length, self.num_envs, *value.shape[1:])
                  for name, value in flat.items()}
        return sequence_batch(shaped, self.hidden, self.dones, self.seq_length, self.zero_on_done)

    @property
    def num_states(self) -> int:
        return 0 if self.states is None else int(self.states.shape[-1])

    def compute_gae(self, last_values: torch.Tensor, gamma: float, lam: float) -> None:
        self.last_values = last_values  # (a stale batch's V-trace bootstraps from it too: agent/stale.py)
        advantage = torch.zeros_like(last_values)
        next_values = last_values
        for t in reversed(range(self.rollout_length)):
            not_done = 1.0 - self.dones[t]
            delta = self.rewards[t] + gamma * next_values * not_done - self.values[t]
            advantage = delta + gamma * lam * not_done * advantage
            self.advantages[t] = advantage
            next_values = self.values[t]
        self.returns.copy_(self.advantages + self.values)

    def flat(self) -> Dict[str, torch.Tensor]:
        """The batch as (rollout_length * num_envs, ...) views."""
        n = self.rollout_length * self.num_envs
        flat = {
            "obs": self.obs.view(n, -1),
            "actions": self.actions.view(n, -1),
            "log_probs": self.log_probs.view(n),
            "mu": self.mu.view(n, -1),
            "values": self.values.view(n),
            "advantages": self.advantages.view(n),
            "returns": self.returns.view(n),
        }
        if self.states is not None:
            flat["states"] = self.states.view(n, -1)
        return flat
