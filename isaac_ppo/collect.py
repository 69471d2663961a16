"""Executes a Plan: steps the active envs for rollout_length steps with the current policy.

The synchronous collector; the scheduler issue adds the concurrent (double-buffered) one beside it.
Observations are checked for non-finite values once per batch (one host sync), not per step.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch

from isaac_ppo.agent.model import ActorCritic, gaussian_log_prob
from isaac_ppo.agent.rollout import RolloutBuffer
from isaac_ppo.envs.contract import nonfinite_rows, supports_active
from isaac_ppo.envs.episodes import EpisodeTracker
from isaac_ppo.errors import UserError
from isaac_ppo.scheduler.plan import Plan


class NonFiniteError(UserError):
    """Training met a NaN or an infinity; the message names the quantity (and env ids for observations)."""


class SyncCollector:
    def __init__(self, env: Any, model: ActorCritic, gamma: float, reward_scale: float, generator: torch.Generator):
        self.env = env
        self.model = model
        self.gamma = gamma
        self.reward_scale = reward_scale
        self.generator = generator
        self.device = torch.device(env.device)
        self.tracker = EpisodeTracker(env.num_envs, self.device)
        self.buffer: Optional[RolloutBuffer] = None
        self.obs: Optional[torch.Tensor] = None  # the active envs' current observations

    def reset(self) -> None:
        self.obs = self.env.reset()["obs"]

    @torch.no_grad()
    def collect(self, plan: Plan) -> Tuple[RolloutBuffer, Dict[str, Any]]:
        env, model = self.env, self.model
        if self.obs is None:
            self.reset()
        if self.obs.shape[0] != plan.num_envs:
            if not supports_active(env):
                raise UserError(f"this env cannot change its active envs (num_envs={plan.num_envs})")
            self.obs = env.set_active(plan.num_envs)["obs"]
        if self.buffer is None or not self.buffer.fits(plan.rollout_length, plan.num_envs):
            self.buffer = RolloutBuffer(plan.rollout_length, plan.num_envs, env.num_obs, env.num_actions, self.device)
        buf = self.buffer
        diverged = 0
        obs = self.obs
        for t in range(plan.rollout_length):
            mu, log_std, value = model(obs)
            noise = torch.randn(mu.shape, generator=self.generator, device=mu.device, dtype=mu.dtype)
            actions = mu + log_std.exp() * noise
            buf.obs[t] = obs
            buf.actions[t] = actions
            buf.mu[t] = mu
            buf.log_probs[t] = gaussian_log_prob(actions, mu, log_std)
            buf.values[t] = model.denormalize_value(value)
            obs_dict, rewards, resets, extras = env.step(actions)
            self.tracker.update(rewards, resets)
            time_outs = extras["time_outs"]
            final_obs = extras.get("final_obs", obs_dict["obs"])
            # a truncated episode would have gone on: bootstrap its value from the observation that ended it
            bootstrap = self.gamma * self._time_out_values(final_obs, time_outs)
            buf.rewards[t] = rewards * self.reward_scale + bootstrap
            buf.dones[t] = resets.to(buf.dones.dtype)
            diverged += extras.get("diverged", 0)
            obs = obs_dict["obs"]
        self.obs = obs
        self._check_finite(buf, obs)
        last_values = model.denormalize_value(model(obs)[2])
        return buf, {"last_values": last_values, "diverged": diverged}

    def _time_out_values(self, final_obs: torch.Tensor, time_outs: torch.Tensor) -> torch.Tensor:
        values = torch.zeros(time_outs.shape, device=final_obs.device)
        if final_obs.device.type == "cpu":
            ids = time_outs.nonzero().flatten()  # usually none: evaluate the critic on those rows only
            if ids.numel():
                values[ids] = self.model.denormalize_value(self.model(final_obs[ids])[2])
            return values
        # on a GPU a masked evaluation would sync every step: evaluate all rows instead
        return self.model.denormalize_value(self.model(final_obs)[2]) * time_outs

    def _check_finite(self, buf: RolloutBuffer, last_obs: torch.Tensor) -> None:
        """The batch's observations (and the one after it), then its rewards; env ids named for observations."""
        steps, envs = buf.rollout_length, buf.num_envs
        bad = torch.cat((nonfinite_rows(buf.obs.view(steps * envs, -1)) % envs, nonfinite_rows(last_obs)))
        if bad.numel():
            ids = sorted(set(bad.tolist()))
            shown = ", ".join(str(i) for i in ids[:10]) + (", ..." if len(ids) > 10 else "")
            raise NonFiniteError(f"non-finite observation from env ids {shown}: training stopped")
        if nonfinite_rows(buf.rewards.view(-1, 1)).numel():
            raise NonFiniteError(
                "non-finite reward (env reward times agent.reward_scale, or a time-out's bootstrapped value): "
                "training stopped"
            )
