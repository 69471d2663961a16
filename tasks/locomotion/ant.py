"""Ant: IsaacGymEnvs' task on MuJoCo (obs 60, act 8).

Obs: the locomotion head [0:12] (yaw and roll wrapped to [0, 2 pi)), [12:20] scaled dof positions,
[20:28] dof velocities * dofVelocityScale, [28:52] the four feet's force/torque sensors (front_left,
front_right, left_back, right_back; force xyz then torque xyz in the foot frame) * contactForceScale,
[52:60] last actions.
Reward: progress + 0.5 alive + upright and heading terms - actionsCost sum(a^2) - energyCost sum(|a dof_vel_obs|)
- jointsAtLimitCost * (number of dofs with scaled position > 0.99); deathCost and terminal when the torso is
below terminationHeight.
"""
from __future__ import annotations

from typing import Tuple

import torch

from isaac_ppo.tasks.base import Selection
from isaac_ppo.tasks.locomotion.common import LocomotionTask


class Ant(LocomotionTask):
    asset = "ant.xml"
    num_obs = 60
    num_actions = 8
    alive_reward = 0.5
    normalize_angles = False

    def tail_observations(self, sel: Selection) -> Tuple[torch.Tensor, ...]:
        return (self.derived["sensordata"][sel].float() * self.contact_force_scale,)

    def joint_limit_cost(self, dof_pos_scaled: torch.Tensor) -> torch.Tensor:
        # IsaacGymEnvs counts the upper side only (scaled position > 0.99)
        return self.joints_at_limit_cost * (dof_pos_scaled > 0.99).sum(dim=1).float()
