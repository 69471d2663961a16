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
from isaac_ppo.envs.registry import ContractFacts, Gait, TaskSpec
from isaac_ppo.tasks.locomotion.common import LOCOMOTION_DOMAINS, LOCOMOTION_REWARD_TERMS, LocomotionTask


class Ant(LocomotionTask):
    spec = TaskSpec(name="Ant", model="assets/ant.xml", domains=LOCOMOTION_DOMAINS,
                    reward_terms=LOCOMOTION_REWARD_TERMS, gait=Gait("torso_speed"),
                    contract=ContractFacts(last_actions_in_obs=True, reset_column=0),  # (0: the start height)
                    actors={"ant": "torso"})
    num_obs = 60
    num_actions = 8
    alive_reward = 0.5
    normalize_angles = False

    def make_terminal(self, ids: Selection) -> None:
        """The torso below the termination height (0.31 m), as in a fall."""
        self.qpos[ids, 2] = 0.2

    def tail_observations(self, sel: Selection) -> Tuple[torch.Tensor, ...]:
        return (self.derived["sensordata"][sel].float() * self.contact_force_scale,)

    def joint_limit_cost(self, dof_pos_scaled: torch.Tensor) -> torch.Tensor:
        # IsaacGymEnvs counts the upper side only (scaled position > 0.99)
        return self.joints_at_limit_cost * (dof_pos_scaled > 0.99).sum(dim=1).float()
