"""AnymalTerrain's map (tasks/legged/terrain.py): cells with known heights, the map's layout, the height samples
under a robot and the curriculum's moves, against IsaacGymEnvs' rules."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from isaac_ppo.tasks.legged import terrain
from isaac_ppo.tasks.legged.terrain import BORDER_M, HORIZONTAL_SCALE, VERTICAL_SCALE

CELLS = 80  # an 8 m cell


def test_stairs_rise_one_step_a_ring_to_the_platform():
    cell = terrain.pyramid_stairs(CELLS, 0.1)  # 0.31 m treads are 3 samples; rings while wider than 3 m
    assert cell[0, 40] == 0 and cell[3, 40] == 20 and cell[6, 40] == 40  # 20 units = 0.1 m a step
    assert cell[40, 40] * VERTICAL_SCALE == pytest.approx(0.9)  # 9 rings: 80 - 9 x 6 = 26 samples <= 30
    assert (terrain.pyramid_stairs(CELLS, -0.1) == -cell).all()  # downward stairs: the platform in a pit


def test_a_slope_rises_at_its_rate_and_is_cut_flat_at_the_platform():
    cell = terrain.pyramid_slope(CELLS, 0.2)
    along = cell[40, :] * VERTICAL_SCALE
    assert along[0] == 0 and along[10] == pytest.approx(0.2) and along[15] == pytest.approx(0.3)
    assert along[20] == pytest.approx(0.31)  # 0.4 on the slope, cut at the platform: int(160 x 0.625^2) units
    platform = cell[25, 25]  # the platform's corner (1.5 m from the centre)
    assert cell[35:46, 35:46].min() == cell[35:46, 35:46].max() == platform == cell.max()
    assert terrain.pyramid_slope(CELLS, -0.2).min() == -terrain.pyramid_slope(CELLS, 0.2).max()


def test_obstacles_keep_the_platform_flat_and_take_four_heights():
    h = 0.1
    cell = terrain.discrete_obstacles(CELLS, h, np.random.default_rng(0))
    assert (cell[25:55, 25:55] == 0).all()
    assert set(np.unique(cell)) <= {0, -20, -10, 10, 20} and len(np.unique(cell)) > 2


def test_noise_takes_its_values_between_its_bounds():
    cell = terrain.uniform_noise(CELLS, np.random.default_rng(0))
    assert cell.min() >= -20 and cell.max() <= 20 and cell.std() > 3


def test_the_map_is_the_grid_of_levels_and_kinds_with_its_border_and_a_seed_makes_it_again():
    heights, origins = terrain.curriculum_map(10, 20, [0.1, 0.1, 0.35, 0.25, 0.2], 8.0, 8.0, seed=3)
    border = int(BORDER_M / HORIZONTAL_SCALE)
    assert heights.shape == (10 * CELLS + 2 * border, 20 * CELLS + 2 * border) and heights.dtype == np.int16
    assert (heights[:border] == 0).all() and (heights[:, -border:] == 0).all()
    assert origins.shape == (10, 20, 3)
    assert origins[3, 7, :2].tolist() == [3.5 * 8.0, 7.5 * 8.0]
    again, _ = terrain.curriculum_map(10, 20, [0.1, 0.1, 0.35, 0.25, 0.2], 8.0, 8.0, seed=3)
    assert (again == heights).all()
    other, _ = terrain.curriculum_map(10, 20, [0.1, 0.1, 0.35, 0.25, 0.2], 8.0, 8.0, seed=4)
    assert (other != heights).any()  # (the noise and the obstacles are drawn)

    def cell(level, kind):
        return heights[border + level * CELLS:border + (level + 1) * CELLS, border + kind * CELLS:border + (kind + 1) * CELLS]

    assert (cell(0, 5) == terrain.pyramid_stairs(CELLS, -0.05)).all()  # column 5 of 20: 0.25, downward stairs
    assert (cell(9, 15) == terrain.pyramid_stairs(CELLS, 0.05 + 0.175 * 0.9)).all()  # 0.75: upward
    assert (cell(9, 0) == terrain.pyramid_slope(CELLS, -0.36)).all() and origins[9, 0, 2] < 0  # a pit
    assert (cell(9, 1) == terrain.pyramid_slope(CELLS, 0.36)).all() and origins[9, 1, 2] == pytest.approx(0.56)  # a hill: int(288 x 0.625^2) units
    assert origins[9, 15, 2] == pytest.approx(cell(9, 15)[30:50, 30:50].max() * VERTICAL_SCALE)


def test_a_height_sample_is_the_lower_of_its_sample_and_the_diagonal_neighbour():
    heights = torch.zeros(400 + 10, 400 + 10, dtype=torch.int16)
    heights[205:, :] = 40  # a 0.2 m step at x = 0.5 m in the map's frame (the border's samples come first)
    points = torch.tensor([[0.25, 0.0], [0.45, 0.0], [0.55, 0.0], [-30.0, 0.0]])
    assert terrain.heights_under(heights, points).tolist() == pytest.approx([0.0, 0.0, 0.2, 0.0])
    # (at 0.45 m the sample below is 204, flat, and its neighbour 205 is on the step: the lower, 0)


def test_the_curriculum_moves_up_down_and_wraps_past_the_top_to_level_zero():
    levels = torch.tensor([0, 4, 4, 9, 0])
    walked = torch.tensor([5.0, 5.0, 1.0, 5.0, 0.0])
    commanded = torch.tensor([0.5, 0.5, 1.0, 0.5, 1.0])  # m/s, over a 20 s episode: a quarter is 2.5 m / 5 m
    moved = terrain.next_levels(levels, walked, commanded, episode_s=20.0, map_length_m=8.0, num_levels=10)
    assert moved.tolist() == [1, 5, 3, 0, 0]


def test_mujoco_finds_the_map_where_the_height_samples_say_it_is():
    """A sphere dropped on the map as a MuJoCo height field rests at the map's height under it: on a raised block,
    beside it, and on the lower floor of a pit (as_hfield's rows, columns, extents and offset)."""
    import mujoco

    heights = np.zeros((480, 300), dtype=np.int16)  # 48 m x 30 m with the border (x down the rows): unequal sides
    heights[250:300, 210:260] = 40  # a 0.2 m block: x in [5, 10) m, y in [1, 6) m of the map's frame
    heights[100:150, 50:100] = -60  # a 0.3 m pit: x in [-10, -5), y in [-15, -10)
    field = terrain.as_hfield(heights)
    drops = [(7.5, 3.5), (2.0, 3.5), (7.5, -3.0), (-7.5, -12.5)]
    bodies = "".join(f'<body pos="{x} {y} 1"><freejoint/><geom type="sphere" size="0.1" mass="1"/></body>'
                     for x, y in drops)
    xml = (f'<mujoco><asset><hfield name="map" nrow="{field.nrow}" ncol="{field.ncol}" '
           f'size="{" ".join(map(str, field.size))}"/></asset><worldbody>'
           f'<geom type="hfield" hfield="map" pos="{" ".join(map(str, field.pos))}"/>{bodies}</worldbody></mujoco>')
    model = mujoco.MjModel.from_xml_string(xml)
    model.hfield_data[:] = field.data.ravel()
    data = mujoco.MjData(model)
    for _ in range(1500):
        mujoco.mj_step(model, data)
    rest = data.qpos.reshape(-1, 7)[:, 2] - 0.1
    expected = terrain.heights_under(torch.from_numpy(heights), torch.tensor(drops)).tolist()
    assert expected == pytest.approx([0.2, 0.0, 0.0, -0.3])
    assert rest.tolist() == pytest.approx(expected, abs=0.01)


def test_anymal_stands_on_a_sloped_cell_of_the_map_at_its_default_pose():
    """with_terrain: the Anymal model with its floor replaced by the map; on level 9 of a hill column (a 0.36 slope
    up to a platform 0.56 m high), placed on the platform, the robot at its default pose stands there after 1 s
    (the base 0.35-0.5 m above the platform, as on flat ground: 0.41-0.44 m, cfg/task/Anymal.yaml)."""
    import mujoco

    from isaac_ppo.tasks.legged.anymal import Anymal

    heights, origins = terrain.curriculum_map(10, 20, [0.1, 0.1, 0.35, 0.25, 0.2], 8.0, 8.0, seed=0)
    model = terrain.with_terrain(Anymal.asset_path(), terrain.as_hfield(heights))
    assert model.nhfield == 1 and "floor" not in [model.geom(i).name for i in range(model.ngeom)]
    data = mujoco.MjData(model)
    origin = origins[9, 1]
    assert origin[2] == pytest.approx(0.56)
    data.qpos[0:3] = origin + np.array([0.0, 0.0, 0.62])
    defaults = {"HAA": 0.03, "HFE": 0.4, "KFE": -0.8}
    for i in range(model.nu):  # position targets at the default angles (Anymal.yaml's defaultJointAngles)
        name = model.actuator(i).name
        leg, joint = name.split("_")
        sign = (1 if leg[0] == "L" else -1) if joint == "HAA" else (1 if leg[1] == "F" else -1)
        data.ctrl[i] = sign * defaults[joint]
        data.qpos[model.jnt_qposadr[model.actuator_trnid[i, 0]]] = data.ctrl[i]
    while data.time < 1.0:
        mujoco.mj_step(model, data)
    assert 0.35 < data.qpos[2] - origin[2] < 0.5
    assert np.linalg.norm(data.qpos[0:2] - origin[0:2]) < 0.1  # it stood, it did not slide off the platform
