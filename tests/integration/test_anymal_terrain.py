"""AnymalTerrain against IsaacGymEnvs' semantics on real MuJoCo batches and set states with known answers: height
samples over a known step and slope (turned with the base's yaw), the curriculum's moves up, down and past the top,
the observation noise's scales, the friction buckets and the friction a contact really gets, pushes at their
interval, the flat variant, and a resume that continues the curriculum exactly. (The VecEnv contract on both
backends: tests/integration/test_backend_contract.py; the map's generator: tests/unit/test_terrain.py.)"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from helpers import quat_about

from isaac_ppo.envs import make
from isaac_ppo.tasks.legged import terrain as terrain_map
from isaac_ppo.tasks.legged.anymal_terrain import SCAN_X_M, SCAN_Y_M

QUIET = {"addNoise": False, "pushRobots": False}  # (learn.*: a set state's observation is then exact)
STEP_M, SLOPE = 0.2, 0.1  # the synthetic map: a 0.2 m step up at x = 10 m (for y < 4 m), a 0.1 slope along y beyond


def synthetic_map(num_levels, num_terrains, proportions, length_m, width_m, seed):
    """One 8 m cell and the 20 m border: a step of STEP_M where x >= 10 m and y < 4 m, a slope of SLOPE rising along y
    from y = 4 m (heights in 5 mm units, x down the rows, the first sample at (-20, -20) m)."""
    heights = np.zeros((480, 480), dtype=np.int16)
    heights[300:, :240] = int(STEP_M / terrain_map.VERTICAL_SCALE)
    heights[:, 240:] = (np.arange(240) * SLOPE * terrain_map.HORIZONTAL_SCALE / terrain_map.VERTICAL_SCALE)
    return heights, np.zeros((1, 1, 3))


def pose(env, i, x, y, yaw=0.0, z=0.62):
    env.qpos[i, 0:3] = torch.tensor([x, y, z], dtype=env.qpos.dtype)
    env.qpos[i, 3:7] = torch.tensor(quat_about([0, 0, 1], yaw), dtype=env.qpos.dtype)


def scan_offsets():
    """Each scan point's (dx, dy) in the base's frame, in the observation's order (x major)."""
    return [(dx, dy) for dx in SCAN_X_M for dy in SCAN_Y_M]


def test_height_samples_over_a_known_step_and_slope_turn_with_the_base(monkeypatch):
    monkeypatch.setattr(terrain_map, "curriculum_map", synthetic_map)
    env = make("AnymalTerrain", 3, sim="mujoco", learn=QUIET,
               terrain={"numLevels": 1, "numTerrains": 1, "maxInitMapLevel": 0})
    env.reset()
    pose(env, 0, 10.05, 0.0)  # on the step's edge, facing +x: the points ahead are up the step
    pose(env, 1, 10.05, 0.0, yaw=math.pi / 2)  # facing +y: the points to its right (dy < 0) are up the step
    pose(env, 2, 0.0, 10.05)  # on the slope, facing +x: height rises with dy
    heights = env.measured_heights(slice(0, 3)).double()
    offsets = scan_offsets()
    ahead = torch.tensor([STEP_M if dx > 0 else 0.0 for dx, _ in offsets], dtype=torch.float64)
    right = torch.tensor([STEP_M if dy < 0 else 0.0 for _, dy in offsets], dtype=torch.float64)
    # the point's sample (cut down) and its (+1, +1) neighbour, the lower taken: the slope rises along y, so the
    # sample's own height: 0.01 m per sample from y = 4 m, the base at sample 300 (y = 10.05 m)
    slope = torch.tensor([SLOPE * terrain_map.HORIZONTAL_SCALE * (60 + round(dy * 10)) for _, dy in offsets],
                         dtype=torch.float64)
    torch.testing.assert_close(heights[0], ahead, rtol=0, atol=1e-6)
    torch.testing.assert_close(heights[1], right, rtol=0, atol=1e-6)
    torch.testing.assert_close(heights[2], slope, rtol=0, atol=1e-6)
    # the observation: clip(base z - 0.5 - height, -1, 1) x heightMeasurementScale (5)
    obs = env.compute_observations(slice(0, 3))
    torch.testing.assert_close(obs[0, 36:176].double(), (0.62 - 0.5 - ahead).clamp(-1, 1) * 5, rtol=0, atol=1e-5)
    torch.testing.assert_close(obs[2, 36:176].double(), (0.62 - 0.5 - slope).clamp(-1, 1) * 5, rtol=0, atol=1e-5)


def test_the_curriculum_moves_up_down_and_past_the_top_from_set_distances():
    env = make("AnymalTerrain", 6, sim="mujoco", learn=QUIET)
    env.reset()
    assert env.levels.tolist() == [0] * 6  # maxInitMapLevel 0
    env.levels[:] = torch.tensor([3, 3, 9, 0, 5, 5])
    env.env_origins[:] = env.cell_origin_table[env.levels, env.types]
    # asked: vx for 20 s, a quarter of it 2.5 m (0.5 m/s) or 5 m (1 m/s); half a cell is 4 m
    env.commands[:, 0] = torch.tensor([0.5, 1.0, 0.5, 1.0, 1.0, 0.5])
    env.commands[:, 1] = 0.0
    walked = [4.5, 4.5, 4.5, 0.0, 3.0, 4.5]
    for i, distance in enumerate(walked):
        origin = env.env_origins[i]
        pose(env, i, float(origin[0]) + distance, float(origin[1]), z=float(origin[2]) + 0.62)
    diverged = torch.tensor([False, False, False, False, False, True])
    env.reset_idx(torch.arange(6), diverged)
    # up; up and down at once (far enough for a level, short of a quarter of the command: IsaacGymEnvs adds both);
    # past the top to level 0; down from 0 stays 0; down; a diverged robot keeps its level
    assert env.levels.tolist() == [4, 3, 0, 0, 4, 5]
    # placed on the new cells: their origins, within 0.5 m in x and y, at the start height above the origin
    origins = env.cell_origin_table[env.levels, env.types]
    torch.testing.assert_close(env.env_origins, origins)
    offset = env.qpos[:, 0:3].float() - origins
    assert bool((offset[:, :2].abs() <= 0.5 + 1e-6).all())
    torch.testing.assert_close(offset[:, 2], torch.full((6,), 0.62), rtol=0, atol=1e-5)
    assert env.task_state()["terrain_level"].item() == pytest.approx(16 / 6)


def test_robots_ending_in_one_step_each_move_down_by_their_own_command():
    """A deliberate difference (issue 91): IsaacGymEnvs' update_terrain_level (anymal_terrain.py line 432) takes one
    torch.norm over the commands of every robot ending in the step; the port, each robot's own. Two robots end
    together, each 4 m from its cell's origin after a 20 s episode: the one asked for 1 m/s (a quarter: 5 m) moves
    down, the one asked for 0.1 m/s (0.5 m) stays. IsaacGymEnvs' one norm, |(1, 0, 0.1, 0)| = 1.005 m/s, would
    have moved both down."""
    env = make("AnymalTerrain", 2, sim="mujoco", learn=QUIET)
    env.reset()
    env.levels[:] = torch.tensor([3, 3])
    env.env_origins[:] = env.cell_origin_table[env.levels, env.types]
    env.commands[:, 0] = torch.tensor([1.0, 0.1])
    env.commands[:, 1] = 0.0
    for i in range(2):
        origin = env.env_origins[i]
        pose(env, i, float(origin[0]) + 4.0, float(origin[1]), z=float(origin[2]) + 0.62)
    env.reset_idx(torch.arange(2), torch.tensor([False, False]))
    assert env.levels.tolist() == [2, 3]


def test_observation_noise_off_is_exact_and_on_has_the_declared_scales():
    quiet = make("AnymalTerrain", 2048, sim="mujoco", learn=QUIET)
    quiet.reset()
    everyone = slice(0, 2048)
    first, second = quiet.compute_observations(everyone), quiet.compute_observations(everyone)
    assert torch.equal(first, second)
    noisy = make("AnymalTerrain", 2048, sim="mujoco", learn={"pushRobots": False})
    noisy.reset()
    with_noise = noisy.compute_observations(everyone)
    scales = noisy.noise
    noisy.noise = None
    deviation = (with_noise - noisy.compute_observations(everyone)).abs().amax(dim=0)
    # IsaacGymEnvs' scales: lin vel 0.1 x 2, ang vel 0.2 x 0.25, gravity 0.05, commands 0, dof pos 0.01, dof vel
    # 1.5 x 0.05, heights 0.06 x 5, actions 0
    expected = torch.tensor([0.2] * 3 + [0.05] * 3 + [0.05] * 3 + [0.0] * 3 + [0.01] * 12 + [0.075] * 12
                            + [0.3] * 140 + [0.0] * 12)
    torch.testing.assert_close(scales.cpu(), expected)
    assert bool((deviation <= expected + 1e-6).all())
    assert bool((deviation >= 0.98 * expected).all())  # (2048 uniform draws reach the edges)


def test_friction_buckets_spread_over_the_range_and_a_contact_gets_physx_average():
    import mujoco

    env = make("AnymalTerrain", 256, sim="mujoco", learn=QUIET)
    friction = env.env_friction
    buckets = torch.unique(friction)
    assert buckets.numel() == 100 and torch.equal(friction[:56], friction[100:156])
    assert 0.5 <= float(buckets.min()) < 0.55 and 1.2 < float(buckets.max()) <= 1.25
    field = env.sim.model_fields["geom_friction"]
    robot = torch.as_tensor(env.robot_geoms)
    torch.testing.assert_close(field[:, robot, 0], ((friction + 1.0) / 2).double().unsqueeze(1).expand(256, len(robot)))
    ground = env.ground_geom(env.model)
    assert torch.all(field[:, ground, 0] == 1.0)
    # what MuJoCo makes of it: env 7's robot standing on the ground, its contacts carry the pair's average
    env.reset()
    model = env.model
    model.geom_friction[:] = field[7].numpy()
    data = mujoco.MjData(model)
    data.qpos[:] = env.qpos[7].numpy()
    data.qpos[2] -= 0.1  # (the feet into the ground)
    mujoco.mj_forward(model, data)
    assert data.ncon > 0
    np.testing.assert_allclose(data.contact.friction[:data.ncon, 0], (float(friction[7]) + 1.0) / 2, rtol=1e-6)


def test_pushes_set_the_base_velocity_at_their_interval():
    env = make("AnymalTerrain", 16, sim="mujoco", learn={"addNoise": False, "pushInterval_s": 0.06})  # 3 steps
    assert env.push_interval == 3
    env.reset()
    for step in range(1, 7):
        before = env.generator.get_state()
        env.step(torch.zeros(16, 12))
        if step < 3:
            assert float(env.qvel[:, 0:2].abs().max()) < 0.2  # settling from reset: no push yet
        if step % 3:
            continue
        drawn = torch.Generator().set_state(before)
        expected = 2.0 * torch.rand(16, 2, generator=drawn) - 1.0  # the step's first draw
        torch.testing.assert_close(env.qvel[:, 0:2].float(), expected, rtol=0, atol=1e-7)
    assert env.push_counter == 6


def test_the_flat_variant_has_the_same_observation_and_no_curriculum():
    env = make("AnymalTerrain", 4, sim="mujoco", learn=QUIET, terrain={"terrainType": "plane"})
    obs = env.reset()["obs"]
    assert obs.shape == (4, 188) and env.task_state() == {}
    torch.testing.assert_close(env.qpos[:, 0:2], torch.zeros(4, 2, dtype=env.qpos.dtype))
    torch.testing.assert_close(obs[:, 36:176], torch.full((4, 140), (0.62 - 0.5) * 5))


def test_a_resume_continues_the_curriculum_exactly():
    """Episodes of 10 steps; four robots carried 4.5 m before their first ends, so they move up a level (a robot
    walks a few cm in 0.2 s: too little to move, as a quarter of what a 0.2 s episode asks is less); a second env
    of the same seed that loads the first's state after that steps to the same observations, rewards and levels."""
    def build():
        return make("AnymalTerrain", 8, sim="mujoco", seed=3, learn={"episodeLength_s": 0.2},
                    terrain={"maxInitMapLevel": 9})

    def steps(env, count):
        generator = torch.Generator().manual_seed(count)
        out = []
        for _ in range(count):
            obs, rew, _, _ = env.step(torch.rand(8, 12, generator=generator) * 2 - 1)
            out += [obs["obs"], rew[:, None], env.levels[:, None].float()]
        return torch.cat(out, dim=1)

    first = build()
    first.reset()
    start = first.levels.clone()
    steps(first, 5)
    first.qpos[:4, 0] += 4.5
    steps(first, 10)
    assert torch.equal(first.levels, torch.cat(((start[:4] + 1) % 10, start[4:])))  # the curriculum moved
    state = first.state_dict()
    expected = steps(first, 25)
    second = build()
    second.reset()
    second.load_state_dict(state)
    assert torch.equal(steps(second, 25), expected)
    other = make("AnymalTerrain", 8, sim="mujoco", seed=4, learn={"episodeLength_s": 0.2})
    with pytest.raises(Exception, match="terrain was generated from seed 3"):
        other.load_state_dict(state)


def test_a_run_logs_the_terrain_level_and_every_reward_term_and_evaluates_on_every_level(tmp_path):
    """A real (tiny) run: the mean terrain level in metrics.jsonl (task_state) and TensorBoard (episode/terrain_level,
    IsaacGymEnvs' Episode/terrain_level), every reward term per episode, and an evaluation whose envs spread over all
    levels (eval_env: curriculum false)."""
    import json
    import os

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from helpers import train_in_process

    done = train_in_process(tmp_path / "runs", "task=AnymalTerrain", "sim=mujoco", "num_envs=64", "max_iterations=2",
                            "agent.horizon=16", "agent.minibatch_size=512", "task.env.learn.episodeLength_s=0.2",
                            "eval.interval_env_steps=1024", "eval.num_envs=20", "diagnostics=off")
    rows = [json.loads(line) for line in open(os.path.join(done.run_dir, "metrics.jsonl"))]
    assert [row["task_state"]["terrain_level"] for row in rows] == [0.0, 0.0]  # (walking 4 m takes longer)
    assert "terrain level 0.00" in done.stdout
    assert {"lin_vel_xy", "air_time", "collision", "action_rate", "joint_acc", "clip"} <= set(rows[-1]["reward_terms"])
    events = EventAccumulator(os.path.join(done.run_dir, "tb"))
    events.Reload()
    assert "episode/terrain_level" in events.Tags()["scalars"] and "episode/rew_air_time" in events.Tags()["scalars"]
    assert rows[0]["eval"]["episodes"] == 20
    # the evaluation's envs: every level, none moving (curriculum false), on a map of their own seed
    from isaac_ppo.loop.build import _make_env
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(os.path.join(done.run_dir, "config.yaml"))
    evaluation = _make_env(cfg, 20, 5, "cpu", evaluation=True)
    assert not evaluation.curriculum and evaluation.task_state() == {}
    assert len(set(evaluation.levels.tolist())) >= 5 and evaluation.map_seed_value == 5  # (seeded: 20 envs, 10 levels)
    training = _make_env(cfg, 20, 5, "cpu")
    assert training.curriculum and training.levels.tolist() == [0] * 20
