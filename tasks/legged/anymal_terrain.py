"""AnymalTerrain: IsaacGymEnvs' rough-terrain task on MuJoCo (obs 188, act 12): ANYmal C follows velocity and heading
commands over IsaacGymEnvs' curriculum map of slopes, stairs and obstacles (terrain.py), with observation noise,
friction randomisation and pushes.

Obs (IsaacGymEnvs' order): [0:3] base linear velocity in the base frame x linearVelocityScale, [3:6] base angular
velocity in the base frame x angularVelocityScale, [6:9] gravity in the base frame (quat_rotate_inverse), [9:12] the
command (vx, vy, yaw rate) x (linearVelocityScale, linearVelocityScale, angularVelocityScale), [12:24] the joint
angles x dofPositionScale (the angles themselves, not minus the defaults as Anymal's: IsaacGymEnvs' anymal_terrain.py
so), [24:36] joint velocities x dofVelocityScale, [36:176] 140 terrain heights on a 14 x 10 grid of points around the
base (x -0.8..-0.2 and 0.2..0.8 m, y -0.5..-0.1 and 0.1..0.5 m, turned by the base's yaw):
clip(base height - 0.5 - terrain height, -1, 1) x heightMeasurementScale, [176:188] the last actions. With addNoise,
each group gets uniform noise of +-(its noise x noiseLevel x its scale) (commands and actions none).
Act: joint position targets, default angle + actionScale x action (not clipped: IsaacGymEnvs' AnymalTerrain sets
no clipActions; the config's 1000 stands for none), held by MuJoCo's position servos (common.py):
IsaacGymEnvs' AnymalTerrain computes the same PD torque, clipped to +-80 N m, itself once per 5-ms physics step;
MuJoCo's servo evaluates it at every physics step of the port (2.5 ms).
Commands: vx, vy from their ranges and a heading from the yaw range at each reset, all four zeroed when
|(vx, vy)| <= 0.25 m/s (IsaacGymEnvs' rule: the robot then turns to heading 0); each step the yaw-rate command is
clip(0.5 wrap_to_pi(heading - the base's heading), -1, 1), wrap_to_pi a true wrap into (-pi, pi] (a deliberate
difference: IsaacGymEnvs' wrap_to_pi, anymal_terrain.py lines 683-687, is TorchScript-compiled, where `%` on a float
tensor is fmod, so a heading error in (-2 pi, -pi) stays unwrapped and line 471's yaw-rate command turns the robot
the long way; ~0.5% of steps, by up to 2.0 rad/s: what the name promises and legged_gym does is the wrap). A new
episode's first yaw-rate command is computed from its own pose (IsaacGymEnvs leaves the previous episode's in it
until its next step).
Reward: the sum of the terms below (each scale x dt), clipped at 0 from below, plus terminalReward on a terminal
step (IsaacGymEnvs adds it on every reset, time-outs included: line 367 masks it with the previous step's
timeout_buf, which is never true for this task, VecTask computing it from a progress the reset zeroed; its default
is 0, where the two agree): lin_vel_xy exp(-|v_xy cmd - v_xy|^2 / 0.25), ang_vel_z exp(-(yaw cmd - yaw rate)^2 /
0.25), lin_vel_z v_z^2, ang_vel_xy |w_xy|^2, orient |g_xy|^2, base_height (z - 0.52)^2, torque sum(tau^2), joint_acc
sum((qdot - previous qdot)^2) (a difference of velocities per control step, not divided by dt, as IsaacGymEnvs),
collision the number of thighs ("knees") touching anything with more than 1 N, stumble the number of feet with more
than 5 N sideways and less than 1 N up, action_rate sum((a - previous a)^2), air_time sum((air time - 0.5 s) over
feet touching down) when |cmd_xy| > 0.1, hip sum(|hip angle - default|); terms whose scale is 0 are logged as 0. The
previous action of an episode's first step is 0 (IsaacGymEnvs carries the last one of the episode before).
Terminal when the base touches anything with more than 1 N (and a thigh, with allowKneeContacts false); a time-out
after episodeLength_s / dt control steps (1000).
Curriculum (terrainType trimesh, curriculum true): each robot starts on a level <= maxInitMapLevel of a random column
(a kind of terrain); at each reset, up a level after walking farther than half a cell from its cell's origin, down
after walking less than a quarter of what its own command asked for in an episode (terrain.next_levels: a deliberate
difference: IsaacGymEnvs' update_terrain_level, anymal_terrain.py line 432, takes torch.norm of the commands of all
the robots ending in that step without dim=, one norm that sets every one of their thresholds; when several end in
one step the two differ, 193 of 342 level moves in one measurement; each robot's own command is what the rule
evidently means and what legged_gym does), then placed at
its cell's origin plus U(-0.5, 0.5) m in x and y. curriculum false: levels drawn over all levels, kept. A robot
whose simulation diverged keeps its level. terrainType plane: the flat floor, heights 0, every robot at the origin.
Randomisation: friction of the robot's geoms per env from frictionBuckets values drawn from frictionRange (env i takes
bucket i mod the count); every pushInterval_s (a step counter shared by all envs) each active robot's base velocity
in x and y is set to U(-1, 1) m/s (a velocity write, seen by that step's reward and observation, as IsaacGymEnvs).

Friction: PhysX combines a contact's two frictions by their average, MuJoCo by the larger one unless a geom has a
higher priority. The robot's geoms have priority 1 here and carry the average (robot's + terrain's) / 2 themselves:
a contact's friction is PhysX's. IsaacGymEnvs applies the buckets even with randomizeFriction false (it never reads
the key); here false gives every env the robot's friction 1 (effective (1 + the terrain's) / 2).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch

from isaac_ppo.domains import boolean, choice, integer, pair, positive, proportions, real
from isaac_ppo.envs.registry import ContractFacts, Gait, TaskSpec
from isaac_ppo.errors import UserError
from isaac_ppo.tasks.base import Selection
from isaac_ppo.tasks.legged import terrain as terrain_map
from isaac_ppo.tasks.legged.anymal import ANYMAL_DOMAINS, LEGS
from isaac_ppo.tasks.legged.common import (CONTACT_THRESHOLD, LeggedTask, feet_air_time_step, projected_gravity,
                                           yaw_rate_to_heading)

TRACKING_SIGMA = 0.25  # (m/s)^2 and (rad/s)^2: IsaacGymEnvs' exp(-error / 0.25) tracking kernels
BASE_HEIGHT_TARGET_M = 0.52  # IsaacGymEnvs' base_height term (hard-coded there)
FEET = tuple(f"{leg}_SHANK" for leg in LEGS)  # the feet are merged into the shanks (collapse_fixed_joints)
KNEES = tuple(f"{leg}_THIGH" for leg in LEGS)  # IsaacGymEnvs' kneeName THIGH
HIPS = (0, 3, 6, 9)  # the HAA joints
SCAN_X_M = tuple(0.1 * i for i in (-8, -7, -6, -5, -4, -3, -2, 2, 3, 4, 5, 6, 7, 8))
SCAN_Y_M = tuple(0.1 * i for i in (-5, -4, -3, -2, -1, 1, 2, 3, 4, 5))
SMALL_COMMAND_MPS = 0.25  # |(vx, vy)| at or below it: the commands are zeroed
AIR_TIME_COMMAND_MPS = 0.1  # no air-time reward under it
START_SPREAD_M = 0.5  # a robot starts within +-0.5 m of its cell's origin in x and y
# the reward terms, in IsaacGymEnvs' order, with the key of each one's scale
REWARD_SCALES = {
    "lin_vel_xy": "linearVelocityXYRewardScale", "ang_vel_z": "angularVelocityZRewardScale",
    "lin_vel_z": "linearVelocityZRewardScale", "ang_vel_xy": "angularVelocityXYRewardScale",
    "orient": "orientationRewardScale", "base_height": "baseHeightRewardScale", "torque": "torqueRewardScale",
    "joint_acc": "jointAccRewardScale", "collision": "kneeCollisionRewardScale", "stumble": "feetStumbleRewardScale",
    "action_rate": "actionRateRewardScale", "air_time": "feetAirTimeRewardScale", "hip": "hipRewardScale",
}

# what AnymalTerrain reads besides Anymal's: the terrain (a map of at least one cell; its kinds' shares sum to 1),
# the decimation, every reward scale (IsaacGymEnvs' penalties at 0 or below, its pay at 0 or above; the terminal
# reward and air time's either way), noise half-widths at 0 or above, a friction range above 0 (MuJoCo Warp gives
# NaN for a friction of exactly 0), pushes at a positive interval
PENALTIES = ("linearVelocityZRewardScale", "angularVelocityXYRewardScale", "orientationRewardScale",
             "jointAccRewardScale", "baseHeightRewardScale", "kneeCollisionRewardScale", "feetStumbleRewardScale",
             "actionRateRewardScale", "hipRewardScale")
NOISES = ("noiseLevel", "dofPositionNoise", "dofVelocityNoise", "linearVelocityNoise", "angularVelocityNoise",
          "gravityNoise", "heightMeasurementNoise")
ANYMAL_TERRAIN_DOMAINS = dict(
    ANYMAL_DOMAINS,
    **{f"env.learn.{key}": real(None, 0.0) for key in PENALTIES},
    **{f"env.learn.{key}": real(0.0) for key in NOISES},
    **{
        "env.terrain.terrainType": choice("trimesh", "plane"), "env.terrain.staticFriction": positive(),
        "env.terrain.curriculum": boolean(), "env.terrain.maxInitMapLevel": integer(0),
        "env.terrain.mapLength": positive(), "env.terrain.mapWidth": positive(),
        "env.terrain.numLevels": integer(1), "env.terrain.numTerrains": integer(1),
        "env.terrain.terrainProportions": proportions(5), "env.terrain.seed": integer(0, optional=True),
        "env.control.decimation": integer(1),
        "env.learn.allowKneeContacts": boolean(), "env.learn.terminalReward": real(),
        "env.learn.feetAirTimeRewardScale": real(), "env.learn.heightMeasurementScale": positive(),
        "env.learn.addNoise": boolean(), "env.learn.randomizeFriction": boolean(),
        "env.learn.frictionRange": pair(0.0, 10.0, low_open=True), "env.learn.frictionBuckets": integer(1),
        "env.learn.pushRobots": boolean(), "env.learn.pushInterval_s": positive(),
        "eval_env.env.terrain.curriculum": boolean(),  # (the evaluation envs': cfg/task/AnymalTerrain.yaml)
    })


class AnymalTerrain(LeggedTask):
    spec = TaskSpec(
        name="AnymalTerrain", model="assets/anymal.xml", domains=ANYMAL_TERRAIN_DOMAINS,
        reward_terms=("lin_vel_xy", "ang_vel_z", "lin_vel_z", "ang_vel_xy", "orient", "base_height", "torque",
                      "joint_acc", "collision", "stumble", "action_rate", "air_time", "hip", "clip"),
        gait=Gait("velocity_tracking"),  # (with its pushes and observation noise, as it trains)
        # its map comes from the seed (a resume from another seed's is refused); its x velocity observed with
        # noise of +-0.2 at a reset
        contract=ContractFacts(overrides={"terrain": {"seed": 11}}, noiseless={"learn": {"addNoise": False}},
                               last_actions_in_obs=True, reset_column=0, reset_noise=0.2),
        actors={"anymal": "base"},
    )
    num_obs = 188
    num_actions = 12
    state_buffers = LeggedTask.state_buffers + (
        "levels", "types", "env_origins", "placed", "feet_air_time", "previous_actions", "previous_dof_vel",
        "env_friction")

    # ----------------------------------------------------------------------------------------------
    # the model

    @classmethod
    def control_step_of(cls, cfg: Any) -> float:
        """IsaacGymEnvs' AnymalTerrain: decimation physics steps of sim.dt (4 x 5 ms = 20 ms)."""
        return float(cfg["sim"]["dt"]) * int(cfg["env"]["control"]["decimation"])

    def make_terminal(self, ids: Selection) -> None:
        """As the Anymal's, on the map's flat border (height 0) beside it."""
        self.upside_down(ids, 0.26, xy=(-10.0, -10.0))

    def build_model(self) -> Any:
        """The robot on the curriculum map (a height field generated from the map seed: terrain.seed, or the run's
        seed when null), or on its flat floor (terrainType plane)."""
        terrain = self.cfg["env"]["terrain"]
        self.rough = terrain["terrainType"] == "trimesh"
        seed = terrain.get("seed")
        self.map_seed_value = self.seed if seed is None else int(seed)
        if not self.rough:
            return super().build_model()
        self.height_map, self.cell_origins = terrain_map.curriculum_map(
            int(terrain["numLevels"]), int(terrain["numTerrains"]), [float(p) for p in terrain["terrainProportions"]],
            float(terrain["mapLength"]), float(terrain["mapWidth"]), self.map_seed_value)
        return terrain_map.with_terrain(self.asset_path(), terrain_map.as_hfield(self.height_map))

    def per_env_model_fields(self) -> Tuple[str, ...]:
        return ("geom_friction",) if self.cfg["env"]["learn"]["randomizeFriction"] else ()

    def configure_model(self, model: Any) -> None:
        """The servos' gains (common.py), then friction as PhysX combines it: the ground's friction from
        terrain.staticFriction, the robot's geoms above the ground in priority with the pair's average."""
        super().configure_model(model)
        ground = self.ground_geom(model)
        self.robot_geoms = np.flatnonzero(model.geom_bodyid != 0)
        self.ground_friction = float(self.cfg["env"]["terrain"]["staticFriction"])
        model.geom_friction[ground, 0] = self.ground_friction
        model.geom_priority[self.robot_geoms] = int(model.geom_priority[ground]) + 1
        model.geom_friction[self.robot_geoms, 0] = (1.0 + self.ground_friction) / 2

    @staticmethod
    def ground_geom(model: Any) -> int:
        import mujoco

        name = "terrain" if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "terrain") >= 0 else "floor"
        return int(model.geom(name).id)

    # ----------------------------------------------------------------------------------------------
    # constants and per-env state

    def setup(self) -> None:
        super().setup()
        env, on, n = self.cfg["env"], self.sim_device, self.num_envs
        learn, terrain = env["learn"], env["terrain"]
        self.lin_vel_scale = float(learn["linearVelocityScale"])
        self.ang_vel_scale = float(learn["angularVelocityScale"])
        self.dof_pos_scale = float(learn["dofPositionScale"])
        self.dof_vel_scale = float(learn["dofVelocityScale"])
        self.height_scale = float(learn["heightMeasurementScale"])
        self.command_scale = torch.tensor([self.lin_vel_scale, self.lin_vel_scale, self.ang_vel_scale], device=on)
        # IsaacGymEnvs multiplies each reward scale by dt once, at start
        self.weights = {term: float(learn[key]) * self.dt for term, key in REWARD_SCALES.items()}
        self.terminal_reward = float(learn["terminalReward"])
        self.allow_knee_contacts = bool(learn["allowKneeContacts"])
        self.episode_s = float(learn["episodeLength_s"])
        self.push = bool(learn["pushRobots"])
        self.push_interval = max(1, int(float(learn["pushInterval_s"]) / self.dt + 0.5))
        self.noise = self.noise_scales() if learn["addNoise"] else None
        # (vx, vy, yaw rate, heading): the yaw rate follows the heading every step
        self.commands = torch.zeros(n, 4, device=on)
        self.feet_air_time = torch.zeros(n, len(FEET), device=on)
        self.previous_actions = torch.zeros(n, self.num_actions, device=on)
        self.previous_dof_vel = torch.zeros(n, self.num_dof, device=on)
        self.push_counter = 0  # control steps so far, shared by all envs (a Python int: no device sync a step)
        grid_x, grid_y = torch.meshgrid(torch.tensor(SCAN_X_M), torch.tensor(SCAN_Y_M), indexing="ij")
        self.scan_points = torch.stack((grid_x.flatten(), grid_y.flatten(), torch.zeros(grid_x.numel())), 1).to(on)
        self.base_start = torch.tensor([0.0, 0.0, float(self.model.qpos0[2])], device=on)

        # the curriculum: each env's level (row) and kind of terrain (column), its cell's origin
        levels, kinds = int(terrain["numLevels"]), int(terrain["numTerrains"])
        self.num_levels, self.map_length_m = levels, float(terrain["mapLength"])
        self.curriculum = bool(terrain["curriculum"]) and self.rough
        highest_start = min(int(terrain["maxInitMapLevel"]), levels - 1) if self.curriculum else levels - 1
        self.levels = torch.randint(0, highest_start + 1, (n,), generator=self.generator, device=on)
        self.types = torch.randint(0, kinds, (n,), generator=self.generator, device=on)
        self.placed = torch.zeros(n, dtype=torch.bool, device=on)  # (the first reset moves no level)
        if self.rough:
            self.heights = torch.from_numpy(self.height_map).to(on)
            self.cell_origin_table = torch.tensor(self.cell_origins, dtype=torch.float32, device=on)
            self.env_origins = self.cell_origin_table[self.levels, self.types]
        else:
            self.env_origins = torch.zeros(n, 3, device=on)

        # friction: bucket values, env i takes bucket i mod the count
        self.env_friction = torch.ones(n, device=on)
        if self.per_env_model_fields():
            low, high = (float(x) for x in learn["frictionRange"])
            buckets = low + (high - low) * torch.rand(int(learn["frictionBuckets"]), generator=self.generator,
                                                      device=on)
            self.env_friction = buckets[torch.arange(n, device=on) % buckets.numel()]
            self.apply_friction()

    def noise_scales(self) -> torch.Tensor:
        """The half-width of each observation's uniform noise (IsaacGymEnvs' _get_noise_scale_vec)."""
        learn = self.cfg["env"]["learn"]
        level = float(learn["noiseLevel"])
        groups = ((3, float(learn["linearVelocityNoise"]) * self.lin_vel_scale),
                  (3, float(learn["angularVelocityNoise"]) * self.ang_vel_scale),
                  (3, float(learn["gravityNoise"])), (3, 0.0),
                  (12, float(learn["dofPositionNoise"]) * self.dof_pos_scale),
                  (12, float(learn["dofVelocityNoise"]) * self.dof_vel_scale),
                  (len(SCAN_X_M) * len(SCAN_Y_M), float(learn["heightMeasurementNoise"]) * self.height_scale),
                  (self.num_actions, 0.0))
        return torch.cat([torch.full((size,), value * level) for size, value in groups]).to(self.sim_device)

    def apply_friction(self) -> None:
        """Each env's robot geoms get the average of its friction and the ground's (module docstring)."""
        field = self.sim.model_fields["geom_friction"]
        effective = ((self.env_friction + self.ground_friction) / 2).to(field.dtype)
        field[:, torch.as_tensor(self.robot_geoms, device=field.device), 0] = effective.unsqueeze(1).to(field.device)

    def state_dict(self) -> Dict[str, Any]:
        return dict(super().state_dict(), push_counter=self.push_counter, map_seed=self.map_seed_value)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        if int(state["map_seed"]) != self.map_seed_value:
            raise UserError(f"the checkpoint's terrain was generated from seed {int(state['map_seed'])}, this run's "
                            f"from {self.map_seed_value}: resume with the same seed (or task.env.terrain.seed)")
        super().load_state_dict(state)
        self.push_counter = int(state["push_counter"])
        if self.per_env_model_fields():  # (the simulator's per-env model fields are not in its state rows)
            self.apply_friction()

    def task_state(self) -> Dict[str, torch.Tensor]:
        """The mean terrain level of all envs (IsaacGymEnvs' extras["episode"]["terrain_level"])."""
        return {"terrain_level": self.levels.float().mean()} if self.curriculum else {}

    # ----------------------------------------------------------------------------------------------
    # a step

    def after_physics(self, n: int) -> None:
        """Pushes when due, then the yaw-rate commands from the headings (IsaacGymEnvs' post_physics_step)."""
        self.push_counter += 1
        if self.push and self.push_counter % self.push_interval == 0:
            velocity = 2.0 * torch.rand(n, 2, generator=self.generator, device=self.sim_device) - 1.0
            self.qvel[:n, 0:2] = velocity.to(self.qvel.dtype)
        self.follow_headings(slice(0, n))

    def follow_headings(self, sel: Selection) -> None:
        self.commands[sel, 2] = yaw_rate_to_heading(self.qpos[sel][:, 3:7].float(), self.commands[sel, 3])

    def measured_heights(self, sel: Selection) -> torch.Tensor:
        """The terrain's height (m) under each scan point of the envs in sel (0 on the flat floor)."""
        quat = self.qpos[sel][:, 3:7].float()
        if not self.rough:
            return torch.zeros(quat.shape[0], self.scan_points.shape[0], device=self.sim_device)
        # IsaacGymEnvs' quat_apply_yaw keeps w and z of (w, x, y, z) and normalises: a turn about z by
        # 2 atan2(z, w), applied here as a 2-D rotation of the scan grid (no per-point quaternion)
        yaw = 2.0 * torch.atan2(quat[:, 3], quat[:, 0])
        cos, sin = torch.cos(yaw)[:, None], torch.sin(yaw)[:, None]
        x, y = self.scan_points[:, 0], self.scan_points[:, 1]
        points = torch.stack((cos * x - sin * y, sin * x + cos * y), dim=2) + self.qpos[sel][:, None, 0:2].float()
        return terrain_map.heights_under(self.heights, points)

    def compute_observations(self, sel: Selection) -> torch.Tensor:
        lin_vel, ang_vel = self.base_velocities(sel)
        quat = self.qpos[sel][:, 3:7].float()
        base_z = self.qpos[sel][:, 2:3].float()
        heights = torch.clamp(base_z - 0.5 - self.measured_heights(sel), -1.0, 1.0) * self.height_scale
        obs = torch.cat((
            lin_vel * self.lin_vel_scale,
            ang_vel * self.ang_vel_scale,
            projected_gravity(quat, self.gravity, inverse=True),
            self.commands[sel, :3] * self.command_scale,
            self.qpos[sel][:, 7:].float() * self.dof_pos_scale,
            self.qvel[sel][:, 6:].float() * self.dof_vel_scale,
            heights,
            self.last_actions[sel],
        ), dim=1)
        if self.noise is not None:
            obs += (2.0 * torch.rand(obs.shape, generator=self.generator, device=self.sim_device) - 1.0) * self.noise
        return obs

    def compute_reward(self, obs: torch.Tensor, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        w = self.weights
        lin_vel, ang_vel = self.base_velocities(sel)
        quat = self.qpos[sel][:, 3:7].float()
        gravity = projected_gravity(quat, self.gravity, inverse=True)
        dof_pos, dof_vel = self.qpos[sel][:, 7:].float(), self.qvel[sel][:, 6:].float()
        commands, actions = self.commands[sel], self.last_actions[sel]
        lin_vel_error = ((commands[:, :2] - lin_vel[:, :2]) ** 2).sum(dim=1)
        ang_vel_error = (commands[:, 2] - ang_vel[:, 2]) ** 2
        forces = self.contact_forces(sel, ("base",) + KNEES + FEET)
        base, knees, feet = forces[:, 0], forces[:, 1:5], forces[:, 5:9]
        knee_contact = knees.norm(dim=2) > CONTACT_THRESHOLD
        stumble = (feet[..., :2].norm(dim=2) > 5.0) & (feet[..., 2].abs() < 1.0)
        touch_down, air_time, self.feet_air_time[sel] = feet_air_time_step(
            self.feet_air_time[sel], feet[..., 2] > CONTACT_THRESHOLD, self.dt)
        moving = commands[:, :2].norm(dim=1) > AIR_TIME_COMMAND_MPS
        terms = {
            "lin_vel_xy": torch.exp(-lin_vel_error / TRACKING_SIGMA),
            "ang_vel_z": torch.exp(-ang_vel_error / TRACKING_SIGMA),
            "lin_vel_z": lin_vel[:, 2] ** 2,
            "ang_vel_xy": (ang_vel[:, :2] ** 2).sum(dim=1),
            "orient": (gravity[:, :2] ** 2).sum(dim=1),
            "base_height": (self.qpos[sel][:, 2].float() - BASE_HEIGHT_TARGET_M) ** 2,
            "torque": (self.torques(sel) ** 2).sum(dim=1),
            "joint_acc": ((self.previous_dof_vel[sel] - dof_vel) ** 2).sum(dim=1),
            "collision": knee_contact.sum(dim=1).float(),
            "stumble": stumble.sum(dim=1).float(),
            "action_rate": ((self.previous_actions[sel] - actions) ** 2).sum(dim=1),
            "air_time": ((air_time - 0.5) * touch_down).sum(dim=1) * moving,
            "hip": (dof_pos[:, HIPS] - self.default_dof_pos[list(HIPS)]).abs().sum(dim=1),
        }
        terms = {name: value * w[name] for name, value in terms.items()}
        unclipped = sum(terms.values())
        reward = unclipped.clamp(min=0.0)
        terminated = base.norm(dim=1) > CONTACT_THRESHOLD
        if not self.allow_knee_contacts:
            terminated |= knee_contact.any(dim=1)
        # the clip's share (>= 0), so that the logged terms add up to the reward
        terms["clip"] = reward - unclipped
        if self.terminal_reward:
            terms["termination"] = self.terminal_reward * terminated.float()
            reward = reward + terms["termination"]
        self.reward_terms = terms
        self.measures = {"tracking_error_xy_mps": lin_vel_error.sqrt(), "yaw_rate_error_radps": ang_vel_error.sqrt()}
        self.previous_actions[sel] = actions
        self.previous_dof_vel[sel] = dof_vel
        return reward, terminated

    # ----------------------------------------------------------------------------------------------
    # reset

    def before_reset(self, ids: torch.Tensor, diverged: Optional[torch.Tensor]) -> None:
        """The curriculum's move for the robots whose episode ends (not on the pool's first reset; a diverged one
        keeps its level)."""
        if not self.curriculum:
            return
        moving = self.placed[ids] if diverged is None else self.placed[ids] & ~diverged.to(self.sim_device)
        if not bool(moving.any()):
            return
        ids = ids[moving]
        walked = (self.qpos[ids, 0:2].float() - self.env_origins[ids, 0:2]).norm(dim=1)
        asked = self.commands[ids, :2].norm(dim=1)
        self.levels[ids] = terrain_map.next_levels(self.levels[ids], walked, asked, self.episode_s,
                                                   self.map_length_m, self.num_levels)
        self.env_origins[ids] = self.cell_origin_table[self.levels[ids], self.types[ids]]

    def reset_state(self, ids: torch.Tensor) -> None:
        # IsaacGymEnvs' joint noise: default angles x U(0.5, 1.5), velocities U(-0.1, 0.1) rad/s; the base upright at
        # rest at its start height above its cell's origin, within +-0.5 m of it in x and y (on the rough map)
        k, on = ids.numel(), self.sim_device
        scale = 0.5 + torch.rand(k, self.num_dof, generator=self.generator, device=on)
        velocity = 0.2 * torch.rand(k, self.num_dof, generator=self.generator, device=on) - 0.1
        start = self.base_start + self.env_origins[ids]
        if self.rough:
            spread = START_SPREAD_M * (2.0 * torch.rand(k, 2, generator=self.generator, device=on) - 1.0)
            start[:, :2] += spread
        self.qpos[ids, 0:3] = start.to(self.qpos.dtype)
        self.qpos[ids, 7:] = (self.default_dof_pos * scale).to(self.qpos.dtype)
        self.qvel[ids, 6:] = velocity.to(self.qvel.dtype)
        self.draw_commands(ids)
        self.follow_headings(ids)
        self.placed[ids] = True
        self.feet_air_time[ids] = 0.0
        self.previous_actions[ids] = 0.0
        self.previous_dof_vel[ids] = velocity

    def draw_commands(self, ids: torch.Tensor) -> None:
        """vx, vy and a heading from their ranges (the yaw range for the heading), all zeroed when the speed
        asked is at most 0.25 m/s."""
        u = torch.rand(ids.numel(), 3, generator=self.generator, device=self.sim_device)
        drawn = self.command_low + (self.command_high - self.command_low) * u
        drawn *= (drawn[:, :2].norm(dim=1) > SMALL_COMMAND_MPS).unsqueeze(1)
        self.commands[ids, 0:2] = drawn[:, 0:2]
        self.commands[ids, 3] = drawn[:, 2]
        self.commands[ids, 2] = 0.0

