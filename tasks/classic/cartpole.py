"""Cartpole: IsaacGymEnvs' task on MuJoCo (obs 4, act 1).

Obs: [cart position, cart velocity, pole angle, pole angular velocity].
Reward: 1 - angle^2 - 0.01 |cart vel| - 0.005 |pole vel|; -2 and terminal when |cart pos| > resetDist or
|pole angle| > pi/2. Reset: positions U(-0.1, 0.1), velocities U(-0.25, 0.25) for both joints.

`task.env.observeVelocities=false` (ours, not IsaacGymEnvs'): the observation is [cart position, pole angle]
alone (obs 2), a partially observed task: the velocities the reward and a balancing policy need must be inferred
from the history of positions, which a recurrent policy can and a feed-forward one cannot (the memory proof,
benchmarks/history/recurrent.md). Reward, terminations and resets are unchanged (computed from the state).
"""
from __future__ import annotations

import math
from typing import Any, Tuple

import torch

from isaac_ppo.domains import boolean, positive
from isaac_ppo.envs.registry import TaskSpec
from isaac_ppo.tasks.base import MujocoTask, Selection


class Cartpole(MujocoTask):
    # a motor's effort below 0 turns it around; a reset distance of 0 ends every episode at once
    spec = TaskSpec(
        name="Cartpole", model="assets/cartpole.xml",
        domains={"env.maxEffort": positive(), "env.resetDist": positive(), "env.observeVelocities": boolean()},
        reward_terms=("alive", "pole_angle", "cart_velocity", "pole_velocity", "death"),
    )  # (no contract facts: its observation is the state, drawn afresh at each reset)
    num_obs = 4
    num_actions = 1

    def configure_model(self, model: Any) -> None:
        model.actuator_gear[0, 0] = float(self.cfg["env"]["maxEffort"])

    def setup(self) -> None:
        self.reset_dist = float(self.cfg["env"]["resetDist"])
        self.observe_velocities = bool(self.cfg["env"].get("observeVelocities", True))
        self.num_obs = 4 if self.observe_velocities else 2

    def state(self, sel: Selection) -> torch.Tensor:
        """[cart position, cart velocity, pole angle, pole angular velocity] (IsaacGymEnvs' observation)."""
        qpos, qvel = self.qpos[sel], self.qvel[sel]
        return torch.stack((qpos[:, 0], qvel[:, 0], qpos[:, 1], qvel[:, 1]), dim=1).float()

    def compute_observations(self, sel: Selection) -> torch.Tensor:
        state = self.state(sel)
        return state if self.observe_velocities else state[:, 0::2]

    def compute_reward(self, obs: torch.Tensor, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        state = obs if self.observe_velocities else self.state(sel)
        reward, terminated = cartpole_reward(state, self.reset_dist)
        _, cart_vel, angle, pole_vel = state.unbind(dim=1)
        upright = (~terminated).to(reward.dtype)  # a terminal step's reward is -2 alone
        self.reward_terms = {
            "alive": upright, "pole_angle": -angle * angle * upright, "cart_velocity": -0.01 * cart_vel.abs() * upright,
            "pole_velocity": -0.005 * pole_vel.abs() * upright, "death": (1.0 - upright) * -2.0,
        }
        return reward, terminated

    def make_terminal(self, ids: Selection) -> None:
        """The cart at the edge, and leaving."""
        self.qpos[ids, 0] = 2.99
        self.qvel[ids, 0] = 5.0

    def reset_state(self, ids: torch.Tensor) -> None:
        k = ids.numel()
        on = self.sim_device
        pos = 0.2 * (torch.rand(k, 2, generator=self.generator, dtype=torch.float64, device=on) - 0.5)
        vel = 0.5 * (torch.rand(k, 2, generator=self.generator, dtype=torch.float64, device=on) - 0.5)
        self.qpos[ids] = pos.to(self.qpos.dtype)  # (float64 on mujoco.batch, float32 on MuJoCo Warp)
        self.qvel[ids] = vel.to(self.qvel.dtype)


def cartpole_reward(obs: torch.Tensor, reset_dist: float) -> Tuple[torch.Tensor, torch.Tensor]:
    cart_pos, cart_vel, angle, pole_vel = obs.unbind(dim=1)
    reward = 1.0 - angle * angle - 0.01 * cart_vel.abs() - 0.005 * pole_vel.abs()
    terminated = (cart_pos.abs() > reset_dist) | (angle.abs() > math.pi / 2)
    reward = torch.where(terminated, torch.full_like(reward, -2.0), reward)
    return reward, terminated
