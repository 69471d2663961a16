"""FrankaCabinet: IsaacGymEnvs' task on MuJoCo (obs 23, act 9): a Franka Emika Panda arm, its base fixed 1 m in front
of a cabinet, pulls the cabinet's top drawer open by its handle. The model: assets/franka_cabinet.xml (its header says
what it follows and where it differs); the props in the drawer are added when the model is built (env.numProps).

Obs (IsaacGymEnvs' compute_observations, index for index): [0:9] the arm's 7 joint angles and 2 finger openings
scaled to [-1, 1] over their limits, [9:18] their velocities x dofVelocityScale (0.1), [18:21] the vector from the
gripper's grasp point to the handle's (m, world frame), [21] the drawer's opening (m), [22] its speed (m/s).
Act: joint position targets += speed scale (arm 1, fingers 0.1) x 1/60 s x actionScale (7.5) x action, clamped to
the joint limits; each episode's targets start at its initial joint positions.
Reward (IsaacGymEnvs' compute_franka_reward, term for term): distRewardScale x (1 / (1 + d^2))^2 (doubled within
2 cm), d the grasp point's distance to the handle's; rotRewardScale x the alignment of the gripper's forward and up
axes with the drawer's inward and up axes (0.5 (sign(a) a^2 + sign(b) b^2)); aroundHandleRewardScale x 0.5 while the
left finger is above the handle and the right one below; openRewardScale x opening x (1 + that 0.5);
fingerDistRewardScale x the fingers' closeness to the handle (0.04 - |dz| each) while around it; - actionPenaltyScale
x |a|^2; bonuses +0.5 past 1 cm of opening, + the around-handle 0.5 past 20 cm, + twice it past 39 cm; and the
whole reward is -1 while either finger is more than 4 cm behind the handle (IsaacGymEnvs' "bad style"). Terminal
when the drawer is open past 0.39 m (the success; IsaacGymEnvs resets there too), a time-out after episodeLength
control steps. Measures: the drawer's opening (m) and the grasp distance (m); outcome: drawer_opened (1 when the
episode ended with the drawer past 0.39 m).

env.openEndsEpisode (the port's key, default true: IsaacGymEnvs'): false removes that terminal line, the episode
running to its time-out with the same reward, bonus and outcome (drawer_opened if the drawer is still past 0.39 m at
the end). Under IsaacGymEnvs' reward a drawer left open pays ~6 a step and crossing the line at most 1 once, so a
return-maximising policy of the task stops short of the line it calls success; trained under false, policies cross
it when replayed on the task proper. The evaluation envs keep it true (cfg/task/FrankaCabinet.yaml's eval_env).

IsaacGymEnvs' grasp frames, as it computes them (quirks kept): the gripper's grasp point is the fingers' midpoint
at the actor's creation (fingers closed) in link 7's frame, moved 4 cm along link 7's y axis (its code adds 0.04 on
axis index 1, not along the fingers), turned as the hand is (-45 deg about z); the handle's is (0.3, 0.01, 0) in the
drawer's frame. Reset: joint positions default + U(-0.125, 0.125), clamped to the limits, at rest; targets there;
the cabinet's joints closed; the props at their places in the drawer.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Tuple

import torch

from isaac_ppo.domains import boolean, integer, positive, real, thresholds
from isaac_ppo.envs.registry import ContractFacts, Gait, TaskSpec
from isaac_ppo.tasks.base import MujocoTask, Selection
from isaac_ppo.tasks.manipulation.franka import arm_joints, stiffen
from isaac_ppo.tasks.manipulation.kinematics import Kinematics

ACTION_DT = 1.0 / 60.0  # IsaacGymEnvs' self.dt in pre_physics_step (its sim.dt is written 0.0166)
DEFAULT_DOF_POS = (1.157, -1.066, -0.155, -2.239, -1.841, 1.003, 0.469, 0.035, 0.035)  # rad x 7, m x 2
RESET_NOISE = 0.25  # joint positions default + 0.25 x (U(0, 1) - 0.5)
SPEED_SCALES = (1.0,) * 7 + (0.1, 0.1)  # IsaacGymEnvs' franka_dof_speed_scales
# the URDFs' <limit velocity> (rad/s, m/s), which Isaac Gym loads as each DOF's maximum velocity: held by the port
# only with mujoco.velocity_limits=true (MuJoCo has none; whether PhysX holds IsaacGymEnvs' arm to them is not
# measured here: docs/tasks/manipulation.md, FrankaCabinet)
URDF_VELOCITY_LIMITS = dict(
    **{f"panda_joint{i}": 2.175 for i in range(1, 5)}, **{f"panda_joint{i}": 2.61 for i in range(5, 8)},
    panda_finger_joint1=0.2, panda_finger_joint2=0.2, drawer_top_joint=1.0, drawer_bottom_joint=1.0,
    door_right_joint=0.1, door_left_joint=0.1)
HAND, LEFT_FINGER, RIGHT_FINGER, DRAWER = "panda_link7", "panda_leftfinger", "panda_rightfinger", "drawer_top"
GRASP_OFFSET_Y = 0.04  # IsaacGymEnvs adds it to the grasp point on link 7's y axis
HAND_YAW = -math.pi / 4  # the hand (and fingers) turned about link 7's z (the URDF's panda_hand_joint)
DRAWER_GRASP = (0.3, 0.01, 0.0)  # the handle's grasp point in the drawer's frame (m)
BEHIND_M = 0.04  # IsaacGymEnvs' distX_offset: a finger this far behind the handle gets -1
OPEN_M = 0.39  # the drawer counts as opened (the episode ends) past this (m)
PROP_SIZE_M, PROP_SPACING_M, PROP_DENSITY = 0.08, 0.09, 400.0
GRIP_GEOMS = ("left_finger", "right_finger", "drawer_top_handle", "drawer_top_standoff_left",
              "drawer_top_standoff_right")


# at most the 16 props IsaacGymEnvs lays out in the drawer (4 x 4); the action and velocity scales positive (0 would
# freeze the arm or blind the policy); the reward's weights pay at 0 or above, and its action penalty is subtracted
# (a negative one would pay for effort)
FRANKA_CABINET_DOMAINS = {
    "env.numProps": integer(0, 16), "env.actionScale": positive(), "env.dofVelocityScale": positive(),
    "env.openEndsEpisode": boolean(), "eval_env.env.openEndsEpisode": boolean(), "mujoco.velocity_limits": boolean(),
    **{f"env.{key}": real(0.0) for key in ("distRewardScale", "rotRewardScale", "aroundHandleRewardScale",
                                           "openRewardScale", "fingerDistRewardScale", "actionPenaltyScale")},
}


class FrankaCabinet(MujocoTask):
    spec = TaskSpec(
        name="FrankaCabinet", model="assets/franka_cabinet.xml", domains=FRANKA_CABINET_DOMAINS,
        reward_terms=("distance", "rotation", "around_handle", "open", "finger_distance", "action_penalty",
                      "open_bonus", "behind_handle"),
        gait=Gait("drawer"),
        solve_measures={"drawer_opened": thresholds(0.0, 1.0)},  # (a share of evaluation episodes)
        # 4 of its 16 props: free bodies in the state all the same, at a quarter of their cost; column 21, the
        # drawer's opening, starts at 0 (its arm's joints are drawn afresh)
        contract=ContractFacts(overrides={"env": {"numProps": 4}}, reset_column=21),
    )
    num_obs = 23
    num_actions = 9
    state_buffers = MujocoTask.state_buffers + ("targets",)

    def build_model(self) -> Any:
        """The model file with env.numProps boxes in the top drawer, as IsaacGymEnvs lays them: a square grid
        (ceil(sqrt(n)) a row, 9 cm apart) centred on the drawer's origin, at its height, unturned."""
        import mujoco

        spec = mujoco.MjSpec.from_file(self.asset_path())
        count = int(self.cfg["env"]["numProps"])
        drawer = spec.body(DRAWER)
        cabinet = spec.body("sektion")
        origin = [float(c) + float(d) for c, d in zip(cabinet.pos, drawer.pos)]
        per_row = int(math.ceil(math.sqrt(count))) if count else 0
        low = -0.5 * PROP_SPACING_M * (per_row - 1)
        for i in range(count):
            row, column = divmod(i, per_row)
            body = spec.worldbody.add_body(name=f"prop{i}", pos=[origin[0] + low + column * PROP_SPACING_M,
                                                                 origin[1] + low + row * PROP_SPACING_M, origin[2]])
            body.add_freejoint(name=f"prop{i}")
            body.add_geom(name=f"prop{i}", type=mujoco.mjtGeom.mjGEOM_BOX, size=[PROP_SIZE_M / 2] * 3,
                          density=PROP_DENSITY, contype=4, conaffinity=7, rgba=[0.8, 0.6, 0.3, 1.0])
        return spec.compile()

    def configure_model(self, model: Any) -> None:
        """The fingers' and handles' contacts at the stiffest time constant MuJoCo's refsafe rule keeps stable, 2 x
        the physics step (the rest keep mujoco.contact_timeconst): MuJoCo's contact stiffness scales with the
        inertia behind it, and the fingers must hold IsaacGymEnvs' 200 N squeeze on a 2 cm handle (the model
        file's header)."""
        stiffen(model, GRIP_GEOMS)

    def setup(self) -> None:
        on, model, env = self.sim_device, self.model, self.cfg["env"]
        self.arm_qpos, self.arm_qvel, self.lower, self.upper = arm_joints(model, on)
        drawer = model.joint("drawer_top_joint")
        self.drawer_qpos, self.drawer_qvel = int(drawer.qposadr[0]), int(drawer.dofadr[0])
        self.default_pos = torch.tensor(DEFAULT_DOF_POS, device=on)
        self.speed = torch.tensor(SPEED_SCALES, device=on) * ACTION_DT * float(env["actionScale"])
        self.velocity_scale = float(env["dofVelocityScale"])
        # (a run's config.yaml from before the key has none: IsaacGymEnvs' behaviour, the YAML's default)
        self.open_ends_episode = bool(env.get("openEndsEpisode", True))
        self.scales = {key: float(env[key]) for key in (
            "distRewardScale", "rotRewardScale", "aroundHandleRewardScale", "openRewardScale",
            "fingerDistRewardScale", "actionPenaltyScale")}
        self.kinematics = Kinematics(model, (HAND, LEFT_FINGER, RIGHT_FINGER, DRAWER), on)
        # the grasp point in link 7's frame: the fingers' midpoint with the fingers closed (creation), + 4 cm on y
        closed = torch.zeros(1, model.nq, device=on)
        poses = self.kinematics(closed)
        hand_pos, hand_rot = poses[HAND]
        middle = 0.5 * (poses[LEFT_FINGER][0] + poses[RIGHT_FINGER][0])
        local = (hand_rot[0].T @ (middle[0] - hand_pos[0])) + torch.tensor([0.0, GRASP_OFFSET_Y, 0.0], device=on)
        self.grasp_local = local
        c, s = math.cos(HAND_YAW), math.sin(HAND_YAW)
        self.grasp_turn = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], device=on)
        self.drawer_grasp_local = torch.tensor(DRAWER_GRASP, device=on)
        self.targets = torch.zeros(self.num_envs, 9, device=on)
        if self.cfg["mujoco"].get("velocity_limits", False):  # (absent in run configs from before the key: off)
            limits = torch.full((model.nv,), math.inf, dtype=self.qvel.dtype, device=on)
            for name, limit in URDF_VELOCITY_LIMITS.items():
                limits[int(model.joint(name).dofadr[0])] = limit
            self.velocity_limits = limits

    def set_controls(self, actions: torch.Tensor, n: int) -> None:
        """IsaacGymEnvs' pre_physics_step: targets += speed scale x dt x actionScale x action, clamped to the limits."""
        targets = self.targets[:n] + self.speed * actions
        self.targets[:n] = torch.max(torch.min(targets, self.upper), self.lower)
        self.ctrl[:n] = self.targets[:n].to(self.ctrl.dtype)

    # ----------------------------------------------------------------------------------------------
    # quantities of the state

    def frames(self, sel: Selection) -> Dict[str, torch.Tensor]:
        """The grasp frames and finger positions (world = env frame, float32) of the envs in sel."""
        poses = self.kinematics(self.qpos[sel])
        hand_pos, hand_rot = poses[HAND]
        drawer_pos, drawer_rot = poses[DRAWER]
        return {
            "grasp_pos": hand_pos + hand_rot @ self.grasp_local, "grasp_rot": hand_rot @ self.grasp_turn,
            "handle_pos": drawer_pos + drawer_rot @ self.drawer_grasp_local, "handle_rot": drawer_rot,
            "left_finger": poses[LEFT_FINGER][0], "right_finger": poses[RIGHT_FINGER][0],
        }

    # ----------------------------------------------------------------------------------------------
    # the task

    def compute_observations(self, sel: Selection) -> torch.Tensor:
        qpos, qvel = self.qpos[sel], self.qvel[sel]
        position, velocity = qpos[:, self.arm_qpos].float(), qvel[:, self.arm_qvel].float()
        scaled = 2.0 * (position - self.lower) / (self.upper - self.lower) - 1.0
        frames = self.frames(sel)
        self._frames = frames  # (compute_reward reads them for the same envs)
        return torch.cat((scaled, velocity * self.velocity_scale, frames["handle_pos"] - frames["grasp_pos"],
                          qpos[:, self.drawer_qpos:self.drawer_qpos + 1].float(),
                          qvel[:, self.drawer_qvel:self.drawer_qvel + 1].float()), dim=1)

    def compute_reward(self, obs: torch.Tensor, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        frames = self._frames
        actions = self.last_actions[sel]
        reward, terms, opening, distance = franka_cabinet_reward(frames, obs[:, 21], actions, self.scales)
        self.reward_terms = terms
        self.measures = {"drawer_opening_m": opening, "grasp_distance_m": distance}
        opened = opening > OPEN_M
        self.outcomes = {"drawer_opened": opened.float()}
        return reward, opened if self.open_ends_episode else torch.zeros_like(opened)

    def make_terminal(self, ids: Selection) -> None:
        """The top drawer open past 0.39 m (the success that ends IsaacGymEnvs' episode), and still opening: the
        props, where the closed drawer holds them, push its back wall."""
        self.qpos[ids, self.drawer_qpos] = 0.399
        self.qvel[ids, self.drawer_qvel] = 0.3

    def reset_state(self, ids: torch.Tensor) -> None:
        # the batch reset put the cabinet's joints at 0 and the props in the drawer, at rest; the arm as IsaacGymEnvs
        k = ids.numel()
        noise = RESET_NOISE * (torch.rand(k, 9, generator=self.generator, device=self.sim_device) - 0.5)
        position = torch.max(torch.min(self.default_pos + noise, self.upper), self.lower)
        self.qpos[ids[:, None], self.arm_qpos] = position.to(self.qpos.dtype)
        self.targets[ids] = position


def franka_cabinet_reward(frames: Dict[str, torch.Tensor], opening: torch.Tensor, actions: torch.Tensor,
                          scales: Dict[str, float]) -> Tuple[torch.Tensor, Dict[str, torch.Tensor], torch.Tensor,
                                                             torch.Tensor]:
    """IsaacGymEnvs' compute_franka_reward: (reward, its terms (summing to it), the opening, the grasp distance)."""
    grasp, handle = frames["grasp_pos"], frames["handle_pos"]
    left_z, right_z, handle_z = frames["left_finger"][:, 2], frames["right_finger"][:, 2], handle[:, 2]
    distance = (grasp - handle).norm(dim=1)
    dist_reward = (1.0 / (1.0 + distance ** 2)) ** 2
    dist_reward = torch.where(distance <= 0.02, dist_reward * 2, dist_reward)
    # the gripper's forward (z) and up (y) axes against the drawer's inward (-x) and up (z) axes
    forward, up = frames["grasp_rot"][:, :, 2], frames["grasp_rot"][:, :, 1]
    inward, drawer_up = -frames["handle_rot"][:, :, 0], frames["handle_rot"][:, :, 2]
    dot1, dot2 = (forward * inward).sum(dim=1), (up * drawer_up).sum(dim=1)
    rot_reward = 0.5 * (torch.sign(dot1) * dot1 ** 2 + torch.sign(dot2) * dot2 ** 2)
    around = (left_z > handle_z) & (right_z < handle_z)
    around_reward = around.float() * 0.5
    finger_reward = torch.where(around, (0.04 - (left_z - handle_z).abs()) + (0.04 - (right_z - handle_z).abs()),
                                torch.zeros_like(distance))
    action_penalty = (actions ** 2).sum(dim=1)
    open_reward = opening * around_reward + opening
    terms = {
        "distance": scales["distRewardScale"] * dist_reward,
        "rotation": scales["rotRewardScale"] * rot_reward,
        "around_handle": scales["aroundHandleRewardScale"] * around_reward,
        "open": scales["openRewardScale"] * open_reward,
        "finger_distance": scales["fingerDistRewardScale"] * finger_reward,
        "action_penalty": -scales["actionPenaltyScale"] * action_penalty,
        "open_bonus": (0.5 * (opening > 0.01).float() + around_reward * (opening > 0.2).float()
                       + 2.0 * around_reward * (opening > OPEN_M).float()),
    }
    reward = sum(terms.values())
    # IsaacGymEnvs' "bad style": either finger more than 4 cm behind the handle (towards the cabinet) makes it -1
    behind = ((frames["left_finger"][:, 0] < handle[:, 0] - BEHIND_M)
              | (frames["right_finger"][:, 0] < handle[:, 0] - BEHIND_M))
    terms["behind_handle"] = torch.where(behind, -1.0 - reward, torch.zeros_like(reward))
    reward = torch.where(behind, torch.full_like(reward, -1.0), reward)
    return reward, terms, opening, distance
