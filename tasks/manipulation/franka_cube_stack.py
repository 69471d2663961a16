"""FrankaCubeStack: IsaacGymEnvs' task on MuJoCo (obs 19, act 7 under env.controlType=osc; obs 26, act 8 under
joint_tor): a Franka Emika Panda arm on a stand at a table's edge picks up a 5 cm cube (A) and stacks it on a 7 cm
cube (B). The model: assets/franka_cube_stack.xml (its header says what it follows and where it differs).

Obs (IsaacGymEnvs' compute_observations, index for index): [0:4] cube A's quaternion (x, y, z, w, Isaac Gym's
order), [4:7] its position (m, world frame), [7:10] cube B's position less cube A's, [10:13] the grip site's
position (the URDF's panda_grip_site: 10.25 cm out from the hand), [13:17] its quaternion (x, y, z, w), [17:19] the
two finger openings (m) under osc; under joint_tor [17:26] all 9 joint positions instead.
Act (IsaacGymEnvs' pre_physics_step): osc: [0:6] a change of the grip site's pose, action x cmd_limit (0.1 m x 3,
0.5 rad x 3) / actionScale, which IsaacGymEnvs' operational-space controller takes as the pose error itself
(torques J^T M_eef (kp dpose - kd v_eef) + the null space's pull to the default joint positions, kp 150, kd 2
sqrt(kp), kp_null 10, kd_null 2 sqrt(kp_null), clamped to the effort limits), held over the control step; joint_tor:
[0:7] torques, action x the effort limits (87 N m x 4, 12 N m x 3) / actionScale. The last action: >= 0 opens the
gripper (both finger targets at 4 cm), < 0 closes it (0).
Reward (IsaacGymEnvs' compute_franka_reward, term for term): distance: distRewardScale x max(1 - tanh(10 x the mean
of cube A's distances to the grip site and the two fingertips), align); lift: liftRewardScale while cube A's centre
is more than 0.04 m + its size (5 cm) above the table; align: alignRewardScale x (1 - tanh(10 x the distance of cube
A to its place on B)) while lifted; stack: stackRewardScale, paid alone (the other terms 0), when cube A is within 2
cm of B's axis, its height within 2 cm of B's size + half its own, and the grip site more than 4 cm from it. A stack
ends the episode (terminal); else a time-out after episodeLength control steps. Measures: the grip site's distance
to cube A (m), cube A's distance to its place on B (m), cube A's height above the table (m); outcome: stacked (1 when
the episode ended in a stack).

The operational-space controller reads the hand's Jacobian (the URDF's panda_hand frame, 7 arm columns, world frame;
IsaacGymEnvs reads PhysX's at the hand link) and the arm's 7 x 7 mass matrix: both are computed here in torch from
qpos (kinematics.py and the model's inertias: a sum over the arm's bodies of J_com^T [m, I] J_com, and the
joints' armature), the same float32 arithmetic on either backend, of the state the step starts from (MuJoCo's qM
after a step is of the state before its last substep). Where the hand's Jacobian loses rank (a kinematic
singularity) J M^-1 J^T is singular and torch.inverse, IsaacGymEnvs' call, raises: that env's task-space inertia is
then the pseudo-inverse (inverse_or_pseudo), the inverse everywhere else.

Reset (IsaacGymEnvs' reset_idx): cube B, then cube A, at the table's centre + 2 startPositionNoise (U - 0.5) in x
and y, turned 2 startRotationNoise (U - 0.5) about z, resting on the table, at rest; cube A drawn again (up to 100
times; IsaacGymEnvs then stops on an assertion, the port keeps the last draw) until its xy lies at least 2 x (0.05
+ 0.07) sqrt(2) / 2 m from B's. Each cube rests on the table at its own half size; IsaacGymEnvs' quirk gives cube B
cube A's (its _reset_init_cube_state takes cubeA_size for both), 1 cm into the table, which PhysX then pushes out
(at up to its max_depenetration_velocity, 1000 m/s): the port does not start B inside the table, where MuJoCo's
soft contact would push it out otherwise than PhysX. The arm's joints default + 2
frankaDofNoise (U - 0.5), clamped to the limits, the fingers at their default 3.5 cm, at rest.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Tuple

import torch

from isaac_ppo.domains import choice, positive, real, thresholds
from isaac_ppo.envs.registry import ContractFacts, Gait, TaskSpec
from isaac_ppo.tasks.base import MujocoTask, Selection
from isaac_ppo.tasks.manipulation.franka import ARM_JOINTS, arm_joints, stiffen
from isaac_ppo.tasks.manipulation.kinematics import Kinematics, quat_mul, rotation_matrix

DEFAULT_DOF_POS = (0.0, 0.1963, 0.0, -2.6180, 0.0, 2.9416, 0.7854, 0.035, 0.035)  # rad x 7, m x 2
ARM_BODIES = tuple(f"panda_link{i}" for i in range(1, 8)) + ("panda_leftfinger", "panda_rightfinger")
EFFORT_LIMITS = (87.0,) * 4 + (12.0,) * 3  # N m, the URDF's
CMD_LIMIT = (0.1, 0.1, 0.1, 0.5, 0.5, 0.5)  # osc: m, rad
KP, KP_NULL = 150.0, 10.0  # IsaacGymEnvs' OSC gains (kd = 2 sqrt(kp))
CUBE_A_SIZE, CUBE_B_SIZE = 0.05, 0.07  # m, full edges (IsaacGymEnvs hard-codes them)
TABLE_TOP = (0.0, 0.0, 1.025)  # the table's surface centre: (0, 0, 1) + half its 5 cm
LIFT_M = 0.04  # cube A counts as lifted when its centre is this far above the table, beyond its size
STACK_XY_M, STACK_Z_M, GRIPPER_AWAY_M = 0.02, 0.02, 0.04
PLACEMENT_TRIES = 100
MIN_CUBE_DISTANCE = 2.0 * (CUBE_A_SIZE + CUBE_B_SIZE) * math.sqrt(2.0) / 2.0
GRIP_GEOMS = ("left_finger", "right_finger", "left_fingertip", "right_fingertip", "cubeA")
HAND_QUAT = (0.0, 0.0, -math.sin(math.pi / 8), math.cos(math.pi / 8))  # (x, y, z, w): -45 deg about link 7's z


# the scales positive where a sign would turn the action or the reward around; the position noise at least 0.12 m:
# below it cube A may find no place 0.17 m (MIN_CUBE_DISTANCE) from B within the square around the table's centre
# (its corner is noise x sqrt(2) from the centre), where IsaacGymEnvs stops on an assertion
FRANKA_CUBE_STACK_DOMAINS = {
    "env.controlType": choice("osc", "joint_tor"), "env.actionScale": positive(),
    "env.startPositionNoise": real(0.12), "env.startRotationNoise": real(0.0), "env.frankaDofNoise": real(0.0),
    **{f"env.{key}": real(0.0) for key in ("distRewardScale", "liftRewardScale", "alignRewardScale",
                                           "stackRewardScale")},
}


class FrankaCubeStack(MujocoTask):
    spec = TaskSpec(
        name="FrankaCubeStack", model="assets/franka_cube_stack.xml", domains=FRANKA_CUBE_STACK_DOMAINS,
        reward_terms=("distance", "lift", "align", "stack"),
        gait=Gait("measures", ("grip_distance_m", "stack_distance_m")),
        solve_measures={"stacked": thresholds(0.0, 1.0)},  # (a share of evaluation episodes)
        # column 17, the first finger's opening, starts every episode at 3.5 cm (no noise on the fingers)
        contract=ContractFacts(reset_column=17),
    )
    num_obs = 19  # (osc; joint_tor: 26, set per instance)
    num_actions = 7  # (osc; joint_tor: 8)

    def __init__(self, cfg: Mapping[str, Any], num_envs: int, seed: int = 0, device: str = "cpu",
                 sim: str = "mujoco"):
        self.osc = cfg["env"]["controlType"] == "osc"
        self.num_obs = 19 if self.osc else 26
        self.num_actions = 7 if self.osc else 8
        super().__init__(cfg, num_envs, seed, device, sim)

    def configure_model(self, model: Any) -> None:
        """The fingers', fingertips' and cube A's contacts at the stiffest time constant MuJoCo's refsafe rule
        keeps stable, 2 x the physics step (the rest keep mujoco.contact_timeconst), as FrankaCabinet's fingers and
        handle: MuJoCo's soft contacts let IsaacGymEnvs' squeeze (5000 N/m x 2.5 cm) sink into the cube otherwise
        (the model file's header)."""
        stiffen(model, GRIP_GEOMS)

    def setup(self) -> None:
        on, model, env = self.sim_device, self.model, self.cfg["env"]
        joints = [model.joint(name) for name in ARM_JOINTS]
        self.arm_qpos, self.arm_qvel, self.lower, self.upper = arm_joints(model, on)
        self.cube_a = int(model.joint("cubeA").qposadr[0])  # (x, y, z, qw, qx, qy, qz)
        self.cube_b = int(model.joint("cubeB").qposadr[0])
        self.default_pos = torch.tensor(DEFAULT_DOF_POS, device=on)
        self.effort = torch.tensor(EFFORT_LIMITS, device=on)
        self.action_scale = float(env["actionScale"])
        self.cmd_limit = torch.tensor(CMD_LIMIT, device=on) if self.osc else self.effort
        self.kp = torch.full((6,), KP, device=on)
        self.kd = 2.0 * self.kp.sqrt()
        self.kp_null, self.kd_null = KP_NULL, 2.0 * math.sqrt(KP_NULL)
        self.position_noise = float(env["startPositionNoise"])
        self.rotation_noise = float(env["startRotationNoise"])
        self.dof_noise = float(env["frankaDofNoise"])
        self.scales = {key: float(env[key]) for key in (
            "distRewardScale", "liftRewardScale", "alignRewardScale", "stackRewardScale")}
        self.table_top = torch.tensor(TABLE_TOP, device=on)
        # the arm's bodies, their inertias and the joints' axes (each joint at its body's origin)
        self.kinematics = Kinematics(model, ARM_BODIES, on)
        ids = [model.body(name).id for name in ARM_BODIES]
        self.body_mass = torch.tensor(model.body_mass[ids], dtype=torch.float32, device=on)
        self.body_ipos = torch.tensor(model.body_ipos[ids], dtype=torch.float32, device=on)
        self.body_irot = torch.stack([torch.tensor(rotation_matrix(model.body_iquat[b]), dtype=torch.float32)
                                      for b in ids]).to(on)
        self.body_inertia = torch.tensor(model.body_inertia[ids], dtype=torch.float32, device=on)
        self.joint_axis = torch.tensor(model.jnt_axis[[j.id for j in joints[:7]]], dtype=torch.float32, device=on)
        self.armature = torch.tensor(model.dof_armature[self.arm_qvel[:7].cpu().numpy()], dtype=torch.float32,
                                     device=on)
        sites = {name: torch.tensor(model.site(name).pos, dtype=torch.float32, device=on) for name in (
            "panda_hand", "panda_grip_site", "panda_leftfinger_tip", "panda_rightfinger_tip")}
        self.site_local = sites
        self.hand_quat = torch.tensor(HAND_QUAT, device=on)

    # ----------------------------------------------------------------------------------------------
    # quantities of the state

    def arm_frames(self, qpos: torch.Tensor) -> Dict[str, torch.Tensor]:
        """World poses (float32) from qpos rows: the 7 joints' anchors and axes, the hand's and grip site's
        positions, the grip site's (x, y, z, w) quaternion, the fingertips' positions, and the arm bodies' poses."""
        states = self.kinematics.states(qpos)
        link7_pos, link7_rot, link7_quat = states["panda_link7"][:3]
        anchors = torch.stack([states[f"panda_link{i}"][0] for i in range(1, 8)], dim=1)  # (n, 7, 3)
        rotations = torch.stack([states[f"panda_link{i}"][1] for i in range(1, 8)], dim=1)  # (n, 7, 3, 3)
        axes = (rotations @ self.joint_axis[None, :, :, None]).squeeze(-1)
        left_pos, left_rot = states["panda_leftfinger"][:2]
        right_pos, right_rot = states["panda_rightfinger"][:2]
        site = self.site_local
        return {
            "states": states, "anchors": anchors, "axes": axes,
            "hand_pos": link7_pos + link7_rot @ site["panda_hand"],
            "eef_pos": link7_pos + link7_rot @ site["panda_grip_site"],
            "eef_quat": quat_mul(link7_quat, self.hand_quat.expand_as(link7_quat)),
            "lf_pos": left_pos + left_rot @ site["panda_leftfinger_tip"],
            "rf_pos": right_pos + right_rot @ site["panda_rightfinger_tip"],
        }

    @staticmethod
    def jacobian(frames: Dict[str, torch.Tensor], point: torch.Tensor) -> torch.Tensor:
        """(n, 6, 7): the geometric Jacobian (linear rows, then angular) of a point fixed to link 7, world frame."""
        axes, anchors = frames["axes"], frames["anchors"]
        linear = torch.cross(axes, point[:, None, :] - anchors, dim=2)
        return torch.cat((linear, axes), dim=2).transpose(1, 2)

    def mass_matrix(self, frames: Dict[str, torch.Tensor]) -> torch.Tensor:
        """(n, 7, 7): the arm's joint-space inertia (MuJoCo's qM block of joints 1-7: the fingers' masses ride on
        link 7), as a sum over bodies of m Jv^T Jv + Jw^T I Jw at each body's centre of mass, + the armature."""
        axes, anchors, states = frames["axes"], frames["anchors"], frames["states"]
        n = axes.shape[0]
        mass = torch.diag(self.armature).expand(n, 7, 7).clone()
        for i, name in enumerate(ARM_BODIES):
            k = min(i + 1, 7)  # the arm joints the body hangs from
            pos, rot = states[name][:2]
            com = pos + rot @ self.body_ipos[i]
            principal = rot @ self.body_irot[i]
            inertia = principal @ torch.diag(self.body_inertia[i]) @ principal.transpose(1, 2)
            jv = torch.cross(axes[:, :k], com[:, None, :] - anchors[:, :k], dim=2)  # (n, k, 3)
            jw = axes[:, :k]
            mass[:, :k, :k] += self.body_mass[i] * (jv @ jv.transpose(1, 2)) + jw @ inertia @ jw.transpose(1, 2)
        return mass

    def osc_torques(self, dpose: torch.Tensor, n: int) -> torch.Tensor:
        """IsaacGymEnvs' _compute_osc_torques for the first n envs: dpose (n, 6) is the pose error."""
        q = self.qpos[:n, self.arm_qpos[:7]].float()
        qd = self.qvel[:n, self.arm_qvel[:7]].float()
        frames = self.arm_frames(self.qpos[:n])
        j_eef = self.jacobian(frames, frames["hand_pos"])
        eef_vel = self.jacobian(frames, frames["eef_pos"]) @ qd[:, :, None]  # the grip site's (v, w)
        mm = self.mass_matrix(frames)
        mm_inv = torch.inverse(mm)
        m_eef = inverse_or_pseudo(j_eef @ mm_inv @ j_eef.transpose(1, 2))
        u = j_eef.transpose(1, 2) @ m_eef @ (self.kp * dpose - self.kd * eef_vel[:, :, 0])[:, :, None]
        j_eef_inv = m_eef @ j_eef @ mm_inv
        u_null = self.kd_null * -qd + self.kp_null * ((self.default_pos[:7] - q + math.pi) % (2 * math.pi) - math.pi)
        u_null = mm @ u_null[:, :, None]
        u = u + (torch.eye(7, device=q.device) - j_eef.transpose(1, 2) @ j_eef_inv) @ u_null
        return torch.max(torch.min(u[:, :, 0], self.effort), -self.effort)

    def set_controls(self, actions: torch.Tensor, n: int) -> None:
        """IsaacGymEnvs' pre_physics_step: the arm's torques (osc or joint_tor), the fingers' targets by the last
        action's sign."""
        arm = actions[:, :-1] * self.cmd_limit / self.action_scale
        torques = self.osc_torques(arm, n) if self.osc else arm
        opened = actions[:, -1:] >= 0.0
        fingers = torch.where(opened, self.upper[7:], self.lower[7:])
        self.ctrl[:n, :7] = torques.to(self.ctrl.dtype)
        self.ctrl[:n, 7:9] = fingers.to(self.ctrl.dtype)

    # ----------------------------------------------------------------------------------------------
    # the task

    def compute_observations(self, sel: Selection) -> torch.Tensor:
        qpos = self.qpos[sel]
        frames = self.arm_frames(qpos)
        cube_a = qpos[:, self.cube_a:self.cube_a + 7].float()
        cube_b = qpos[:, self.cube_b:self.cube_b + 3].float()
        quat_a = torch.cat((cube_a[:, 4:7], cube_a[:, 3:4]), dim=1)  # (w, x, y, z) -> (x, y, z, w)
        q = qpos[:, self.arm_qpos].float()
        self._frames = {"cubeA_pos": cube_a[:, 0:3], "eef_pos": frames["eef_pos"], "lf_pos": frames["lf_pos"],
                        "rf_pos": frames["rf_pos"]}  # (compute_reward reads them for the same envs)
        return torch.cat((quat_a, cube_a[:, 0:3], cube_b - cube_a[:, 0:3], frames["eef_pos"], frames["eef_quat"],
                          q[:, 7:9] if self.osc else q), dim=1)

    def compute_reward(self, obs: torch.Tensor, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        frames = dict(self._frames, cubeA_to_cubeB_pos=obs[:, 7:10])
        reward, terms, measures, stacked = franka_cube_stack_reward(frames, float(self.table_top[2]), self.scales)
        self.reward_terms = terms
        self.measures = measures
        self.outcomes = {"stacked": stacked.float()}
        return reward, stacked

    def make_terminal(self, ids: Selection) -> None:
        """Cube A resting on cube B, centred, the arm at its default pose at rest (the grip site ~20 cm above the
        table's centre) and the cubes 25 cm from there: the stack that ends IsaacGymEnvs' episode."""
        self.qpos[ids[:, None] if isinstance(ids, torch.Tensor) else ids, self.arm_qpos] = \
            self.default_pos.to(self.qpos.dtype)
        self.qvel[ids] = 0.0
        b = torch.tensor([0.25, 0.0, TABLE_TOP[2] + CUBE_B_SIZE / 2, 1.0, 0.0, 0.0, 0.0], dtype=self.qpos.dtype,
                         device=self.sim_device)
        a = b.clone()
        a[2] += (CUBE_A_SIZE + CUBE_B_SIZE) / 2
        self.qpos[ids, self.cube_b:self.cube_b + 7] = b
        self.qpos[ids, self.cube_a:self.cube_a + 7] = a

    def reset_state(self, ids: torch.Tensor) -> None:
        k, on, g = ids.numel(), self.sim_device, self.generator
        # the arm: default + noise, clamped; the fingers at their default
        noise = torch.rand(k, 9, generator=g, device=on)
        position = torch.max(torch.min(self.default_pos + self.dof_noise * 2.0 * (noise - 0.5), self.upper),
                             self.lower)
        position[:, 7:] = self.default_pos[7:]
        self.qpos[ids[:, None], self.arm_qpos] = position.to(self.qpos.dtype)
        self.qvel[ids] = 0.0
        # the cubes: B anywhere in the square, then A at least MIN_CUBE_DISTANCE from it in xy
        centre = self.table_top[:2]
        b_xy = centre + 2.0 * self.position_noise * (torch.rand(k, 2, generator=g, device=on) - 0.5)
        a_xy = torch.empty_like(b_xy)
        todo = torch.arange(k, device=on)
        for _ in range(PLACEMENT_TRIES):
            a_xy[todo] = centre + 2.0 * self.position_noise * (torch.rand(todo.numel(), 2, generator=g,
                                                                          device=on) - 0.5)
            todo = ((a_xy - b_xy).norm(dim=1) < MIN_CUBE_DISTANCE).nonzero().flatten()
            if not todo.numel():
                break
        for adr, xy, size in ((self.cube_b, b_xy, CUBE_B_SIZE), (self.cube_a, a_xy, CUBE_A_SIZE)):
            yaw = 2.0 * self.rotation_noise * (torch.rand(k, generator=g, device=on) - 0.5)
            pose = torch.zeros(k, 7, device=on)
            pose[:, 0:2] = xy
            pose[:, 2] = self.table_top[2] + size / 2  # (IsaacGymEnvs: cube A's size for both: the docstring)
            pose[:, 3], pose[:, 6] = torch.cos(yaw / 2), torch.sin(yaw / 2)
            self.qpos[ids, adr:adr + 7] = pose.to(self.qpos.dtype)


def inverse_or_pseudo(matrix: torch.Tensor) -> torch.Tensor:
    """The inverse of each (n, k, k) matrix, as IsaacGymEnvs' torch.inverse; for one that LU finds singular, its
    pseudo-inverse instead (that env's alone), where torch.inverse raises and stops the run. Why: at a kinematic
    singularity the hand's Jacobian loses rank and J M^-1 J^T with it; in float32 LU then meets an exact zero pivot.
    It happened in a learning run (one env of 1,024 at 14.5M env steps, the smallest singular value of J 7e-5)."""
    inverse, info = torch.linalg.inv_ex(matrix)
    singular = info != 0
    if bool(singular.any()):  # (a host sync on a GPU, once a control step)
        inverse = inverse.clone()
        inverse[singular] = torch.linalg.pinv(matrix[singular])
    return inverse


def franka_cube_stack_reward(frames: Dict[str, torch.Tensor], table_height: float, scales: Dict[str, float]
                             ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor], Dict[str, torch.Tensor], torch.Tensor]:
    """IsaacGymEnvs' compute_franka_reward: (reward, its terms (summing to it), the measures, the stack flags).
    frames: cubeA_pos, cubeA_to_cubeB_pos, eef_pos, lf_pos, rf_pos (n, 3) each."""
    cube_a, a_to_b = frames["cubeA_pos"], frames["cubeA_to_cubeB_pos"]
    d = (cube_a - frames["eef_pos"]).norm(dim=1)
    d_lf = (cube_a - frames["lf_pos"]).norm(dim=1)
    d_rf = (cube_a - frames["rf_pos"]).norm(dim=1)
    dist_reward = 1.0 - torch.tanh(10.0 * (d + d_lf + d_rf) / 3.0)
    height = cube_a[:, 2] - table_height
    lifted = ((height - CUBE_A_SIZE) > LIFT_M).float()
    offset = torch.zeros_like(a_to_b)
    offset[:, 2] = (CUBE_A_SIZE + CUBE_B_SIZE) / 2.0
    d_ab = (a_to_b + offset).norm(dim=1)
    align_reward = (1.0 - torch.tanh(10.0 * d_ab)) * lifted
    dist_reward = torch.max(dist_reward, align_reward)
    target_height = CUBE_B_SIZE + CUBE_A_SIZE / 2.0
    stacked = ((a_to_b[:, 0:2].norm(dim=1) < STACK_XY_M) & ((height - target_height).abs() < STACK_Z_M)
               & (d > GRIPPER_AWAY_M))
    zero = torch.zeros_like(d)
    terms = {
        "distance": torch.where(stacked, zero, scales["distRewardScale"] * dist_reward),
        "lift": torch.where(stacked, zero, scales["liftRewardScale"] * lifted),
        "align": torch.where(stacked, zero, scales["alignRewardScale"] * align_reward),
        "stack": scales["stackRewardScale"] * stacked.float(),
    }
    reward = terms["distance"] + terms["lift"] + terms["align"] + terms["stack"]
    measures = {"grip_distance_m": d, "stack_distance_m": d_ab, "cubeA_height_m": height}
    return reward, terms, measures, stacked
