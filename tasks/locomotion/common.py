"""What Ant and Humanoid share: IsaacGymEnvs' locomotion observations, progress reward and resets.

The root is a free joint: qpos[0:3] torso position, qpos[3:7] its quaternion (w, x, y, z), qpos[7:] the hinge
angles; qvel[0:3] the linear velocity in the world frame, qvel[3:6] the angular velocity already in the torso
frame (MuJoCo's convention; Isaac Gym reports it in the world frame and rotates it, to the same result).

Observation head shared by both (indices as IsaacGymEnvs):
  [0] torso height, [1:4] linear velocity in the torso frame, [4:7] angular velocity in the torso frame
  (times angularVelocityScale), [7] yaw, [8] roll, [9] angle to target, [10] up projection, [11] heading
  projection, then scaled dof positions and dof velocities; each task appends its own tail.

angle_to_target is atan2(dy, dx) - yaw with dy the horizontal offset to the target. IsaacGymEnvs puts the
target's z-offset where dy belongs (a known quirk); with the target 1000 m ahead the two differ by about
(|dy| + |dz|) / 1000 rad (issue 91 measured up to 4.3e-3 on Ant's states, 1.4e-3 on Humanoid's), so the port uses
the quantity the name promises.
"""
from __future__ import annotations

import math
from typing import Tuple

import torch

from isaac_ppo.domains import positive, real
from isaac_ppo.tasks.base import MujocoTask, Selection

TARGET_X = 1000.0  # the walk target (1000, 0, 0) of both tasks
# what LocomotionTask reads: weights and costs mean what they say at 0 or above (a negative cost would reward the
# thing); deathCost is IsaacGymEnvs' signed penalty (negative); scales and the termination height are positive
LOCOMOTION_DOMAINS = {
    "env.headingWeight": real(0.0), "env.upWeight": real(0.0), "env.actionsCost": real(0.0),
    "env.energyCost": real(0.0), "env.jointsAtLimitCost": real(0.0), "env.deathCost": real(),
    "env.terminationHeight": positive(), "env.dofVelocityScale": positive(),
    "env.contactForceScale": positive(), "env.angularVelocityScale": positive(),
}
LOCOMOTION_REWARD_TERMS = ("progress", "alive", "up", "heading", "actions", "energy", "joint_limits", "death")


class LocomotionTask(MujocoTask):
    derived_fields: Tuple[str, ...] = ("sensordata",)
    state_buffers = MujocoTask.state_buffers + ("potentials",)
    alive_reward = 0.0
    # Ant reports yaw and roll wrapped to [0, 2 pi) and the raw angle difference; Humanoid wraps all three
    # to (-pi, pi]
    normalize_angles = False
    def setup(self) -> None:
        env = self.cfg["env"]
        self.heading_weight = float(env["headingWeight"])
        self.up_weight = float(env["upWeight"])
        self.actions_cost = float(env["actionsCost"])
        self.energy_cost = float(env["energyCost"])
        self.joints_at_limit_cost = float(env["jointsAtLimitCost"])
        self.death_cost = float(env["deathCost"])
        self.termination_height = float(env["terminationHeight"])
        self.dof_vel_scale = float(env["dofVelocityScale"])
        self.contact_force_scale = float(env["contactForceScale"])
        self.angular_velocity_scale = float(env.get("angularVelocityScale", 1.0))

        on = self.sim_device
        limits = torch.from_numpy(self.model.jnt_range[1:].copy()).to(on)  # hinges only (joint 0 is the root)
        self.dof_lower, self.dof_upper = limits[:, 0], limits[:, 1]
        self.num_dof = limits.shape[0]
        # IsaacGymEnvs starts every dof at 0 clamped into its limits (the Ant's ankles sit at a limit)
        self.initial_dof_pos = torch.zeros(self.num_dof, dtype=torch.float64, device=on).clamp(
            self.dof_lower, self.dof_upper)
        gears = torch.from_numpy(self.model.actuator_gear[:, 0].copy()).float().to(on)
        self.motor_effort_ratio = gears / gears.max()
        self.target_xy = torch.tensor([TARGET_X, 0.0], dtype=torch.float64, device=on)
        start_xy = torch.from_numpy(self.model.qpos0[:2].copy()).to(on)
        self.start_potential = -float(torch.linalg.norm(self.target_xy - start_xy)) / self.dt
        # float64: potentials are ~ -6e4 and the reward is their per-step difference of ~ 1e-1
        self.potentials = torch.full((self.num_envs,), self.start_potential, dtype=torch.float64, device=on)

    # observations ---------------------------------------------------------------------------------

    def compute_observations(self, sel: Selection) -> torch.Tensor:
        qpos, qvel = self.qpos[sel], self.qvel[sel]
        head = locomotion_head(qpos.float(), qvel.float(), self.target_xy.float(), self.normalize_angles)
        head[:, 4:7] *= self.angular_velocity_scale
        dof_pos = qpos[:, 7:]
        dof_pos_scaled = (2.0 * dof_pos - self.dof_upper - self.dof_lower) / (self.dof_upper - self.dof_lower)
        parts = [head, dof_pos_scaled.float(), qvel[:, 6:].float() * self.dof_vel_scale]
        parts.extend(self.tail_observations(sel))
        parts.append(self.last_actions[sel])
        return torch.cat(parts, dim=1)

    def tail_observations(self, sel: Selection) -> Tuple[torch.Tensor, ...]:
        """Task-specific observation slices between the dof velocities and the last actions."""
        raise NotImplementedError

    # reward ---------------------------------------------------------------------------------------

    def compute_reward(self, obs: torch.Tensor, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        potentials = -torch.linalg.norm(self.target_xy - self.qpos[sel][:, :2], dim=1) / self.dt
        progress = (potentials - self.potentials[sel]).float()
        self.potentials[sel] = potentials
        d = self.num_dof
        actions = self.last_actions[sel]
        heading_proj, up_proj = obs[:, 11], obs[:, 10]
        heading = torch.where(
            heading_proj > 0.8,
            torch.full_like(heading_proj, self.heading_weight),
            self.heading_weight * heading_proj / 0.8,
        )
        up = torch.where(up_proj > 0.93, torch.full_like(up_proj, self.up_weight), torch.zeros_like(up_proj))
        actions_cost = (actions * actions).sum(dim=1)
        electricity = ((actions * obs[:, 12 + d : 12 + 2 * d]).abs() * self.motor_effort_ratio).sum(dim=1)
        at_limit = self.joint_limit_cost(obs[:, 12 : 12 + d])
        reward = (
            progress + self.alive_reward + up + heading
            - self.actions_cost * actions_cost - self.energy_cost * electricity - at_limit
        )
        fallen = obs[:, 0] < self.termination_height
        reward = torch.where(fallen, torch.full_like(reward, self.death_cost), reward)
        standing = (~fallen).to(reward.dtype)  # a fall's reward is deathCost alone
        self.reward_terms = {
            "progress": progress * standing, "alive": standing * self.alive_reward, "up": up * standing,
            "heading": heading * standing, "actions": -self.actions_cost * actions_cost * standing,
            "energy": -self.energy_cost * electricity * standing, "joint_limits": -at_limit * standing,
            "death": (1.0 - standing) * self.death_cost,
        }
        return reward, fallen

    def joint_limit_cost(self, dof_pos_scaled: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    # reset ----------------------------------------------------------------------------------------

    def reset_state(self, ids: torch.Tensor) -> None:
        # the batch reset put the root at its start pose with zero velocity; add IsaacGymEnvs' dof noise
        k = ids.numel()
        on = self.sim_device
        noise_pos = torch.rand(k, self.num_dof, generator=self.generator, dtype=torch.float64, device=on) * 0.4 - 0.2
        noise_vel = torch.rand(k, self.num_dof, generator=self.generator, dtype=torch.float64, device=on) * 0.2 - 0.1
        dof_pos = torch.max(torch.min(self.initial_dof_pos + noise_pos, self.dof_upper), self.dof_lower)
        self.qpos[ids, 7:] = dof_pos.to(self.qpos.dtype)  # (float64 on mujoco.batch, float32 on MuJoCo Warp)
        self.qvel[ids, 6:] = noise_vel.to(self.qvel.dtype)
        self.potentials[ids] = self.start_potential


def locomotion_head(qpos: torch.Tensor, qvel: torch.Tensor, target_xy: torch.Tensor, normalize: bool) -> torch.Tensor:
    """The 12 leading observation values from root state (see the module docstring)."""
    w, x, y, z = qpos[:, 3:7].unbind(dim=1)
    # columns of the torso's rotation matrix: forward (x), left (y) and up (z) axes in the world frame
    fwd = torch.stack((1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)), dim=1)
    left = torch.stack((2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)), dim=1)
    up = torch.stack((2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)), dim=1)
    vel = qvel[:, 0:3]
    vel_local = torch.stack(((fwd * vel).sum(1), (left * vel).sum(1), (up * vel).sum(1)), dim=1)
    ang_vel_local = qvel[:, 3:6]

    roll = torch.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    yaw = torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    to_target = target_xy - qpos[:, 0:2]
    direction = to_target / torch.linalg.norm(to_target, dim=1, keepdim=True).clamp(min=1e-9)
    heading_proj = fwd[:, 0] * direction[:, 0] + fwd[:, 1] * direction[:, 1]
    up_proj = up[:, 2]
    if normalize:
        angle_to_target = wrap_pi(torch.atan2(to_target[:, 1], to_target[:, 0]) - yaw)
    else:
        yaw = torch.remainder(yaw, 2 * math.pi)
        roll = torch.remainder(roll, 2 * math.pi)
        angle_to_target = torch.atan2(to_target[:, 1], to_target[:, 0]) - yaw
    return torch.cat(
        (
            qpos[:, 2:3], vel_local, ang_vel_local,
            torch.stack((yaw, roll, angle_to_target, up_proj, heading_proj), dim=1),
        ),
        dim=1,
    )


def wrap_pi(angle: torch.Tensor) -> torch.Tensor:
    """Angle wrapped to (-pi, pi], as IsaacGymEnvs' normalize_angle."""
    return torch.atan2(torch.sin(angle), torch.cos(angle))
