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
The actions, the reward, goals, successes and the reset are written once for both hands (hand.py's InHandTask).

IsaacGymEnvs' shadow_hand.py also holds what its ShadowHandOpenAI variants switch on (ShadowHandOpenAI in
shadow_hand_openai.py declares that task; with ShadowHand.yaml's values each of these is off):
- controlFrequencyInv physics steps of sim.dt a control step (its VecTask's repeat; 3: 20 Hz).
- resetTime > 0: the episode lasts round(resetTime / (controlFrequencyInv x sim.dt)) control steps, replacing
  episodeLength, as there.
- Random forces on the block (forceScale > 0): each env's chance per control step, drawn once log-uniform in
  forceProbRange; a force drawn N(0, 1) per axis x the block's mass x forceScale, in the block's frame (IsaacGymEnvs'
  LOCAL_SPACE), replacing the env's force; every force decays by forceDecay ^ (sim.dt / forceDecayInterval) a
  control step: IsaacGymEnvs' self.dt is sim.dt, so at controlFrequencyInv 3 the decay runs a third as fast as its
  name says (kept). Zeroed at a reset. Here the force is turned into the world frame once a control step (from the
  block's orientation as the step begins) and held through its physics steps (MuJoCo's xfrc_applied), where PhysX
  applies the body-frame force anew at each of its physics steps: the block turns a few degrees within a 1/20 s
  step. The mass is the model's, not a randomised one (IsaacGymEnvs: "we are not using new mass values after DR").
"""
from __future__ import annotations

import math
from typing import Any, Dict, Tuple

import torch

from isaac_ppo.domains import choice, integer, pair, positive, real, thresholds
from isaac_ppo.envs.registry import ContractFacts, Gait, TaskSpec
from isaac_ppo.tasks.base import Selection
from isaac_ppo.tasks.manipulation.hand import (HAND_REWARD_TERMS, IN_HAND_DOMAINS, InHandTask, hand_reward,
                                               quat_conjugate, random_rotation)
from isaac_ppo.tasks.legged.common import rotate
from isaac_ppo.tasks.manipulation.kinematics import Kinematics, quat_mul

__all__ = ["ShadowHand", "FINGERTIPS", "GOAL_POSITION", "OBS_SIZES", "hand_reward", "quat_conjugate", "quat_mul",
           "random_rotation"]

FINGERTIPS = ("robot0:ffdistal", "robot0:mfdistal", "robot0:rfdistal", "robot0:lfdistal", "robot0:thdistal")
SENSOR_SITES = ("ff", "mf", "rf", "lf", "th")
OBJECT_START = (0.0, -0.39, 0.60)  # the block's start position (hand at (0, 0, 0.5) + (0, -0.39, 0.10))
GOAL_POSITION = (0.0, -0.39, 0.56)  # the goal's position for the reward: the start, 4 cm lower
VELOCITY_SCALE, FORCE_SCALE = 0.2, 10.0
OBS_SIZES = {"openai": 42, "full_no_vel": 77, "full": 157, "full_state": 211}
HAND_DOFS = 24


# IsaacGymEnvs' observation types, its block only, the control step's physics steps, the episode in seconds, the
# random forces (chances in (0, 1], a decay in [0, 1]), and the in-hand parameters both hands share (hand.py)
SHADOW_HAND_DOMAINS = dict(IN_HAND_DOMAINS, **{
    "env.observationType": choice("openai", "full_no_vel", "full", "full_state"), "env.objectType": choice("block"),
    "env.controlFrequencyInv": integer(1), "env.maxConsecutiveSuccesses": integer(0),
    "env.averFactor": real(0.0, 1.0), "env.resetTime": real(),
    "env.forceScale": real(0.0), "env.forceProbRange": pair(0.0, 1.0, low_open=True),
    "env.forceDecay": real(0.0, 1.0), "env.forceDecayInterval": positive(),
})


class ShadowHand(InHandTask):
    spec = TaskSpec(
        name="ShadowHand", model="assets/shadow_hand.xml", domains=SHADOW_HAND_DOMAINS,
        actors={"hand": "robot0:hand mount", "object": "object"},
        reward_terms=HAND_REWARD_TERMS,
        critic_observations="full_state's 211 (IsaacGymEnvs' states)",
        gait=Gait("block"),
        solve_measures={"successes": thresholds(0.0)},  # (goals reached per evaluation episode)
        contract=ContractFacts(last_actions_in_obs=True, reset_column=85),  # (85: the goal's x, fixed)
    )
    num_actions = 20
    critic_obs = 211
    derived_fields: Tuple[str, ...] = ("sensordata", "qfrc_actuator")
    HAND_DOFS = HAND_DOFS
    OBJECT_START = OBJECT_START
    GOAL_POSITION = GOAL_POSITION
    DROP_POSITION = (0.3, -0.39, 0.2)  # (the block beside the hand, 0.36 m below the goal position)

    def __init__(self, cfg: Any, *args: Any, **kwargs: Any):
        env = cfg["env"]
        self.observation_type = str(env["observationType"])
        self.num_obs = OBS_SIZES[self.observation_type]
        self.force_scale = float(env.get("forceScale", 0.0))  # (IsaacGymEnvs' defaults where its YAML has none)
        if self.force_scale > 0:  # the forces are written into the block's xfrc_applied; a resume carries them
            self.derived_fields = type(self).derived_fields + ("xfrc_applied",)
            self.state_buffers = type(self).state_buffers + ("forces", "force_prob")
        super().__init__(cfg, *args, **kwargs)

    def episode_length_steps(self) -> int:
        """episodeLength, or with resetTime > 0, IsaacGymEnvs' round(resetTime / (controlFrequencyInv x sim.dt))."""
        reset_time = float(self.cfg["env"].get("resetTime", -1.0))
        return int(round(reset_time / self.dt)) if reset_time > 0 else int(self.cfg["env"]["episodeLength"])

    @classmethod
    def episode_overrides(cls, cfg: Any, steps: int) -> Dict[str, Any]:
        return {"episodeLength": steps, "resetTime": -1.0} if "resetTime" in cfg["env"] else {"episodeLength": steps}

    def setup(self) -> None:
        self.hand_setup()
        on, model, env = self.sim_device, self.model, self.cfg["env"]
        if self.force_scale > 0:
            low, high = (float(p) for p in env.get("forceProbRange", (0.001, 0.1)))
            u = torch.rand(self.num_envs, generator=self.generator, device=on)
            self.force_prob = torch.exp((math.log(low) - math.log(high)) * u + math.log(high))  # (as there)
            self.forces = torch.zeros(self.num_envs, 3, device=on)  # in the block's frame
            self.force_decay = float(env.get("forceDecay", 0.99)) ** (
                float(self.cfg["sim"]["dt"]) / float(env.get("forceDecayInterval", 0.08)))
            self.block_body = int(model.body("object").id)
            self.block_mass = float(model.body_mass[self.block_body])
        self.kinematics = Kinematics(model, FINGERTIPS, on)
        self.sensor_rows = torch.cat([torch.arange(int(model.sensor(f"ft_{kind}_{tip}").adr[0]),
                                                   int(model.sensor(f"ft_{kind}_{tip}").adr[0]) + 3)
                                      for tip in SENSOR_SITES for kind in ("force", "torque")]).to(on)

    def set_controls(self, actions: torch.Tensor, n: int) -> None:
        """The joint targets (hand.py), then IsaacGymEnvs' random forces on the block (module docstring)."""
        super().set_controls(actions, n)
        if self.force_scale <= 0:
            return
        self.forces[:n] *= self.force_decay
        hit = torch.rand(n, generator=self.generator, device=self.sim_device) < self.force_prob[:n]
        drawn = torch.randn(n, 3, generator=self.generator, device=self.sim_device)
        self.forces[:n] = torch.where(hit[:, None], drawn * self.block_mass * self.force_scale, self.forces[:n])
        at = self.block_qpos + 3
        world = rotate(self.qpos[:n, at:at + 4].float(), self.forces[:n])
        xfrc = self.derived["xfrc_applied"]
        xfrc[:n, self.block_body, 0:3] = world.to(xfrc.dtype)

    def reset_state(self, ids: torch.Tensor) -> None:
        super().reset_state(ids)
        if self.force_scale > 0:
            self.forces[ids] = 0.0

    # ----------------------------------------------------------------------------------------------
    # quantities of the state

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
        full = self._full
        return self.in_hand_reward(full[:, 72:75], full[:, 75:79], sel)
