"""BallBalance: IsaacGymEnvs' task on MuJoCo (obs 24, act 3): a tray on three legs, their knees position-driven, keeps
a ball that falls onto it near (0, 0, 0.7) and at rest. The model: assets/ballbalance.xml (its header says what it
follows and where it differs).

Obs (IsaacGymEnvs' compute_observations, index for index): [0:3] the knee angles (Isaac Gym's actuated DOFs 1, 3, 5),
[3:6] their velocities, [6:9] the ball's position, [9:12] its linear velocity, then the three tray sensors' readings
/ 20 as IsaacGymEnvs indexes them: [12:15] the x force of sensors 0, 1, 2, [15:18] their x torques, [18:21] their y
torques, [21:24] their z torques (sensor_forces[..., 0] is the x component of each sensor; the comment beside it in
ball_balance.py, "sensor force (same for each sensor)", describes Isaac Gym's readings, not the indexing). Each
sensor's wrench is the force and torque its leg exerts on the tray at the leg's attachment, in the tray's frame. The
attachment is the hip site, (0.4 cos a, 0.4 sin a, -0.030) in the tray's frame: 0.030 m below IsaacGymEnvs' sensor
pose (0.4 cos a, 0.4 sin a, 0), so the torques (not the forces) are taken about a point 0.030 m lower, a deliberate
difference kept because every BallBalance figure was measured with it (docs/tasks/classic.md, "Sensors").
Act: knee position targets += dt x actionSpeedScale x action (20), clamped to the knees' range (-70..90 deg); targets
start at 0 each episode.
Reward: 1 / (1 + |ball - (0, 0, 0.7)|) x 1 / (1 + |ball velocity|), one term ("balance"); measures ball_distance_m and
ball_speed_mps. Terminal when the ball's centre is below 1.5 ball radii (0.15 m); a time-out after maxEpisodeLength
control steps (500). Reset: the tray and the legs at their initial pose and at rest; the ball at a horizontal
distance U(0.001, 0.5) m in a uniform direction, height U(1, 2) m, falling at 5 m/s and moving towards the centre at
U(0, 5) m/s times (distance - 0.001) / (0.5 - 0.001), without spin.
Critic observations (asymmetric=true; ours, IsaacGymEnvs' BallBalance has none): the observation, then the tray's
position, quaternion (w, x, y, z), linear and angular velocity, the knees' position targets and the ball's spin.
"""
from __future__ import annotations

import math
from typing import Tuple

import torch

from isaac_ppo.domains import boolean, integer, positive
from isaac_ppo.envs.registry import ContractFacts, Gait, TaskSpec
from isaac_ppo.tasks.base import MujocoTask, Selection

TARGET = (0.0, 0.0, 0.7)  # where IsaacGymEnvs wants the ball (m)
BALL_RADIUS = 0.1
SENSOR_SCALE = 20.0  # IsaacGymEnvs divides every sensor reading by 20
HIPS, KNEES = (7, 9, 11), (8, 10, 12)  # qpos columns (tray free joint 0:7, then hip, knee per leg; ball 13:20)
HIP_VELOCITIES, KNEE_VELOCITIES = (6, 8, 10), (7, 9, 11)  # qvel columns (tray 0:6, joints 6:12, ball 12:18)
BALL_POS, BALL_QUAT, BALL_LINVEL, BALL_ANGVEL = slice(13, 16), slice(16, 20), slice(12, 15), slice(15, 18)
# IsaacGymEnvs' reset: the ball's horizontal distance, height, speeds
MIN_DISTANCE, MAX_DISTANCE, MIN_HEIGHT, MAX_HEIGHT, MAX_HORIZONTAL_SPEED, FALL_SPEED = 0.001, 0.5, 1.0, 2.0, 5.0, 5.0


class BallBalance(MujocoTask):
    # its episode is maxEpisodeLength control steps (IsaacGymEnvs' key); a speed scale of 0 would make every action
    # do nothing
    spec = TaskSpec(
        name="BallBalance", model="assets/ballbalance.xml",
        domains={"env.maxEpisodeLength": integer(1), "env.actionSpeedScale": positive(),
                 "env.asymmetric_observations": boolean()},
        reward_terms=("balance",),  # (one product: 1 / (1 + distance) x 1 / (1 + speed))
        critic_observations="the tray's pose and velocity, the knees' position targets and the ball's spin (ours)",
        gait=Gait("ball"),
        contract=ContractFacts(reset_column=0),  # (knee 0's angle)
    )
    num_obs = 24
    num_actions = 3
    critic_obs = 43  # the observation (24), tray position (3), quaternion (4), velocities (6), targets (3), spin (3)
    derived_fields: Tuple[str, ...] = ("sensordata",)
    state_buffers = MujocoTask.state_buffers + ("targets",)

    episode_length_key = "maxEpisodeLength"  # (IsaacGymEnvs' key name for this task)

    def make_terminal(self, ids: Selection) -> None:
        """The ball beside the robot, its centre below 1.5 radii (0.15 m)."""
        self.qpos[ids, 13] = 2.0
        self.qpos[ids, 14] = 0.0
        self.qpos[ids, 15] = 0.12

    def setup(self) -> None:
        on, model = self.sim_device, self.model
        self.action_speed_scale = float(self.cfg["env"]["actionSpeedScale"])
        knee_ranges = [model.jnt_range[model.joint(f"lower_leg_joint{i}").id] for i in range(3)]
        self.target_low = torch.tensor([float(r[0]) for r in knee_ranges], device=on)
        self.target_high = torch.tensor([float(r[1]) for r in knee_ranges], device=on)
        self.targets = torch.zeros(self.num_envs, 3, device=on)
        self.goal = torch.tensor(TARGET, device=on)
        # each upper leg's rotation relative to the tray (its sensor site's frame at hip angle 0), and the hinge axis
        # (the upper leg's y): a reading turns into the tray's frame by R_leg Ry(hip angle)
        import mujoco
        import numpy as np

        rotations = np.zeros((3, 9))
        for i in range(3):
            mujoco.mju_quat2Mat(rotations[i], model.body_quat[model.body(f"upper_leg{i}").id])
        self.leg_rotation = torch.tensor(rotations, dtype=torch.float32, device=on).view(3, 3, 3)

    def set_controls(self, actions: torch.Tensor, n: int) -> None:
        """IsaacGymEnvs' pre_physics_step: targets += dt x actionSpeedScale x action, clamped to the DOF limits."""
        targets = self.targets[:n] + self.dt * self.action_speed_scale * actions
        self.targets[:n] = torch.max(torch.min(targets, self.target_high), self.target_low)
        self.ctrl[:n] = self.targets[:n].to(self.ctrl.dtype)

    # ----------------------------------------------------------------------------------------------
    # quantities of the state

    def tray_wrenches(self, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        """The force (N) and torque (N m) each leg exerts on the tray at its attachment, in the tray's frame:
        (envs, 3 legs, 3) each, float32. MuJoCo's force and torque sensors read what the tray exerts on the leg's
        subtree in the sensor site's frame (the upper leg's); turned by the hip angle and the leg's mounting, and
        negated."""
        data = self.derived["sensordata"][sel].float()
        forces, torques = data[:, 0:9].view(-1, 3, 3), data[:, 9:18].view(-1, 3, 3)
        angle = self.qpos[sel][:, HIPS].float()  # (envs, 3)
        cos, sin = torch.cos(angle), torch.sin(angle)
        zero, one = torch.zeros_like(cos), torch.ones_like(cos)
        hinge = torch.stack((cos, zero, sin, zero, one, zero, -sin, zero, cos), dim=-1).view(-1, 3, 3, 3)  # Ry
        turn = self.leg_rotation @ hinge  # (envs, 3 legs, 3, 3)
        return -(turn @ forces.unsqueeze(-1)).squeeze(-1), -(turn @ torques.unsqueeze(-1)).squeeze(-1)

    def ball(self, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        """The ball's position and linear velocity (world = env frame), float32."""
        return self.qpos[sel][:, BALL_POS].float(), self.qvel[sel][:, BALL_LINVEL].float()

    # ----------------------------------------------------------------------------------------------
    # the task

    def compute_observations(self, sel: Selection) -> torch.Tensor:
        qpos, qvel = self.qpos[sel], self.qvel[sel]
        position, velocity = self.ball(sel)
        forces, torques = self.tray_wrenches(sel)
        return torch.cat((
            qpos[:, KNEES].float(), qvel[:, KNEE_VELOCITIES].float(), position, velocity,
            forces[:, :, 0] / SENSOR_SCALE, torques[:, :, 0] / SENSOR_SCALE, torques[:, :, 1] / SENSOR_SCALE,
            torques[:, :, 2] / SENSOR_SCALE,
        ), dim=1)

    def compute_reward(self, obs: torch.Tensor, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        position, velocity = obs[:, 6:9], obs[:, 9:12]
        reward, terminated, distance, speed = ball_balance_reward(position, velocity, self.goal)
        self.reward_terms = {"balance": reward}
        self.measures = {"ball_distance_m": distance, "ball_speed_mps": speed}
        return reward, terminated

    def compute_states(self, obs: torch.Tensor, sel: Selection) -> torch.Tensor:
        qpos, qvel = self.qpos[sel], self.qvel[sel]
        return torch.cat((obs, qpos[:, 0:7].float(), qvel[:, 0:6].float(), self.targets[sel],
                          qvel[:, BALL_ANGVEL].float()), dim=1)

    def reset_state(self, ids: torch.Tensor) -> None:
        # the batch reset put the tray, legs and ball at the model's initial pose, at rest; IsaacGymEnvs' ball
        k, on = ids.numel(), self.sim_device
        u = torch.rand(k, 4, generator=self.generator, device=on)
        distance = MIN_DISTANCE + (MAX_DISTANCE - MIN_DISTANCE) * u[:, 0]
        angle = math.pi * (2.0 * u[:, 1] - 1.0)  # torch_random_dir_2: a uniform angle in (-pi, pi)
        direction = torch.stack((torch.cos(angle), torch.sin(angle)), dim=1)
        height = MIN_HEIGHT + (MAX_HEIGHT - MIN_HEIGHT) * u[:, 2]
        speed = MAX_HORIZONTAL_SPEED * u[:, 3] * (distance - MIN_DISTANCE) / (MAX_DISTANCE - MIN_DISTANCE)
        position = torch.cat((distance[:, None] * direction, height[:, None]), dim=1)
        velocity = torch.cat((-speed[:, None] * direction, torch.full((k, 1), -FALL_SPEED, device=on)), dim=1)
        self.qpos[ids, BALL_POS] = position.to(self.qpos.dtype)
        self.qvel[ids, BALL_LINVEL] = velocity.to(self.qvel.dtype)
        self.targets[ids] = 0.0


def ball_balance_reward(position: torch.Tensor, velocity: torch.Tensor,
                        goal: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """IsaacGymEnvs' compute_bbot_reward: (reward, terminal, distance to the goal, speed) of each ball."""
    distance = (position - goal).norm(dim=1)
    speed = velocity.norm(dim=1)
    reward = 1.0 / (1.0 + distance) * (1.0 / (1.0 + speed))
    return reward, position[:, 2] < 1.5 * BALL_RADIUS, distance, speed
