"""What the flying tasks share (IsaacGymEnvs' quadcopter.py and ingenuity.py): a chassis on a free joint whose
angular speed the asset caps, forces on rotor bodies through xfrc_applied, the first 13 observations and the
hover reward's shape."""
from __future__ import annotations

import math
from typing import Dict, Tuple

import torch

from isaac_ppo.tasks.base import MujocoTask, Selection
from isaac_ppo.tasks.legged.common import rotate

MAX_ANGULAR_SPEED = 4.0 * math.pi  # rad/s: both tasks' asset option max_angular_velocity


class FlyingTask(MujocoTask):
    """A chassis on the model's first (free) joint, rotor forces written into xfrc_applied by set_controls."""

    # xfrc_applied: an input, the forces the task writes on the rotors, bound as the derived fields are (a view of
    # the simulator's array, cleared by its reset)
    derived_fields: Tuple[str, ...] = ("xfrc_applied",)
    episode_length_key = "maxEpisodeLength"  # (IsaacGymEnvs' key name for these tasks)

    def cap_angular_speed(self) -> None:
        """IsaacGymEnvs' max_angular_velocity of 4 pi, held per component of the free joint's angular velocity
        (PhysX clamps the body's angular speed) at every physics step (MujocoTask.step)."""
        limits = torch.full((self.model.nv,), math.inf, dtype=self.qvel.dtype, device=self.sim_device)
        limits[3:6] = MAX_ANGULAR_SPEED
        self.velocity_limits = limits

    def chassis(self, sel: Selection) -> Tuple[torch.Tensor, ...]:
        """The chassis' position, quaternion (w, x, y, z), world linear and angular velocities, float32."""
        qpos, qvel = self.qpos[sel].float(), self.qvel[sel].float()
        quat = qpos[:, 3:7]
        return qpos[:, 0:3], quat, qvel[:, 0:3], rotate(quat, qvel[:, 3:6])

    def chassis_observations(self, sel: Selection, target: torch.Tensor) -> torch.Tensor:
        """IsaacGymEnvs' first 13: (target - position) / 3, the quaternion in Isaac Gym's order (x, y, z, w), the
        world linear velocity / 2 and angular velocity / pi."""
        position, quat, linvel, angvel = self.chassis(sel)
        xyzw = torch.cat((quat[:, 1:4], quat[:, 0:1]), dim=1)
        return torch.cat(((target - position) / 3.0, xyzw, linvel / 2.0, angvel / math.pi), dim=1)


def hover_reward(distance: torch.Tensor, quat: torch.Tensor, angvel: torch.Tensor,
                 upright_scale: float) -> Tuple[torch.Tensor, Dict[str, torch.Tensor], torch.Tensor]:
    """Both tasks' reward: with tilt = |1 - the body z axis' world z| and spin = |world angular velocity z|,
    p = 1/(1 + d^2) and p x (1 + upright_scale/(1 + tilt^2) + 1/(1 + spin^2)): uprightness and spin count only near
    the target. Returns (reward, its terms position / upright / spin, tilt); quat (w, x, y, z)."""
    position_reward = 1.0 / (1.0 + distance * distance)
    _, qx, qy, _ = quat.unbind(dim=1)
    up_z = 1.0 - 2.0 * (qx * qx + qy * qy)  # quat_axis(q, 2)'s z
    tilt = (1.0 - up_z).abs()
    up_reward = upright_scale / (1.0 + tilt * tilt)
    spin = angvel[:, 2].abs()
    spin_reward = 1.0 / (1.0 + spin * spin)
    reward = position_reward + position_reward * (up_reward + spin_reward)
    terms = {"position": position_reward, "upright": position_reward * up_reward, "spin": position_reward * spin_reward}
    return reward, terms, tilt
