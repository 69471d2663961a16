"""What the in-hand reorientation tasks share (ShadowHand, AllegroHand): IsaacGymEnvs 1.5.1 writes them as two
copies of one task (shadow_hand.py, allegro_hand.py), and so does the port, once, here.

- The block's state from its free joint (position, (x, y, z, w) quaternion, world-frame velocities).
- The actions: absolute joint targets (scale [-1, 1] to each actuated joint's range), averaged with the previous
  targets by actionsMovingAverage, clamped; or relative (useRelativeControl): previous + dofSpeedScale x dt x action.
- The reward, IsaacGymEnvs' compute_hand_reward for the block: distRewardScale x |block - goal position| +
  rotRewardScale / (rotation distance + rotEps) + actionPenaltyScale x |a|^2, + reachGoalBonus on a success (the
  rotation distance within successTolerance), + fallPenalty on a fall (fallDistance from the goal position).
  A success draws a new goal without ending the episode; maxConsecutiveSuccesses > 0 ends it after that many and
  restarts the time budget at each success.
- Goals: IsaacGymEnvs' randomize_rotation (two angles); consecutive_successes, its running mean (averFactor) of
  the successes of the episodes that end.
- The reset: a new goal, the block at its start position + resetPositionNoise x U(-1, 1) per axis, turned by a
  random_rotation, the joints at resetDofPosRandomInterval x a draw over their range (no clamp: IsaacGymEnvs'),
  velocities resetDofVelRandomInterval x U(-1, 1), the targets at the drawn joints.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Tuple

import torch

from isaac_ppo.domains import boolean, positive, real
from isaac_ppo.tasks.base import MujocoTask, Selection
from isaac_ppo.tasks.legged.common import rotate
from isaac_ppo.tasks.manipulation.kinematics import axis_angle_quat, quat_mul

# the parameters both hands read, with IsaacGymEnvs' key names: a success tolerance and a fall distance above 0;
# the moving average's weight in (0, 1]; the reward's signed scales as IsaacGymEnvs has them (distance and action
# penalties at 0 or below, the rotation pay and success bonus at 0 or above, a fall penalty at 0 or below)
HAND_REWARD_TERMS = ("distance", "rotation", "action_penalty", "success_bonus", "fall_penalty")  # (both hands)
IN_HAND_DOMAINS = {
    "env.asymmetric_observations": boolean(), "env.useRelativeControl": boolean(), "env.dofSpeedScale": positive(),
    "env.actionsMovingAverage": real(0.0, 1.0),
    "env.resetPositionNoise": real(0.0), "env.resetDofPosRandomInterval": real(0.0, 1.0),
    "env.resetDofVelRandomInterval": real(0.0),
    "env.distRewardScale": real(None, 0.0), "env.rotRewardScale": real(0.0), "env.rotEps": positive(),
    "env.actionPenaltyScale": real(None, 0.0), "env.reachGoalBonus": real(0.0), "env.fallDistance": positive(),
    "env.fallPenalty": real(None, 0.0), "env.successTolerance": positive(),
}

SCALE_KEYS = ("distRewardScale", "rotRewardScale", "rotEps", "actionPenaltyScale", "reachGoalBonus", "fallDistance",
              "fallPenalty", "successTolerance", "averFactor", "actionsMovingAverage", "dofSpeedScale",
              "resetPositionNoise", "resetDofPosRandomInterval", "resetDofVelRandomInterval")


def quat_conjugate(q: torch.Tensor) -> torch.Tensor:
    return torch.cat((-q[..., :3], q[..., 3:]), dim=-1)


def random_rotation(u0: torch.Tensor, u1: torch.Tensor) -> torch.Tensor:
    """IsaacGymEnvs' randomize_rotation: a turn of u0 x pi about x, then of u1 x pi about y (u in [-1, 1]): two
    angles, not a uniform draw over every orientation (kept)."""
    x = torch.tensor([1.0, 0.0, 0.0], device=u0.device).expand(len(u0), 3)
    y = torch.tensor([0.0, 1.0, 0.0], device=u0.device).expand(len(u0), 3)
    return quat_mul(axis_angle_quat(u0 * math.pi, x), axis_angle_quat(u1 * math.pi, y))


def hand_reward(position: torch.Tensor, quat: torch.Tensor, goal_position: torch.Tensor, goal_rot: torch.Tensor,
                actions: torch.Tensor, s: Dict[str, float]):
    """IsaacGymEnvs' compute_hand_reward (block): (reward, goal reached, fell, terms, rotation distance)."""
    distance = (position - goal_position).norm(dim=1)
    diff = quat_mul(quat, quat_conjugate(goal_rot))
    rotation = 2.0 * torch.asin(torch.clamp(diff[:, :3].norm(dim=1), max=1.0))
    reached = rotation.abs() <= s["successTolerance"]
    fell = distance >= s["fallDistance"]
    terms = {
        "distance": s["distRewardScale"] * distance,
        "rotation": s["rotRewardScale"] / (rotation.abs() + s["rotEps"]),
        "action_penalty": s["actionPenaltyScale"] * (actions ** 2).sum(dim=1),
        "success_bonus": s["reachGoalBonus"] * reached.float(),
        "fall_penalty": s["fallPenalty"] * fell.float(),
    }
    return sum(terms.values()), reached, fell, terms, rotation


class InHandTask(MujocoTask):
    """A fixed hand (its joints first in qpos, HAND_DOFS of them, one position actuator per actuated joint) that
    turns a free block (the model's joint "object:joint") to goal orientations; the goal block, for a video, is the
    model's one mocap body. A subclass sets the class constants and writes its observations, calling
    hand_setup() in its setup() and in_hand_reward() in its compute_reward()."""

    HAND_DOFS = 0
    OBJECT_START: Tuple[float, float, float] = (0.0, 0.0, 0.0)  # the block's start position (world)
    GOAL_POSITION: Tuple[float, float, float] = (0.0, 0.0, 0.0)  # the goal's position for the reward
    DROP_POSITION: Tuple[float, float, float] = (0.0, 0.0, 0.0)  # make_terminal's: past fallDistance from the goal
    state_buffers = MujocoTask.state_buffers + ("targets", "goal_rot", "successes")

    @classmethod
    def control_step_of(cls, cfg: Mapping[str, Any]) -> float:
        """IsaacGymEnvs' VecTask: controlFrequencyInv physics steps of sim.dt a control step (AllegroHand 2,
        ShadowHandOpenAI_FF 3, ShadowHand 1)."""
        return float(cfg["sim"]["dt"]) * int(cfg["env"].get("controlFrequencyInv", 1))

    def hand_setup(self) -> None:
        """The hand's limits, the block's rows, the goal and success buffers and the scales."""
        on, model, env = self.sim_device, self.model, self.cfg["env"]
        self.actuated = torch.tensor([int(model.jnt_dofadr[model.actuator_trnid[a, 0]]) for a in range(model.nu)],
                                     device=on)
        self.hand_lower = torch.tensor(model.jnt_range[:self.HAND_DOFS, 0], dtype=torch.float32, device=on)
        self.hand_upper = torch.tensor(model.jnt_range[:self.HAND_DOFS, 1], dtype=torch.float32, device=on)
        self.lower, self.upper = self.hand_lower[self.actuated], self.hand_upper[self.actuated]
        block = model.joint("object:joint")
        self.block_qpos, self.block_qvel = int(block.qposadr[0]), int(block.dofadr[0])
        self.goal_position = torch.tensor(self.GOAL_POSITION, device=on)
        self.start_position = torch.tensor(self.OBJECT_START, device=on)
        self.targets = torch.zeros(self.num_envs, self.num_actions, device=on)
        self.goal_rot = torch.zeros(self.num_envs, 4, device=on)
        self.goal_rot[:, 3] = 1.0
        self.successes = torch.zeros(self.num_envs, device=on)
        self.consecutive_successes = torch.zeros((), device=on)
        self.scales = {key: float(env[key]) for key in SCALE_KEYS}
        self.max_successes = int(env["maxConsecutiveSuccesses"])
        self.relative = bool(env["useRelativeControl"])
        self.target_dt = float(self.cfg["sim"]["dt"])  # relative control's step: IsaacGymEnvs' self.dt, sim.dt

    def set_controls(self, actions: torch.Tensor, n: int) -> None:
        if self.relative:
            targets = self.targets[:n] + self.scales["dofSpeedScale"] * self.target_dt * actions
        else:
            scaled = self.lower + 0.5 * (actions + 1.0) * (self.upper - self.lower)
            alpha = self.scales["actionsMovingAverage"]
            targets = alpha * scaled + (1.0 - alpha) * self.targets[:n]
        self.targets[:n] = torch.max(torch.min(targets, self.upper), self.lower)
        self.ctrl[:n] = self.targets[:n].to(self.ctrl.dtype)

    def block(self, sel: Selection) -> Dict[str, torch.Tensor]:
        """The block's position, (x, y, z, w) quaternion, linear and angular velocity (world frame)."""
        qpos, qvel = self.qpos[sel].float(), self.qvel[sel].float()
        at = self.block_qpos
        wxyz = qpos[:, at + 3:at + 7]
        quat = torch.cat((wxyz[:, 1:], wxyz[:, :1]), dim=1)
        local_angular = qvel[:, self.block_qvel + 3:self.block_qvel + 6]  # (a free joint's: in the body frame)
        angular = rotate(wxyz, local_angular)
        return {"pos": qpos[:, at:at + 3], "quat": quat, "linvel": qvel[:, self.block_qvel:self.block_qvel + 3],
                "angvel": angular}

    def in_hand_reward(self, position: torch.Tensor, quat: torch.Tensor,
                       sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        """compute_reward from the block's position and (x, y, z, w) quaternion: the reward and the terminal flags;
        counts the successes, draws the new goals, sets the terms, measures and outcomes."""
        reward, reached, fell, terms, rotation = hand_reward(position, quat, self.goal_position, self.goal_rot[sel],
                                                             self.last_actions[sel], self.scales)
        ids = torch.arange(self.num_envs, device=self.sim_device)[sel]
        self.successes[ids] += reached.float()
        terminated = fell
        if self.max_successes > 0:
            self.progress[ids[reached]] = 0  # (a success restarts the time budget)
            terminated = terminated | (self.successes[ids] >= self.max_successes)
            # IsaacGymEnvs' + 0.5 x fallPenalty on a time-out (the step the base class times out on: progress at the
            # episode's length)
            timed_out = (self.progress[ids] >= self.max_episode_length).float()
            terms["fall_penalty"] = terms["fall_penalty"] + 0.5 * self.scales["fallPenalty"] * timed_out
            reward = sum(terms.values())
        self.reward_terms = terms
        self.measures = {"rotation_distance_rad": rotation,
                         "goal_distance_m": (position - self.goal_position).norm(dim=1)}
        self.outcomes = {"successes": self.successes[ids].clone()}
        if reached.any():  # a new goal for the next step (IsaacGymEnvs applies it as the next step begins)
            self._new_goals(ids[reached])
        return reward, terminated

    def before_reset(self, ids: torch.Tensor, diverged: Any) -> None:
        """IsaacGymEnvs' consecutive_successes: an average (factor averFactor) of the successes of the episodes
        that end, per step with endings."""
        if diverged is None or not len(ids):
            return
        finished = self.successes[ids].sum() / len(ids)
        a = self.scales["averFactor"]
        self.consecutive_successes = a * finished + (1 - a) * self.consecutive_successes

    def task_state(self) -> Dict[str, torch.Tensor]:
        return {"consecutive_successes": self.consecutive_successes}

    def show(self, data: Any, env: int) -> None:
        """The goal block (a mocap body, beside the hand as IsaacGymEnvs draws it) turned to env's goal."""
        x, y, z, w = self.goal_rot[env].tolist()
        data.mocap_quat[0] = (w, x, y, z)

    def _new_goals(self, ids: torch.Tensor) -> None:
        u = 2.0 * torch.rand(len(ids), 2, generator=self.generator, device=self.sim_device) - 1.0
        self.goal_rot[ids] = random_rotation(u[:, 0], u[:, 1])

    def make_terminal(self, ids: Selection) -> None:
        """The block dropped beside the hand, past fallDistance from the goal position."""
        self.qpos[ids, self.block_qpos:self.block_qpos + 3] = torch.tensor(self.DROP_POSITION, dtype=self.qpos.dtype,
                                                                           device=self.qpos.device)

    def reset_state(self, ids: torch.Tensor) -> None:
        k, on, s, dofs = ids.numel(), self.sim_device, self.scales, self.HAND_DOFS
        self._new_goals(ids)
        u = 2.0 * torch.rand(k, 5 + 2 * dofs, generator=self.generator, device=on) - 1.0
        position = self.start_position + s["resetPositionNoise"] * u[:, 0:3]
        quat = random_rotation(u[:, 3], u[:, 4])
        at = self.block_qpos
        self.qpos[ids, at:at + 3] = position.to(self.qpos.dtype)
        self.qpos[ids, at + 3:at + 7] = torch.cat((quat[:, 3:], quat[:, :3]), dim=1).to(self.qpos.dtype)
        spread = self.hand_lower + (self.hand_upper - self.hand_lower) * 0.5 * (u[:, 5:5 + dofs] + 1.0)
        joints = s["resetDofPosRandomInterval"] * spread
        self.qpos[ids, :dofs] = joints.to(self.qpos.dtype)
        self.qvel[ids, :dofs] = (s["resetDofVelRandomInterval"] * u[:, 5 + dofs:]).to(self.qvel.dtype)
        self.targets[ids] = joints[:, self.actuated]
        self.successes[ids] = 0.0
