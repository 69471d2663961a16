"""Humanoid: IsaacGymEnvs' task on MuJoCo (obs 108, act 21).

Obs: the locomotion head [0:12] (angular velocity * angularVelocityScale; yaw, roll and angle to target
wrapped to (-pi, pi]), [12:33] scaled dof positions, [33:54] dof velocities * dofVelocityScale,
[54:75] dof forces * contactForceScale, [75:87] the feet's force/torque sensors (right foot, then left)
* contactForceScale, [87:108] last actions.
The dof force is MuJoCo's qfrc_actuator, the actuation along each dof: the closest quantity to Isaac Gym's
dof force sensor. Like every derived field it describes the last substep.
Reward: progress + 2.0 alive + upright and heading terms - actionsCost sum(a^2)
- energyCost sum(|a dof_vel_obs| effort/max_effort) - sum over dofs with |scaled position| > 0.98 of
jointsAtLimitCost (|p| - 0.98) / 0.02 effort/max_effort; deathCost and terminal below terminationHeight.
"""
from __future__ import annotations

from typing import Tuple

import torch

from isaac_ppo.tasks.base import Selection
from isaac_ppo.tasks.locomotion.common import LocomotionTask


class Humanoid(LocomotionTask):
    asset = "humanoid.xml"
    num_obs = 108
    num_actions = 21
    derived_fields = ("sensordata", "qfrc_actuator")
    alive_reward = 2.0
    normalize_angles = True

    def tail_observations(self, sel: Selection) -> Tuple[torch.Tensor, ...]:
        scale = self.contact_force_scale
        return (
            self.derived["qfrc_actuator"][sel][:, 6:].float() * scale,
            self.derived["sensordata"][sel].float() * scale,
        )

    def joint_limit_cost(self, dof_pos_scaled: torch.Tensor) -> torch.Tensor:
        magnitude = dof_pos_scaled.abs()
        excess = self.joints_at_limit_cost * (magnitude - 0.98) / 0.02
        return ((magnitude > 0.98) * excess * self.motor_effort_ratio).sum(dim=1)
