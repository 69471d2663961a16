"""Quadcopter: IsaacGymEnvs' quadcopter (tasks/quadcopter.py) on MuJoCo (obs 21, act 12): hover at (0, 0, 1).

Model (assets/quadcopter.xml): IsaacGymEnvs' own MJCF, written from its code: a chassis on a free joint, four arms
each on a pitch hinge, a rotor on each arm on a roll hinge; 0.252 kg.

Act (12): actions 0-7 move the 8 hinges' position targets (pitch 0, roll 0, pitch 1, ..., IsaacGymEnvs' DOF order)
by dt x 8 pi x action a control step, clamped to the hinges' +-30 degrees; actions 8-11 move the 4 rotors' thrusts
by dt x 200 x action, clamped to [0, 2] N. Both are state (they integrate the actions), as in IsaacGymEnvs; a reset
sets the targets to the reset's hinge angles and the thrusts to 0. Each thrust pushes its rotor along the rotor's
own z axis (IsaacGymEnvs: apply_rigid_body_force_tensors in LOCAL_SPACE), here a world-frame force at the rotor's
centre of mass through xfrc_applied, turned by the rotor's orientation at the start of the control step (computed
from the state: the chassis' rotation and the two hinges) and held over its physics steps (as IsaacGymEnvs holds it
over PhysX's substeps).

Obs (21): (target - position) / 3 (target (0, 0, 1)), the chassis quaternion in Isaac Gym's order (x, y, z, w), its
linear velocity / 2 and angular velocity / pi (both in the world frame: MuJoCo's free joint gives the angular
velocity in the body frame, turned here), the 8 hinge angles.

Reward: with d the distance to the target, tilt = |1 - the body z axis' world z| and spin = |world angular velocity
z|: 1/(1 + d^2) x (1 + 1/(1 + tilt^2) + 1/(1 + spin^2)). Terminal when d > 3 m or the chassis is below 0.3 m; a
time-out after env.maxEpisodeLength (500) control steps. Reset: the chassis at (0, 0, 1) + (U(-1.5, 1.5),
U(-1.5, 1.5), U(-0.2, 1.5)), upright, at rest; the hinges U(-0.2, 0.2) rad, at rest.

Deliberate differences (docs/tasks/aerial.md): the hinge drives (critically damped, with armature: the model's
header); IsaacGymEnvs' max_angular_velocity of 4 pi on the asset is held per component of the free joint's angular
velocity (PhysX clamps the body's angular speed); the reset happens inside the ending step (tasks/base.py).
"""
from __future__ import annotations

import math
from typing import Any, Tuple

import torch

from isaac_ppo.domains import integer
from isaac_ppo.envs.registry import ContractFacts, Gait, TaskSpec
from isaac_ppo.tasks.aerial.common import FlyingTask, hover_reward
from isaac_ppo.tasks.base import Selection
from isaac_ppo.tasks.legged.common import rotate

TARGET = (0.0, 0.0, 1.0)  # m: where IsaacGymEnvs wants the chassis
HINGES = slice(7, 15)  # qpos columns of the 8 hinges (free joint 0:7), IsaacGymEnvs' DOF order
HINGE_VELOCITIES = slice(6, 14)
ROTOR_BODIES = (3, 5, 7, 9)  # model body ids of rotor0-3 (world 0, chassis 1, then arm i, rotor i)
ARM_YAW_DEG = (45.0, 135.0, 225.0, 315.0)  # each arm's yaw on the chassis (the model's body quaternions)
TARGET_SPEED = 8.0 * math.pi  # rad/s per unit action: dof_action_speed_scale
THRUST_SPEED = 200.0  # N/s per unit action: thrust_action_speed_scale
MAX_THRUST = 2.0  # N per rotor


class Quadcopter(FlyingTask):
    # speed scales are IsaacGymEnvs' constants (not config keys there): only its episode length is a parameter
    spec = TaskSpec(
        name="Quadcopter", model="assets/quadcopter.xml",
        domains={"env.maxEpisodeLength": integer(1)},
        reward_terms=("position", "upright", "spin"),
        gait=Gait("measures", ("target_distance_m", "tilt")),
        contract=ContractFacts(reset_column=7),  # (obs 7: the chassis' x velocity / 2, at rest after every reset)
    )
    num_obs = 21
    num_actions = 12
    state_buffers = FlyingTask.state_buffers + ("targets", "thrusts")

    def make_terminal(self, ids: Selection) -> None:
        """The chassis on the floor, below 0.3 m."""
        self.qpos[ids, 2] = 0.1

    def setup(self) -> None:
        on, model = self.sim_device, self.model
        ranges = torch.tensor(model.jnt_range[1:9], dtype=torch.float32, device=on)  # (the hinges, in DOF order)
        self.target_low, self.target_high = ranges[:, 0], ranges[:, 1]
        self.targets = torch.zeros(self.num_envs, 8, device=on)
        self.thrusts = torch.zeros(self.num_envs, 4, device=on)
        self.goal = torch.tensor(TARGET, device=on)
        self.rotor_bodies = torch.tensor(ROTOR_BODIES, device=on)
        self.arm_yaw = torch.tensor(ARM_YAW_DEG, device=on) * (math.pi / 180.0)
        self.cap_angular_speed()

    def set_controls(self, actions: torch.Tensor, n: int) -> None:
        """IsaacGymEnvs' pre_physics_step: targets and thrusts integrate the actions, clamped; each thrust along its
        rotor's z axis as a world-frame force on the rotor."""
        targets = self.targets[:n] + self.dt * TARGET_SPEED * actions[:, 0:8]
        self.targets[:n] = torch.max(torch.min(targets, self.target_high), self.target_low)
        thrusts = self.thrusts[:n] + self.dt * THRUST_SPEED * actions[:, 8:12]
        self.thrusts[:n] = thrusts.clamp(0.0, MAX_THRUST)
        self.ctrl[:n] = self.targets[:n].to(self.ctrl.dtype)
        forces = self.derived["xfrc_applied"]
        forces[:n, self.rotor_bodies, 0:3] = (self.rotor_axes(slice(0, n)) * self.thrusts[:n].unsqueeze(-1)).to(
            forces.dtype)

    # ----------------------------------------------------------------------------------------------
    # quantities of the state

    def rotor_axes(self, sel: Selection) -> torch.Tensor:
        """Each rotor's z axis in the world frame, (envs, 4, 3), from the state: the chassis' rotation, the arm's
        yaw on it, then its pitch hinge (about y) and the rotor's roll hinge (about x)."""
        qpos = self.qpos[sel].float()
        hinges = qpos[:, HINGES].view(-1, 4, 2)
        pitch, roll = hinges[..., 0], hinges[..., 1]
        # Ry(pitch) Rx(roll) (0, 0, 1), then the arm's yaw
        x, y, z = torch.sin(pitch) * torch.cos(roll), -torch.sin(roll), torch.cos(pitch) * torch.cos(roll)
        yaw_cos, yaw_sin = self.arm_yaw.cos(), self.arm_yaw.sin()
        local = torch.stack((yaw_cos * x - yaw_sin * y, yaw_sin * x + yaw_cos * y, z), dim=-1)  # (envs, 4, 3)
        quat = qpos[:, 3:7].unsqueeze(1).expand(-1, 4, -1).reshape(-1, 4)
        return rotate(quat, local.reshape(-1, 3)).view(-1, 4, 3)

    # ----------------------------------------------------------------------------------------------
    # the task

    def compute_observations(self, sel: Selection) -> torch.Tensor:
        return torch.cat((self.chassis_observations(sel, self.goal), self.qpos[sel][:, HINGES].float()), dim=1)

    def compute_reward(self, obs: torch.Tensor, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        position, quat, _, angvel = self.chassis(sel)
        reward, terminated, terms, distance, tilt = quadcopter_reward(position, quat, angvel)
        self.reward_terms = terms
        self.measures = {"target_distance_m": distance, "tilt": tilt}
        return reward, terminated

    def reset_state(self, ids: torch.Tensor) -> None:
        # the simulator's reset put the chassis at (0, 0, 1), upright, at rest, and zeroed the forces
        k, on = ids.numel(), self.sim_device
        u = torch.rand(k, 11, generator=self.generator, device=on)
        low = torch.tensor((-1.5, -1.5, -0.2), device=on)
        high = torch.tensor((1.5, 1.5, 1.5), device=on)
        position = self.goal + low + (high - low) * u[:, 0:3]
        hinges = -0.2 + 0.4 * u[:, 3:11]
        self.qpos[ids, 0:3] = position.to(self.qpos.dtype)
        self.qpos[ids, HINGES] = hinges.to(self.qpos.dtype)
        self.targets[ids] = hinges
        self.thrusts[ids] = 0.0


def quadcopter_reward(position: torch.Tensor, quat: torch.Tensor, angvel: torch.Tensor) -> Tuple[Any, ...]:
    """IsaacGymEnvs' compute_quadcopter_reward: (reward, terminal, its terms, the distance to the target in m, the
    tilt) of each chassis; quat (w, x, y, z), angvel in the world frame."""
    x, y, z = position.unbind(dim=1)
    distance = torch.sqrt(x * x + y * y + (1.0 - z) * (1.0 - z))
    reward, terms, tilt = hover_reward(distance, quat, angvel, upright_scale=1.0)
    terminated = (distance > 3.0) | (z < 0.3)
    return reward, terminated, terms, distance, tilt
