"""What legged tasks under velocity commands share (IsaacGymEnvs' Anymal; AnymalTerrain and other quadrupeds to come).

The root is a free joint: qpos[0:3] base position, qpos[3:7] its quaternion (w, x, y, z), qpos[7:] the joint
angles in the model's order; qvel[0:3] the base's linear velocity in the world frame, qvel[3:6] its angular
velocity already in the base frame (MuJoCo's convention; Isaac Gym reports it in the world frame and rotates it
with quat_rotate_inverse, to the same result).

- Joint control: an action is a joint position target, target = actionScale x action + default angle, held by
  MuJoCo's own position actuators (kp = env.control.stiffness, kv = env.control.damping, force within the model's
  forcerange: the URDF's effort limit). IsaacGymEnvs' Anymal drives its joints the same way, with PhysX's position
  drive (DOF_MODE_POS with that stiffness and damping), not with torques it computes: both evaluate
  kp (target - q) - kd qdot inside every physics substep, so a MuJoCo actuator is the faithful counterpart, and it
  runs inside the substep loop that MuJoCo Warp records as one graph (a torque written once per control step
  from torch would hold the first substep's torque through the others). The torque the reward penalises is the
  actuator force of the last substep (Isaac Gym's dof force sensor reads the last substep's too).
- Commands (vx, vy in m/s, yaw rate in rad/s in the base frame) are drawn uniformly from
  env.randomCommandVelocityRanges at each reset and held for the episode, as IsaacGymEnvs' Anymal does.
- Projected gravity: IsaacGymEnvs' anymal.py computes quat_rotate(base_quat, gravity), the gravity vector turned
  by the base's rotation (R g), where legged_gym and AnymalTerrain use quat_rotate_inverse (R^T g, gravity in the
  base frame). Both read (0, 0, -1) upright and differ in the sign of their x and y parts once the base tilts;
  ``projected_gravity(..., inverse=False)`` is Anymal's quantity, ported as it is.
- Contact forces: the net contact force on a body, from a MuJoCo ``<contact>`` sensor (data="force",
  reduce="netforce") per body in the model file. Such sensors read the same on mujoco.batch and MuJoCo Warp, where
  d.cfrc_ext would need a force sensor in the model (mujoco.batch leaves it zero after a plain step otherwise) and
  opt.run_rne_postconstraint (MuJoCo Warp). They describe the last substep, as Isaac Gym's contact_collection
  CC_LAST_SUBSTEP.
- Feet air time (AnymalTerrain's reward term, for the terrain task to come): ``feet_air_time_step``.
- Heading commands (AnymalTerrain): the third command drawn is a heading, and each step the yaw-rate command is
  clip(0.5 wrap_to_pi(heading command - the base's heading), -1, 1): ``yaw_rate_to_heading``.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Sequence, Tuple

import torch

from isaac_ppo.domains import pair, positive, real
from isaac_ppo.tasks.base import MujocoTask, Selection

CONTACT_THRESHOLD = 1.0  # newtons: IsaacGymEnvs counts a body in contact above this net force
GRAVITY_DIRECTION = (0.0, 0.0, -1.0)
# what LeggedTask reads: a command range is [min, max] in m/s or rad/s (a legged robot's commands stay well inside
# 5); the drive's stiffness must hold a position (> 0) and its damping not push (>= 0); tracking weights pay at 0 or
# above, and torqueRewardScale is IsaacGymEnvs' signed penalty (0 or below, a positive one would pay for torque);
# scales are positive; an episode lasts a positive number of seconds
VELOCITY_COMMAND_DOMAINS = {
    "env.randomCommandVelocityRanges.linear_x": pair(-5.0, 5.0),
    "env.randomCommandVelocityRanges.linear_y": pair(-5.0, 5.0),
    "env.randomCommandVelocityRanges.yaw": pair(-5.0, 5.0),
    "env.control.stiffness": positive(), "env.control.damping": real(0.0), "env.control.actionScale": positive(),
    "env.learn.linearVelocityXYRewardScale": real(0.0), "env.learn.angularVelocityZRewardScale": real(0.0),
    "env.learn.torqueRewardScale": real(None, 0.0),
    "env.learn.linearVelocityScale": positive(), "env.learn.angularVelocityScale": positive(),
    "env.learn.dofPositionScale": positive(), "env.learn.dofVelocityScale": positive(),
    "env.learn.episodeLength_s": positive(),
}


class LeggedTask(MujocoTask):
    """A legged robot on a free base whose actuators are position servos on its joints, in joint order."""

    derived_fields: Tuple[str, ...] = ("sensordata", "actuator_force")
    state_buffers = MujocoTask.state_buffers + ("commands",)

    # ----------------------------------------------------------------------------------------------
    # the model

    def configure_model(self, model) -> None:
        """The position servos' gains from env.control: force = kp (ctrl - q) - kv qdot (MuJoCo's position
        actuator: gain kp, bias -kp q - kv qdot)."""
        control = self.cfg["env"]["control"]
        kp, kd = float(control["stiffness"]), float(control["damping"])
        model.actuator_gainprm[:, 0] = kp
        model.actuator_biasprm[:, 1] = -kp
        model.actuator_biasprm[:, 2] = -kd

    def setup(self) -> None:
        env, on = self.cfg["env"], self.sim_device
        self.num_dof = self.model.nq - 7
        self.dof_names = [self.model.joint(j).name for j in range(1, self.model.njnt)]
        control = env["control"]
        self.action_scale = float(control["actionScale"])
        angles = env["defaultJointAngles"]
        self.default_dof_pos = torch.tensor([float(angles[name]) for name in self.dof_names], device=on)
        ranges = env["randomCommandVelocityRanges"]
        limits = [ranges["linear_x"], ranges["linear_y"], ranges["yaw"]]
        self.command_low = torch.tensor([float(low) for low, _ in limits], device=on)
        self.command_high = torch.tensor([float(high) for _, high in limits], device=on)
        self.commands = torch.zeros(self.num_envs, 3, device=on)
        self.contact_sensors = contact_sensor_columns(self.model)
        self.gravity = torch.tensor(GRAVITY_DIRECTION, device=on)

    @classmethod
    def episode_overrides(cls, cfg: Any, steps: int) -> Dict[str, Any]:
        return {"learn": {"episodeLength_s": steps * cls.control_step_of(cfg)}}

    def upside_down(self, ids: Selection, height: float, xy: Optional[Sequence[float]] = None) -> None:
        """The base upside down at height (m), at xy when given (a terminal base contact where its top touches
        the ground)."""
        if xy is not None:
            self.qpos[ids, 0:2] = torch.tensor(xy, dtype=self.qpos.dtype, device=self.qpos.device)
        self.qpos[ids, 2] = height
        self.qpos[ids, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=self.qpos.dtype, device=self.qpos.device)

    def episode_length_steps(self) -> int:
        """IsaacGymEnvs' legged tasks give the episode in seconds: int(episodeLength_s / dt + 0.5) control steps
        (Anymal: 50 s / 0.02 s = 2500), at least one."""
        return max(1, int(float(self.cfg["env"]["learn"]["episodeLength_s"]) / self.dt + 0.5))

    def set_controls(self, actions: torch.Tensor, n: int) -> None:
        """Joint position targets: actionScale x action + the default joint angles."""
        self.ctrl[:n] = (self.action_scale * actions + self.default_dof_pos).to(self.ctrl.dtype)

    # ----------------------------------------------------------------------------------------------
    # quantities of the state

    def base_velocities(self, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        """The base's linear and angular velocity in the base frame (float32)."""
        quat = self.qpos[sel][:, 3:7].float()
        return rotate_inverse(quat, self.qvel[sel][:, 0:3].float()), self.qvel[sel][:, 3:6].float()

    def contact_forces(self, sel: Selection, bodies: Sequence[str]) -> torch.Tensor:
        """The net contact force (world frame, N) on each of bodies: (envs, len(bodies), 3), float32. MuJoCo's
        contact sensor reports the force its body exerts on what it touches (measured: a box resting on another
        reads -m g, whichever body MuJoCo lists first in the contact); negated, the force on the body, as Isaac
        Gym's net contact force (the floor pushes a standing foot up: +z)."""
        data = self.derived["sensordata"][sel]
        return -torch.stack([data[:, self.contact_sensors[b]] for b in bodies], dim=1).float()

    def torques(self, sel: Selection) -> torch.Tensor:
        """The actuators' forces (N m) in the last substep, float32."""
        return self.derived["actuator_force"][sel].float()

    # ----------------------------------------------------------------------------------------------
    # reset

    def draw_commands(self, ids: torch.Tensor) -> None:
        """New commands for envs ids, uniform in each range (IsaacGymEnvs' torch_rand_float)."""
        u = torch.rand(ids.numel(), 3, generator=self.generator, device=self.sim_device)
        self.commands[ids] = self.command_low + (self.command_high - self.command_low) * u


def contact_sensor_columns(model) -> Dict[str, slice]:
    """Each body's contact sensor (its three force columns in sensordata), by body name."""
    import mujoco

    columns = {}
    for s in range(model.nsensor):
        if model.sensor_type[s] == mujoco.mjtSensor.mjSENS_CONTACT and model.sensor_objtype[s] == mujoco.mjtObj.mjOBJ_BODY:
            start = int(model.sensor_adr[s])
            columns[model.body(int(model.sensor_objid[s])).name] = slice(start, start + 3)
    return columns


def rotate(quat: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """R(quat) v: v turned by each quaternion (w, x, y, z); IsaacGymEnvs' quat_rotate."""
    w, xyz = quat[:, :1], quat[:, 1:]
    return v * (2.0 * w * w - 1.0) + torch.cross(xyz, v, dim=1) * w * 2.0 + xyz * (xyz * v).sum(1, keepdim=True) * 2.0


def rotate_inverse(quat: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """R(quat)^T v: a world vector in the frame of each quaternion (w, x, y, z); IsaacGymEnvs' quat_rotate_inverse."""
    w, xyz = quat[:, :1], quat[:, 1:]
    return v * (2.0 * w * w - 1.0) - torch.cross(xyz, v, dim=1) * w * 2.0 + xyz * (xyz * v).sum(1, keepdim=True) * 2.0


def projected_gravity(quat: torch.Tensor, gravity: torch.Tensor, inverse: bool) -> torch.Tensor:
    """The unit gravity vector turned by the base's rotation (inverse=False: IsaacGymEnvs' Anymal, quat_rotate) or
    in the base frame (inverse=True: legged_gym, AnymalTerrain, quat_rotate_inverse)."""
    g = gravity.expand(quat.shape[0], 3)
    return rotate_inverse(quat, g) if inverse else rotate(quat, g)


def feet_air_time_step(air_time: torch.Tensor, contact: torch.Tensor,
                       dt: float) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One control step of each foot's time in the air (IsaacGymEnvs' AnymalTerrain, legged_gym); contact:
    (envs, feet) bool, e.g. a foot's vertical contact force above CONTACT_THRESHOLD. Returns which feet touch down
    in this step, their air time including this step (AnymalTerrain pays sum((air_time - 0.5) x touch_down)), and
    the air times to carry to the next step (0 for feet in contact)."""
    touch_down = (air_time > 0.0) & contact
    air_time = air_time + dt
    return touch_down, air_time, air_time * ~contact


def wrap_to_pi(angles: torch.Tensor) -> torch.Tensor:
    """Angles (rad) into (-pi, pi]: IsaacGymEnvs' wrap_to_pi as written (mod 2 pi, then minus 2 pi above pi), with
    a true remainder. IsaacGymEnvs compiles it with TorchScript, where `%` on a float tensor is fmod, so its angles
    in (-2 pi, -pi) come back unwrapped (anymal_terrain.py lines 683-687): a deliberate difference (the wrap the
    name promises; legged_gym's)."""
    angles = torch.remainder(angles, 2.0 * math.pi)
    return angles - 2.0 * math.pi * (angles > math.pi)


def yaw_rate_to_heading(quat: torch.Tensor, heading_command: torch.Tensor) -> torch.Tensor:
    """AnymalTerrain's yaw-rate command (rad/s) each step: clip(0.5 x wrap_to_pi(heading command - heading), -1, 1),
    the heading being the angle of the base's forward (x) axis in the world's xy plane."""
    forward = rotate(quat, torch.tensor([[1.0, 0.0, 0.0]], dtype=quat.dtype, device=quat.device).expand(len(quat), 3))
    heading = torch.atan2(forward[:, 1], forward[:, 0])
    return torch.clamp(0.5 * wrap_to_pi(heading_command - heading), -1.0, 1.0)
