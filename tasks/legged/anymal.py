"""Anymal: IsaacGymEnvs' task on MuJoCo (obs 48, act 12): ANYmal C on flat ground follows a velocity command.

Obs (IsaacGymEnvs' order): [0:3] base linear velocity in the base frame x linearVelocityScale, [3:6] base angular
velocity in the base frame x angularVelocityScale, [6:9] projected gravity (quat_rotate, as IsaacGymEnvs' anymal.py:
see common.py), [9:12] the command (vx, vy, yaw rate) x (linearVelocityScale, linearVelocityScale,
angularVelocityScale), [12:24] joint positions minus the default angles x dofPositionScale, [24:36] joint velocities
x dofVelocityScale, [36:48] last actions. Joints in Isaac Gym's order: LF, LH, RF, RH x HAA, HFE, KFE.
Act: joint position targets, default angle + actionScale x action (common.py).
Reward, each scale multiplied by dt: linearVelocityXYRewardScale exp(-|v_xy command - v_xy|^2 / 0.25)
+ angularVelocityZRewardScale exp(-(yaw rate command - yaw rate)^2 / 0.25) + torqueRewardScale sum(torque^2),
clipped at 0 from below. Terminal when the base or a thigh has a net contact force above 1 N; a time-out after
episodeLength_s / dt control steps (2500).
"""
from __future__ import annotations

import math
from typing import Tuple

import torch

from isaac_ppo.tasks.base import Selection
from isaac_ppo.domains import real
from isaac_ppo.envs.registry import ContractFacts, Gait, TaskSpec
from isaac_ppo.tasks.legged.common import (CONTACT_THRESHOLD, VELOCITY_COMMAND_DOMAINS, LeggedTask,
                                           projected_gravity)

LEGS = ("LF", "LH", "RF", "RH")  # Isaac Gym's order of the ANYmal's legs (and so of its degrees of freedom)
JOINTS = ("HAA", "HFE", "KFE")  # hip abduction/adduction, hip flexion/extension, knee flexion/extension
# the legged tasks' parameters and each default joint angle (an angle)
ANYMAL_DOMAINS = dict(VELOCITY_COMMAND_DOMAINS, **{f"env.defaultJointAngles.{leg}_{joint}": real(-math.pi, math.pi)
                                                   for leg in LEGS for joint in JOINTS})

TRACKING_SIGMA = 0.25  # (m/s)^2 and (rad/s)^2: the width of IsaacGymEnvs' exp(-error / 0.25) tracking kernels
TERMINATING_BODIES = ("base",) + tuple(f"{leg}_THIGH" for leg in LEGS)  # IsaacGymEnvs: the base and the "knees"


class Anymal(LeggedTask):
    spec = TaskSpec(
        name="Anymal", model="assets/anymal.xml", domains=ANYMAL_DOMAINS,
        reward_terms=("lin_vel_xy", "ang_vel_z", "torque", "clip"),  # (no death cost: a fall just ends the episode)
        gait=Gait("velocity_tracking"),
        actors={"anymal": "base"},
        contract=ContractFacts(last_actions_in_obs=True, reset_column=0),  # (0: x velocity, 0 at a start)
    )
    num_obs = 48
    num_actions = 12

    def setup(self) -> None:
        super().setup()
        learn = self.cfg["env"]["learn"]
        self.lin_vel_scale = float(learn["linearVelocityScale"])
        self.ang_vel_scale = float(learn["angularVelocityScale"])
        self.dof_pos_scale = float(learn["dofPositionScale"])
        self.dof_vel_scale = float(learn["dofVelocityScale"])
        self.command_scale = torch.tensor([self.lin_vel_scale, self.lin_vel_scale, self.ang_vel_scale],
                                          device=self.sim_device)
        # IsaacGymEnvs multiplies each reward scale by dt once, at start
        self.lin_vel_weight = float(learn["linearVelocityXYRewardScale"]) * self.dt
        self.ang_vel_weight = float(learn["angularVelocityZRewardScale"]) * self.dt
        self.torque_weight = float(learn["torqueRewardScale"]) * self.dt

    def compute_observations(self, sel: Selection) -> torch.Tensor:
        lin_vel, ang_vel = self.base_velocities(sel)
        quat = self.qpos[sel][:, 3:7].float()
        dof_pos = self.qpos[sel][:, 7:].float()
        dof_vel = self.qvel[sel][:, 6:].float()
        return torch.cat((
            lin_vel * self.lin_vel_scale,
            ang_vel * self.ang_vel_scale,
            projected_gravity(quat, self.gravity, inverse=False),
            self.commands[sel] * self.command_scale,
            (dof_pos - self.default_dof_pos) * self.dof_pos_scale,
            dof_vel * self.dof_vel_scale,
            self.last_actions[sel],
        ), dim=1)

    def compute_reward(self, obs: torch.Tensor, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        lin_vel, ang_vel = self.base_velocities(sel)
        commands = self.commands[sel]
        lin_vel_error = ((commands[:, :2] - lin_vel[:, :2]) ** 2).sum(dim=1)
        ang_vel_error = (commands[:, 2] - ang_vel[:, 2]) ** 2
        lin_vel_xy = torch.exp(-lin_vel_error / TRACKING_SIGMA) * self.lin_vel_weight
        ang_vel_z = torch.exp(-ang_vel_error / TRACKING_SIGMA) * self.ang_vel_weight
        torque = (self.torques(sel) ** 2).sum(dim=1) * self.torque_weight
        unclipped = lin_vel_xy + ang_vel_z + torque
        reward = unclipped.clamp(min=0.0)
        # the clip's share (>= 0, nonzero only when the torque penalty outweighs the tracking terms), so that the
        # logged terms add up to the reward
        self.reward_terms = {"lin_vel_xy": lin_vel_xy, "ang_vel_z": ang_vel_z, "torque": torque,
                             "clip": reward - unclipped}
        # how far from its command the base moves, in the reward's frame (the base's) and units: what evaluation
        # and the gait check report for a legged policy (issue 45: mean velocity-tracking error, m/s)
        self.measures = {"tracking_error_xy_mps": lin_vel_error.sqrt(), "yaw_rate_error_radps": ang_vel_error.sqrt()}
        touching = self.contact_forces(sel, TERMINATING_BODIES).norm(dim=2) > CONTACT_THRESHOLD
        return reward, touching.any(dim=1)

    def make_terminal(self, ids: Selection) -> None:
        """Upside down, the top of the base (its lidar cage) 3.5 mm in the floor: a base contact."""
        self.upside_down(ids, 0.26)

    def reset_state(self, ids: torch.Tensor) -> None:
        # the batch reset put the base at its start pose (0, 0, 0.62), upright, at rest; IsaacGymEnvs' joint noise:
        # default angles x U(0.5, 1.5), velocities U(-0.1, 0.1) rad/s
        k, on = ids.numel(), self.sim_device
        scale = 0.5 + torch.rand(k, self.num_dof, generator=self.generator, device=on)
        velocity = 0.2 * torch.rand(k, self.num_dof, generator=self.generator, device=on) - 0.1
        self.qpos[ids, 7:] = (self.default_dof_pos * scale).to(self.qpos.dtype)
        self.qvel[ids, 6:] = velocity.to(self.qvel.dtype)
        self.draw_commands(ids)
