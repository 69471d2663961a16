"""Ingenuity: IsaacGymEnvs' Mars helicopter (tasks/ingenuity.py) on MuJoCo (obs 13, act 6): fly to a target that
moves every 500 control steps, under Mars gravity.

Model (assets/ingenuity.xml): IsaacGymEnvs' own MJCF, written from its code: a chassis on a free joint and two
coaxial rotor discs welded to it (the lower at its centre, the upper 0.025 m above); 1.500 kg; gravity -3.721 m/s^2.

Act (6): per rotor (lower: 0-2, upper: 3-5), a force in the chassis' frame: vertical = dt x 2000 x action z,
clamped to +-dt x 2000 (+-20 N at dt 0.01: IsaacGymEnvs scales it by the control step and lets it point down), and
lateral x, y = vertical x action x, y, each fraction clamped to +-0.2. IsaacGymEnvs applies the two forces to the rotor
bodies in LOCAL_SPACE; here they are world-frame forces at each rotor's centre of mass through xfrc_applied, turned
by the chassis' orientation at the start of the control step and held over its physics steps. The actions are not
state (no integration, unlike Quadcopter's).

Obs (13): (target - position) / 3, the chassis quaternion in Isaac Gym's order (x, y, z, w), its linear velocity / 2
and angular velocity / pi, both in the world frame (MuJoCo's free joint gives the angular velocity in the body frame,
turned here).

Reward: with d the distance to the target, tilt = |1 - the body z axis' world z| and spin = |world angular velocity
z|: 1/(1 + d^2) x (1 + 5/(1 + tilt^2) + 1/(1 + spin^2)), at most 7 a step. Terminal when d > 8 m or the chassis is
below 0.5 m; a time-out after env.maxEpisodeLength (2000) control steps. The target: x, y ~ U(-5, 5), z ~ U(1, 2),
drawn at every reset and again before the control steps that follow the 500th, 1000th and 1500th of an episode
(IsaacGymEnvs: progress % 500 == 0 in pre_physics_step: the step's reward already measures the new target, its
observation before it showed the old one). Reset: the chassis at (0, 0, 1) + (U(-1.5, 1.5), U(-1.5, 1.5),
U(-0.2, 1.5)), upright, at rest.

Deliberate differences (docs/tasks/aerial.md): no visual meshes and no freely spinning visual rotors (the model's
header); IsaacGymEnvs' max_angular_velocity of 4 pi is held per component of the free joint's angular velocity
(PhysX clamps the body's angular speed); the reset happens inside the ending step (tasks/base.py), so the first
control step of an episode has thrust (IsaacGymEnvs zeroes the forces of the step that resets).
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

ROTOR_BODIES = (3, 4)  # model body ids of rotor_physics_0 and _1 (world 0, target 1, chassis 2)
START = (0.0, 0.0, 1.0)  # m: the chassis' reset position before its noise
THRUST_SPEED = 2000.0  # N/s per unit action: thrust_action_speed_scale (x dt: the force)
LATERAL_FRACTION = 0.2  # thrust_lateral_component: the lateral force's largest share of the vertical
TARGET_PERIOD = 500  # control steps between new targets
TARGET_LOW, TARGET_HIGH = (-5.0, -5.0, 1.0), (5.0, 5.0, 2.0)  # m: where a target is drawn


class Ingenuity(FlyingTask):
    # the force scales, the target's box and period are IsaacGymEnvs' constants (not config keys there)
    spec = TaskSpec(
        name="Ingenuity", model="assets/ingenuity.xml",
        domains={"env.maxEpisodeLength": integer(1)},
        reward_terms=("position", "upright", "spin"),
        gait=Gait("measures", ("target_distance_m", "tilt")),
        contract=ContractFacts(reset_column=7),  # (obs 7: the chassis' x velocity / 2, at rest after every reset)
    )
    num_obs = 13
    num_actions = 6
    state_buffers = FlyingTask.state_buffers + ("targets",)

    def make_terminal(self, ids: Selection) -> None:
        """The chassis near the floor, below 0.5 m."""
        self.qpos[ids, 2] = 0.2

    def setup(self) -> None:
        on = self.sim_device
        self.targets = torch.zeros(self.num_envs, 3, device=on)
        self.target_low = torch.tensor(TARGET_LOW, device=on)
        self.target_high = torch.tensor(TARGET_HIGH, device=on)
        self.start = torch.tensor(START, device=on)
        self.rotor_bodies = torch.tensor(ROTOR_BODIES, device=on)
        self.cap_angular_speed()

    def set_controls(self, actions: torch.Tensor, n: int) -> None:
        """IsaacGymEnvs' pre_physics_step: new targets at every 500th step of an episode, then each rotor's force
        from its three actions, in the chassis' frame, turned into the world frame."""
        due = (self.progress[:n] > 0) & (self.progress[:n] % TARGET_PERIOD == 0)
        if bool(due.any()):
            self._new_targets(due.nonzero().flatten())
        forces = rotor_forces(actions, self.dt)  # (n, 2, 3) in the chassis' frame
        quat = self.qpos[:n, 3:7].float().unsqueeze(1).expand(-1, 2, -1).reshape(-1, 4)
        world = rotate(quat, forces.reshape(-1, 3)).view(n, 2, 3)
        self.derived["xfrc_applied"][:n, self.rotor_bodies, 0:3] = world.to(self.derived["xfrc_applied"].dtype)

    def _new_targets(self, ids: torch.Tensor) -> None:
        u = torch.rand(ids.numel(), 3, generator=self.generator, device=self.sim_device)
        self.targets[ids] = self.target_low + (self.target_high - self.target_low) * u

    def show(self, data: Any, env: int) -> None:
        """The target marker (a mocap sphere) at env's target."""
        data.mocap_pos[0] = self.targets[env].tolist()

    # ----------------------------------------------------------------------------------------------
    # the task

    def compute_observations(self, sel: Selection) -> torch.Tensor:
        return self.chassis_observations(sel, self.targets[sel])

    def compute_reward(self, obs: torch.Tensor, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        position, quat, _, angvel = self.chassis(sel)
        reward, terminated, terms, distance, tilt = ingenuity_reward(position, self.targets[sel], quat, angvel)
        self.reward_terms = terms
        self.measures = {"target_distance_m": distance, "tilt": tilt}
        return reward, terminated

    def reset_state(self, ids: torch.Tensor) -> None:
        # the simulator's reset put the chassis at (0, 0, 1), upright, at rest, and zeroed the forces
        k, on = ids.numel(), self.sim_device
        u = torch.rand(k, 3, generator=self.generator, device=on)
        low = torch.tensor((-1.5, -1.5, -0.2), device=on)
        high = torch.tensor((1.5, 1.5, 1.5), device=on)
        self.qpos[ids, 0:3] = (self.start + low + (high - low) * u).to(self.qpos.dtype)
        self._new_targets(ids)


def rotor_forces(actions: torch.Tensor, dt: float) -> torch.Tensor:
    """IsaacGymEnvs' thrusts: (envs, 2, 3) forces in N in the chassis' frame from the 6 actions (lower rotor's x, y,
    z, then the upper's): vertical = clamp(2000 x z, +-2000) x dt, lateral = vertical x clamp(x or y, +-0.2)."""
    per_rotor = actions.view(-1, 2, 3)
    vertical = (per_rotor[..., 2] * THRUST_SPEED).clamp(-THRUST_SPEED, THRUST_SPEED) * dt
    lateral = per_rotor[..., 0:2].clamp(-LATERAL_FRACTION, LATERAL_FRACTION) * vertical.unsqueeze(-1)
    return torch.cat((lateral, vertical.unsqueeze(-1)), dim=-1)


def ingenuity_reward(position: torch.Tensor, target: torch.Tensor, quat: torch.Tensor,
                     angvel: torch.Tensor) -> Tuple[Any, ...]:
    """IsaacGymEnvs' compute_ingenuity_reward: (reward, terminal, its terms, the distance to the target in m, the
    tilt) of each chassis; quat (w, x, y, z), angvel in the world frame. Uprightness weighs 5 (Quadcopter's: 1)."""
    distance = (target - position).norm(dim=1)
    reward, terms, tilt = hover_reward(distance, quat, angvel, upright_scale=5.0)
    terminated = (distance > 8.0) | (position[:, 2] < 0.5)
    return reward, terminated, terms, distance, tilt
