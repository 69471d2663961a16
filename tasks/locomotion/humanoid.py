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
from isaac_ppo.envs.registry import ContractFacts, Gait, TaskSpec
from isaac_ppo.tasks.locomotion.common import LOCOMOTION_DOMAINS, LOCOMOTION_REWARD_TERMS, LocomotionTask


class Humanoid(LocomotionTask):
    spec = TaskSpec(name="Humanoid", model="assets/humanoid.xml", domains=LOCOMOTION_DOMAINS,
                    reward_terms=LOCOMOTION_REWARD_TERMS, gait=Gait("torso_speed"),
                    contract=ContractFacts(last_actions_in_obs=True, reset_column=0),  # (0: the start height)
                    actors={"humanoid": "torso"})
    num_obs = 108
    num_actions = 21
    derived_fields = ("sensordata", "qfrc_actuator")
    alive_reward = 2.0
    normalize_angles = True

    def make_terminal(self, ids: Selection) -> None:
        """Lying on its back, torso at 0.2 m (termination height 0.8 m). (Upright at 0.5 m, its legs deep in the
        floor, it sprang back to 0.756 m in one step here and past 0.8 m on the GPU.)"""
        self.qpos[ids, 2] = 0.2
        self.qpos[ids, 3:7] = torch.tensor([0.5 ** 0.5, 0.0, 0.5 ** 0.5, 0.0], dtype=self.qpos.dtype,
                                           device=self.qpos.device)

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
