"""ShadowHand (block): IsaacGymEnvs' in-hand reorientation on MuJoCo (act 20; obs 42 / 77 / 157 / 211 by
env.observationType; with asymmetric=true the critic gets the 211 of full_state). The model (assets/shadow_hand.xml)
states the facts it follows and every deliberate difference from Isaac Gym's hand in its header.

A Shadow Hand (24 hinges, 20 position drives; each finger's distal joint follows its middle one through a fixed
tendon), palm up, holds a 5 cm block; a goal orientation is drawn, and the block must be turned to it (success within
successTolerance rad), then a new goal is drawn without ending the episode. The episode ends when the block falls
(0.24 m from the goal position) or at the time-out.

Obs (IsaacGymEnvs' compute_*_observations, index for index; quaternions in its (x, y, z, w) order, positions in the
env frame; "fingertips" are the five distal bodies' frames, as IsaacGymEnvs' rigid-body states of them):
- openai (42): fingertip positions 5 x 3, the block's position, quat(block) * conj(quat(goal)), the actions (20).
- full_no_vel (77): joint positions scaled to [-1, 1] (24), block pose (7), goal pose (7), that quaternion (4),
  fingertip positions (15), actions (20).
- full (157): joint positions (24), velocities x 0.2 (24), block pose (7), linear velocity (3), angular velocity x
  0.2 (3), goal pose (7), the quaternion (4), fingertip states (position, quaternion, linear and angular velocity)
  5 x 13, actions (20).
- full_state (211): as full, with the joints' drive forces x 10 (24) after the velocities, and the fingertips'
  force-torque readings x 10 (5 x 6) after their states.
Act: absolute joint targets (scale [-1, 1] to each actuated joint's range), averaged with the previous targets by
actionsMovingAverage, clamped; or relative (useRelativeControl): previous + dofSpeedScale x dt x action.
Reward (IsaacGymEnvs' compute_hand_reward): distRewardScale x |block - goal position| + rotRewardScale / (rotation
distance + rotEps) + actionPenaltyScale x |a|^2, + reachGoalBonus on a success, + fallPenalty on a fall.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Tuple

import torch

from isaac_ppo.domains import boolean, choice, integer, positive, real, thresholds
from isaac_ppo.envs.registry import ContractFacts, Gait, TaskSpec
from isaac_ppo.tasks.base import MujocoTask, Selection
from isaac_ppo.tasks.legged.common import rotate
from isaac_ppo.tasks.manipulation.kinematics import Kinematics, axis_angle_quat, quat_mul

FINGERTIPS = ("robot0:ffdistal", "robot0:mfdistal", "robot0:rfdistal", "robot0:lfdistal", "robot0:thdistal")
SENSOR_SITES = ("ff", "mf", "rf", "lf", "th")
OBJECT_START = (0.0, -0.39, 0.60)  # the block's start position (hand at (0, 0, 0.5) + (0, -0.39, 0.10))
GOAL_POSITION = (0.0, -0.39, 0.56)  # the goal's position for the reward: the start, 4 cm lower
VELOCITY_SCALE, FORCE_SCALE = 0.2, 10.0
OBS_SIZES = {"openai": 42, "full_no_vel": 77, "full": 157, "full_state": 211}
HAND_DOFS = 24


def quat_conjugate(q: torch.Tensor) -> torch.Tensor:
    return torch.cat((-q[..., :3], q[..., 3:]), dim=-1)


def random_rotation(u0: torch.Tensor, u1: torch.Tensor) -> torch.Tensor:
    """IsaacGymEnvs' randomize_rotation: a turn of u0 x pi about x, then of u1 x pi about y (u in [-1, 1]): two
    angles, not a uniform draw over every orientation (kept)."""
    x = torch.tensor([1.0, 0.0, 0.0], device=u0.device).expand(len(u0), 3)
    y = torch.tensor([0.0, 1.0, 0.0], device=u0.device).expand(len(u0), 3)
    return quat_mul(axis_angle_quat(u0 * math.pi, x), axis_angle_quat(u1 * math.pi, y))


# IsaacGymEnvs' observation types; a success tolerance and a fall distance above 0; the moving average's weight in
# (0, 1]; the reward's signed scales as IsaacGymEnvs has them (distance and action penalties at 0 or below, the
# rotation pay and success bonus at 0 or above, a fall penalty at 0 or below)
SHADOW_HAND_DOMAINS = {
    "env.observationType": choice("openai", "full_no_vel", "full", "full_state"), "env.objectType": choice("block"),
    "env.asymmetric_observations": boolean(), "env.useRelativeControl": boolean(), "env.dofSpeedScale": positive(),
    "env.actionsMovingAverage": real(0.0, 1.0), "env.controlFrequencyInv": integer(1, 1),
    "env.resetPositionNoise": real(0.0), "env.resetDofPosRandomInterval": real(0.0, 1.0),
    "env.resetDofVelRandomInterval": real(0.0),
    "env.distRewardScale": real(None, 0.0), "env.rotRewardScale": real(0.0), "env.rotEps": positive(),
    "env.actionPenaltyScale": real(None, 0.0), "env.reachGoalBonus": real(0.0), "env.fallDistance": positive(),
    "env.fallPenalty": real(None, 0.0), "env.successTolerance": positive(), "env.maxConsecutiveSuccesses": integer(0),
    "env.averFactor": real(0.0, 1.0),
}


class ShadowHand(MujocoTask):
    spec = TaskSpec(
        name="ShadowHand", model="assets/shadow_hand.xml", domains=SHADOW_HAND_DOMAINS,
        actors={"hand": "robot0:hand mount", "object": "object"},
        reward_terms=("distance", "rotation", "action_penalty", "success_bonus", "fall_penalty"),
        critic_observations="full_state's 211 (IsaacGymEnvs' states)",
        gait=Gait("block"),
        solve_measures={"successes": thresholds(0.0)},  # (goals reached per evaluation episode)
        contract=ContractFacts(last_actions_in_obs=True, reset_column=85),  # (85: the goal's x, fixed)
    )
    num_actions = 20
    critic_obs = 211
    derived_fields: Tuple[str, ...] = ("sensordata", "qfrc_actuator")
    state_buffers = MujocoTask.state_buffers + ("targets", "goal_rot", "successes")

    def __init__(self, cfg: Any, *args: Any, **kwargs: Any):
        self.observation_type = str(cfg["env"]["observationType"])
        self.num_obs = OBS_SIZES[self.observation_type]
        super().__init__(cfg, *args, **kwargs)

    def setup(self) -> None:
        on, model, env = self.sim_device, self.model, self.cfg["env"]
        self.actuated = torch.tensor([int(model.jnt_dofadr[model.actuator_trnid[a, 0]]) for a in range(model.nu)],
                                     device=on)
        self.hand_lower = torch.tensor(model.jnt_range[:HAND_DOFS, 0], dtype=torch.float32, device=on)
        self.hand_upper = torch.tensor(model.jnt_range[:HAND_DOFS, 1], dtype=torch.float32, device=on)
        self.lower, self.upper = self.hand_lower[self.actuated], self.hand_upper[self.actuated]
        block = model.joint("object:joint")
        self.block_qpos, self.block_qvel = int(block.qposadr[0]), int(block.dofadr[0])
        self.kinematics = Kinematics(model, FINGERTIPS, on)
        self.sensor_rows = torch.cat([torch.arange(int(model.sensor(f"ft_{kind}_{tip}").adr[0]),
                                                   int(model.sensor(f"ft_{kind}_{tip}").adr[0]) + 3)
                                      for tip in SENSOR_SITES for kind in ("force", "torque")]).to(on)
        self.goal_position = torch.tensor(GOAL_POSITION, device=on)
        self.start_position = torch.tensor(OBJECT_START, device=on)
        self.targets = torch.zeros(self.num_envs, self.num_actions, device=on)
        self.goal_rot = torch.zeros(self.num_envs, 4, device=on)
        self.goal_rot[:, 3] = 1.0
        self.successes = torch.zeros(self.num_envs, device=on)
        self.consecutive_successes = torch.zeros((), device=on)
        self.scales = {key: float(env[key]) for key in (
            "distRewardScale", "rotRewardScale", "rotEps", "actionPenaltyScale", "reachGoalBonus", "fallDistance",
            "fallPenalty", "successTolerance", "averFactor", "actionsMovingAverage", "dofSpeedScale",
            "resetPositionNoise", "resetDofPosRandomInterval", "resetDofVelRandomInterval")}
        self.max_successes = int(env["maxConsecutiveSuccesses"])
        self.relative = bool(env["useRelativeControl"])

    def set_controls(self, actions: torch.Tensor, n: int) -> None:
        if self.relative:
            targets = self.targets[:n] + self.scales["dofSpeedScale"] * self.dt * actions
        else:
            scaled = self.lower + 0.5 * (actions + 1.0) * (self.upper - self.lower)
            alpha = self.scales["actionsMovingAverage"]
            targets = alpha * scaled + (1.0 - alpha) * self.targets[:n]
        self.targets[:n] = torch.max(torch.min(targets, self.upper), self.lower)
        self.ctrl[:n] = self.targets[:n].to(self.ctrl.dtype)

    # ----------------------------------------------------------------------------------------------
    # quantities of the state

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

    def fingertips(self, sel: Selection) -> torch.Tensor:
        """(envs, 5, 13): each distal body's position, (x, y, z, w) quaternion (composed along the finger, as
        MuJoCo's xquat), linear velocity of its origin and angular velocity, world frame."""
        states = self.kinematics.states(self.qpos[sel], self.qvel[sel])
        rows = []
        for name in FINGERTIPS:
            pos, _, quat, lin, ang = states[name]
            rows.append(torch.cat((pos, quat, lin, ang), dim=1))
        return torch.stack(rows, dim=1)

    # ----------------------------------------------------------------------------------------------
    # the task

    def _full_state(self, sel: Selection) -> torch.Tensor:
        qpos, qvel = self.qpos[sel].float(), self.qvel[sel].float()
        joints = qpos[:, :HAND_DOFS]
        scaled = (2.0 * joints - self.hand_upper - self.hand_lower) / (self.hand_upper - self.hand_lower)
        block = self.block(sel)
        goal_rot = self.goal_rot[sel]
        n = joints.shape[0]
        goal = torch.cat((self.goal_position.expand(n, 3), goal_rot), dim=1)
        tips = self.fingertips(sel)
        forces = self.derived["qfrc_actuator"][sel][:, :HAND_DOFS].float()
        readings = self.derived["sensordata"][sel][:, self.sensor_rows].float()
        return torch.cat((scaled, VELOCITY_SCALE * qvel[:, :HAND_DOFS], FORCE_SCALE * forces,
                          block["pos"], block["quat"], block["linvel"], VELOCITY_SCALE * block["angvel"], goal,
                          quat_mul(block["quat"], quat_conjugate(goal_rot)), tips.reshape(n, 65),
                          FORCE_SCALE * readings, self.last_actions[sel]), dim=1)

    def compute_observations(self, sel: Selection) -> torch.Tensor:
        full = self._full_state(sel)
        self._full = full
        kind = self.observation_type
        if kind == "full_state":
            return full
        joints, velocities, block, goal, diff = full[:, 0:24], full[:, 24:48], full[:, 72:85], full[:, 85:92], \
            full[:, 92:96]
        tips, actions = full[:, 96:161].reshape(-1, 5, 13), full[:, 191:211]
        if kind == "openai":
            return torch.cat((tips[:, :, 0:3].reshape(-1, 15), block[:, 0:3], diff, actions), dim=1)
        if kind == "full_no_vel":
            return torch.cat((joints, block[:, 0:7], goal, diff, tips[:, :, 0:3].reshape(-1, 15), actions), dim=1)
        return torch.cat((joints, velocities, block, goal, diff, tips.reshape(-1, 65), actions), dim=1)  # full

    def compute_states(self, obs: torch.Tensor, sel: Selection) -> torch.Tensor:
        return self._full if self.observation_type != "full_state" else obs

    def compute_reward(self, obs: torch.Tensor, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        full, s = self._full, self.scales
        position, quat = full[:, 72:75], full[:, 75:79]
        reward, reached, fell, terms, rotation = hand_reward(position, quat, self.goal_position, self.goal_rot[sel],
                                                             self.last_actions[sel], s)
        ids = torch.arange(self.num_envs, device=self.sim_device)[sel]
        self.successes[ids] += reached.float()
        terminated = fell
        if self.max_successes > 0:
            self.progress[ids[reached]] = 0  # (a success restarts the time budget)
            terminated = terminated | (self.successes[ids] >= self.max_successes)
        self.reward_terms = terms
        self.measures = {"rotation_distance_rad": rotation, "goal_distance_m": (position - self.goal_position).norm(dim=1)}
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
        """The block dropped beside the hand, 0.36 m below the goal position."""
        self.qpos[ids, self.block_qpos:self.block_qpos + 3] = torch.tensor([0.3, -0.39, 0.2], dtype=self.qpos.dtype,
                                                                           device=self.qpos.device)

    def reset_state(self, ids: torch.Tensor) -> None:
        k, on, s = ids.numel(), self.sim_device, self.scales
        self._new_goals(ids)
        u = 2.0 * torch.rand(k, 5 + 2 * HAND_DOFS, generator=self.generator, device=on) - 1.0
        position = self.start_position + s["resetPositionNoise"] * u[:, 0:3]
        quat = random_rotation(u[:, 3], u[:, 4])
        at = self.block_qpos
        self.qpos[ids, at:at + 3] = position.to(self.qpos.dtype)
        self.qpos[ids, at + 3:at + 7] = torch.cat((quat[:, 3:], quat[:, :3]), dim=1).to(self.qpos.dtype)
        spread = self.hand_lower + (self.hand_upper - self.hand_lower) * 0.5 * (u[:, 5:5 + HAND_DOFS] + 1.0)
        joints = s["resetDofPosRandomInterval"] * spread
        self.qpos[ids, :HAND_DOFS] = joints.to(self.qpos.dtype)
        self.qvel[ids, :HAND_DOFS] = (s["resetDofVelRandomInterval"] * u[:, 5 + HAND_DOFS:]).to(self.qvel.dtype)
        self.targets[ids] = joints[:, self.actuated]
        self.successes[ids] = 0.0


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
