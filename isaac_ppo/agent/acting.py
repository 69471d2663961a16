"""A policy acting on a pool of envs, with the state a recurrent model carries from step to step.

Evaluation, play, the training videos and the gait check step envs with a model's actions; a recurrent model
(agent/model.py) needs its state per env, zeros at the first step and zeroed where an episode ended. Acting holds
it, so those callers step any model the same way: `actions = policy(obs)`, then `ended(policy, resets)`.
"""
from __future__ import annotations

from typing import Any, Optional

import torch


class Acting:
    """A model's actions over a pool of envs: its mean, or (generator given) mean + std * noise as training samples
    them, the noise from `generator`. A recurrent model (agent/model.py) carries its state per env here, zeros at
    the first call and zeroed where an episode ended (episodes_ended, called after each env step with the resets).
    `model` is anything called on observations that returns (mean, log_std, ...): our ActorCritic, or rl-games'
    network seen through isaac_ppo.loop.rlgames."""

    def __init__(self, model: Any, generator: Optional[torch.Generator] = None):
        self.model, self.generator = model, generator
        self.recurrent = bool(getattr(model, "recurrent", False))
        self.hidden: Optional[torch.Tensor] = None

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        if self.recurrent:
            if self.hidden is None or self.hidden.shape[0] != obs.shape[0]:
                self.hidden = self.model.initial_state(obs.shape[0], obs.device)
            mu, log_std, _, self.hidden = self.model.step(obs, None, self.hidden)
        else:
            mu, log_std = self.model(obs)[:2]
        if self.generator is None:
            return mu
        noise = torch.randn(mu.shape, generator=self.generator, device=mu.device, dtype=mu.dtype)
        return mu + log_std.exp() * noise

    def episodes_ended(self, resets: torch.Tensor) -> None:
        if self.hidden is not None and getattr(self.model, "zero_on_done", True):
            self.hidden = self.hidden * (~resets.bool()).to(self.hidden.dtype).unsqueeze(-1)


def ended(policy: Any, resets: torch.Tensor) -> None:
    """Tell a policy which envs' episodes just ended (a recurrent one zeroes their state; a plain function of the
    observation has nothing to do)."""
    hook = getattr(policy, "episodes_ended", None)
    if hook is not None:
        hook(resets)
