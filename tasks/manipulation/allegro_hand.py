"""AllegroHand (block): IsaacGymEnvs' in-hand reorientation with the Allegro hand on MuJoCo (act 16; obs 50 / 72 / 88
by env.observationType; with asymmetric=true the critic gets the 88 of full_state). The model
(assets/allegro_hand.xml) states the facts it follows and every deliberate difference from Isaac Gym's hand in its
header; what both hands share (actions, reward, goals, successes, the reset) is hand.py's InHandTask.

A four-fingered Allegro hand (16 hinges, 16 position drives: stiffness 3, damping 0.1, effort 0.5, as
allegro_hand.py sets them), palm up and tilted (IsaacGymEnvs' pose), holds a 6.5 cm block; a goal orientation is
drawn, and the block must be turned to it (success within successTolerance rad), then a new goal is drawn without
ending the episode. The episode ends when the block falls (fallDistance from the goal position) or at the time-out.
The control step is controlFrequencyInv x sim.dt (2 x 1/60 s: 30 Hz), as IsaacGymEnvs' VecTask repeats its physics.

Obs (IsaacGymEnvs 1.5.1's compute_full_observations / compute_full_state, index for index; quaternions in its
(x, y, z, w) order, positions in the env frame):
- full_state (88): joint positions scaled to [-1, 1] (16), velocities x 0.2 (16), the drives' joint forces x 10
  (16), block pose (7: position, quaternion), linear velocity (3), angular velocity x 0.2 (3), goal pose (7),
  quat(block) * conj(quat(goal)) (4), the actions (16).
- full (72): as full_state without the forces.
- full_no_vel (50): joint positions (16), block pose (7), goal pose (7), the quaternion (4), actions (16).
(IsaacGymEnvs' allegro_hand.py refuses every other type, AllegroHandLSTM.yaml's no_vel included: so does the
domain of env.observationType.)
Act: absolute joint targets (scale [-1, 1] to each joint's range), averaged with the previous targets by
actionsMovingAverage, clamped; or relative (useRelativeControl): previous + dofSpeedScale x sim.dt x action
(IsaacGymEnvs' self.dt is sim.dt, not the 2-step control step: kept).
Reward (IsaacGymEnvs' compute_hand_reward): distRewardScale x |block - goal position| + rotRewardScale / (rotation
distance + rotEps) + actionPenaltyScale x |a|^2, + reachGoalBonus on a success, + fallPenalty on a fall, and with
maxConsecutiveSuccesses > 0, + 0.5 x fallPenalty on a time-out (in the fall_penalty term).

Where PhysX and MuJoCo differ the port keeps what the name promises: the drives are MuJoCo position actuators with
IsaacGymEnvs' stiffness and damping inside the 0.5 N m effort cap (as a PhysX drive clamps its force), the joint
forces of full_state are MuJoCo's qfrc_actuator (the drive's force, as PhysX's dof forces under a position drive),
and the collision shapes are primitives fitted to the URDF's meshes (the header's list).
"""
from __future__ import annotations

from typing import Any, Tuple

import torch

from isaac_ppo.domains import choice, integer, real, thresholds
from isaac_ppo.envs.registry import ContractFacts, Gait, TaskSpec
from isaac_ppo.errors import UserError
from isaac_ppo.tasks.base import Selection
from isaac_ppo.tasks.manipulation.hand import HAND_REWARD_TERMS, IN_HAND_DOMAINS, InHandTask, quat_conjugate
from isaac_ppo.tasks.manipulation.kinematics import quat_mul

HAND_DOFS = 16
OBJECT_START = (0.0, -0.2, 0.56)  # the block's start: hand at (0, 0, 0.5) + (0, -0.2, 0.06) (allegro_hand.py)
GOAL_POSITION = (0.0, -0.2, 0.52)  # the goal's position for the reward: the start, 4 cm lower
VELOCITY_SCALE, FORCE_SCALE = 0.2, 10.0
OBS_SIZES = {"full_no_vel": 50, "full": 72, "full_state": 88}

ALLEGRO_HAND_DOMAINS = dict(IN_HAND_DOMAINS, **{
    # allegro_hand.py's three types (no_vel, AllegroHandLSTM.yaml's, is refused there and here); its block only
    "env.observationType": choice(*OBS_SIZES), "env.objectType": choice("block"),
    "env.controlFrequencyInv": integer(1),  # physics steps of sim.dt a control step (2: 30 Hz)
    "env.maxConsecutiveSuccesses": integer(0), "env.averFactor": real(0.0, 1.0),
})


class AllegroHand(InHandTask):
    spec = TaskSpec(
        name="AllegroHand", model="assets/allegro_hand.xml", domains=ALLEGRO_HAND_DOMAINS,
        actors={"hand": "allegro_mount", "object": "object"},
        reward_terms=HAND_REWARD_TERMS,
        critic_observations="full_state's 88 (IsaacGymEnvs' states)",
        gait=Gait("block"),
        solve_measures={"successes": thresholds(0.0)},  # (goals reached per evaluation episode)
        # (61: the goal's x, fixed. Relative control for the suite: its constant absolute actions, 0.3, curl the four
        # fingers to 65% of their range at once, and that flings the block off the hand within 0.3 s, a fall)
        contract=ContractFacts(overrides={"env": {"useRelativeControl": True}}, last_actions_in_obs=True,
                               reset_column=61),
    )
    num_actions = 16
    critic_obs = 88
    derived_fields: Tuple[str, ...] = ("qfrc_actuator",)
    HAND_DOFS = HAND_DOFS
    OBJECT_START = OBJECT_START
    GOAL_POSITION = GOAL_POSITION
    DROP_POSITION = (0.3, -0.2, 0.2)  # (the block beside the hand, 0.44 m from the goal position)

    def __init__(self, cfg: Any, *args: Any, **kwargs: Any):
        self.observation_type = str(cfg["env"]["observationType"])
        if self.observation_type not in OBS_SIZES:  # (make() with a task config the CLI's checks have not seen)
            raise UserError(f"task.env.observationType={self.observation_type!r}: AllegroHand has "
                            f"{', '.join(OBS_SIZES)} (IsaacGymEnvs 1.5.1's allegro_hand.py refuses the others, "
                            "AllegroHandLSTM.yaml's no_vel included)")
        self.num_obs = OBS_SIZES[self.observation_type]
        super().__init__(cfg, *args, **kwargs)

    def setup(self) -> None:
        self.hand_setup()

    def _full_state(self, sel: Selection) -> torch.Tensor:
        qpos, qvel = self.qpos[sel].float(), self.qvel[sel].float()
        joints = qpos[:, :HAND_DOFS]
        scaled = (2.0 * joints - self.hand_upper - self.hand_lower) / (self.hand_upper - self.hand_lower)
        block = self.block(sel)
        goal_rot = self.goal_rot[sel]
        n = joints.shape[0]
        goal = torch.cat((self.goal_position.expand(n, 3), goal_rot), dim=1)
        forces = self.derived["qfrc_actuator"][sel][:, :HAND_DOFS].float()
        return torch.cat((scaled, VELOCITY_SCALE * qvel[:, :HAND_DOFS], FORCE_SCALE * forces,
                          block["pos"], block["quat"], block["linvel"], VELOCITY_SCALE * block["angvel"], goal,
                          quat_mul(block["quat"], quat_conjugate(goal_rot)), self.last_actions[sel]), dim=1)

    def compute_observations(self, sel: Selection) -> torch.Tensor:
        full = self._full_state(sel)
        self._full = full
        kind = self.observation_type
        if kind == "full_state":
            return full
        joints, velocities, block, goal_and_diff, actions = full[:, 0:16], full[:, 16:32], full[:, 48:61], \
            full[:, 61:72], full[:, 72:88]
        if kind == "full_no_vel":
            return torch.cat((joints, block[:, 0:7], goal_and_diff, actions), dim=1)
        return torch.cat((joints, velocities, block, goal_and_diff, actions), dim=1)  # full

    def compute_states(self, obs: torch.Tensor, sel: Selection) -> torch.Tensor:
        return self._full if self.observation_type != "full_state" else obs

    def compute_reward(self, obs: torch.Tensor, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        full = self._full
        return self.in_hand_reward(full[:, 48:51], full[:, 51:55], sel)

    def reset_state(self, ids: torch.Tensor) -> None:
        super().reset_state(ids)
        # the drives already hold the drawn joints (IsaacGymEnvs sets its position targets to them), so that the
        # reset observation's joint forces are the held pose's, not a pull towards zero
        self.ctrl[ids] = self.targets[ids].to(self.ctrl.dtype)
