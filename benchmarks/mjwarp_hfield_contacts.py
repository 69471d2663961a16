"""Does MuJoCo Warp report the contacts of a geom resting on a height field as MuJoCo does? (issue 46)

One free body (a box, a capsule or a sphere: the shapes of Anymal's base, shanks and feet) in 512 worlds, each tilted
at random by up to 0.3 rad and placed with its lowest point 2 mm into a flat height field (401 x 401 samples, 20 m
x 20 m; or a plane), at (at, at) in the field's frame; one forward pass in MuJoCo (C, float64) and in MuJoCo Warp.
Printed: the contacts, those whose normal points down, the deepest reported penetration (the true one is 2 mm, or
the depth given), and the contacts reported more than 3 mm deeper than that.

  python benchmarks/mjwarp_hfield_contacts.py box hfield 8.0      (or capsule / sphere; plane; the spot, m)
  python benchmarks/mjwarp_hfield_contacts.py sphere hfield 8.0 0.04   (the lowest point 40 mm in: a foot pushed in)
  python benchmarks/mjwarp_hfield_contacts.py sphere map -10 0.04      (AnymalTerrain's own map, seed 0, 120 x 200 m)

It measures mujoco-warp as released; a last word `fixed` first applies the port's mend (tasks/sim/warp_hfield_fix.py,
as sim=mjwarp does): `... sphere map -10 0.04 fixed`.

Ground `map` is the task's height field as the port builds it (tasks/legged/terrain.py), the spot (at, at) in the
map's frame on its flat border (-20 < at < 0, surface at z = 0), each world moved by up to 0.1 m in x and y so that
the spot within a sample's cell varies.

Measured with mujoco-warp 4.0.0 (CPU device) in benchmarks/history/anymal-terrain.md, "AnymalTerrain: throughput",
its paragraph "AnymalTerrain on MuJoCo Warp: box contacts with the height field": a few box contacts a 512-world
batch at ~10 cm, none in MuJoCo's or on a plane.
"""
from __future__ import annotations

import sys

import mujoco
import numpy as np
import torch
import warp as wp

import mujoco_warp as mjw

SHAPES = {"sphere": 'type="sphere" size="0.03"', "capsule": 'type="capsule" size="0.0175" fromto="0 0 -0.14 0 0 0.14"',
          "box": 'type="box" size="0.1 0.05 0.05"'}
DEPTH_M = 0.002  # how far each body's lowest point is put into the ground (default; argv 4 sets another)


def model(shape: str, ground: str, at: float) -> mujoco.MjModel:
    if ground == "map":
        return on_the_map(shape, at)
    if ground == "hfield":  # the field's surface at z = 0: elevation 0.5 of 3.7 m, the field 1.85 m down
        asset = '<asset><hfield name="h" nrow="401" ncol="401" size="20 20 3.7 1"/></asset>'
        floor = '<geom type="hfield" hfield="h" pos="0 0 -1.85"/>'
    else:
        asset, floor = "", '<geom type="plane" size="50 50 1"/>'
    xml = (f'<mujoco><option timestep="0.0025"/>{asset}<worldbody>{floor}<body pos="{at} {at} 0.5"><freejoint/>'
           f'<geom {SHAPES[shape]} mass="1"/></body></worldbody></mujoco>')
    m = mujoco.MjModel.from_xml_string(xml)
    if ground == "hfield":
        m.hfield_data[:] = 0.5
    return m


def on_the_map(shape: str, at: float) -> mujoco.MjModel:
    """The body above AnymalTerrain's curriculum map (seed 0), the map's height field placed as the task places it."""
    import os
    import tempfile

    from isaac_ppo.tasks.legged import terrain

    xml = (f'<mujoco><option timestep="0.0025"/><worldbody><geom name="floor" type="plane" size="0 0 1"/>'
           f'<body pos="{at} {at} 0.5"><freejoint/><geom {SHAPES[shape]} mass="1"/></body></worldbody></mujoco>')
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "body.xml")
        with open(path, "w") as f:
            f.write(xml)
        heights, _ = terrain.curriculum_map(10, 20, [0.1, 0.1, 0.35, 0.25, 0.2], 8.0, 8.0, 0)
        return terrain.with_terrain(path, terrain.as_hfield(heights))


def lowest_z(m: mujoco.MjModel, d: mujoco.MjData, shape: str) -> float:
    """The body's geom's lowest point (after mj_kinematics)."""
    g = m.ngeom - 1
    rot, centre, size = d.geom_xmat[g].reshape(3, 3), d.geom_xpos[g], m.geom_size[g]
    if shape == "box":
        corners = np.array([[a, b, c] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)]) * size
        return float(min((centre + rot @ p)[2] for p in corners))
    if shape == "capsule":
        return float(min((centre + rot @ np.array([0.0, 0.0, z]))[2] for z in (-size[1], size[1])) - size[0])
    return float(centre[2] - size[0])


def main() -> None:
    shape, ground, at = sys.argv[1], sys.argv[2], float(sys.argv[3])
    words = sys.argv[4:]
    if "fixed" in words:
        from isaac_ppo.tasks.sim import warp_hfield_fix

        print("with the port's fix:", warp_hfield_fix.apply(mjw))
        words.remove("fixed")
    depth = float(words[0]) if words else DEPTH_M
    too_deep = -(depth + 0.003)  # (a contact reported deeper than this is not the body's true penetration)
    wp.config.log_level = wp.LOG_WARNING
    m, worlds = model(shape, ground, at), 512
    rng = np.random.default_rng(0)
    qpos = np.zeros((worlds, 7))
    qpos[:, :2] = at
    if ground == "map":
        qpos[:, :2] += rng.uniform(-0.1, 0.1, (worlds, 2))
    for i, tilt in enumerate(rng.uniform(-0.3, 0.3, (worlds, 3))):
        mujoco.mju_axisAngle2Quat(qpos[i, 3:], tilt / (np.linalg.norm(tilt) + 1e-12), np.linalg.norm(tilt))
    d = mujoco.MjData(m)
    c_count = c_down = c_deep = 0
    c_deepest = 0.0
    for i in range(worlds):
        d.qpos[:] = qpos[i]
        d.qpos[2] = 0.5
        mujoco.mj_kinematics(m, d)
        qpos[i, 2] = 0.5 - (lowest_z(m, d, shape) + depth)
        d.qpos[:] = qpos[i]
        mujoco.mj_forward(m, d)
        for k in range(d.ncon):
            c_count += 1
            c_down += d.contact[k].frame[2] < 0
            c_deep += d.contact[k].dist < too_deep
            c_deepest = min(c_deepest, d.contact[k].dist)
    mw, dw = mjw.put_model(m), mjw.make_data(m, nworld=worlds, nconmax=64, njmax=256)
    wp.to_torch(dw.qpos).copy_(torch.tensor(qpos, dtype=torch.float32))
    mjw.forward(mw, dw)
    n = int(dw.nacon.numpy()[0])
    normal_z, dist = dw.contact.frame.numpy()[:n, 0, 2], dw.contact.dist.numpy()[:n]
    print(f"{shape} on {ground} at ({at}, {at}) m, {worlds} worlds, {1000 * depth:g} mm in | MuJoCo: {c_count} "
          f"contacts, {c_down} with the normal down, deepest {c_deepest:.4f} m, {c_deep} deeper than "
          f"{-1000 * too_deep:g} mm | MuJoCo Warp: {n} contacts, {int((normal_z < 0).sum())} with the normal down, "
          f"deepest {float(dist.min()):.4f} m, {int((dist < too_deep).sum())} deeper than {-1000 * too_deep:g} mm")


if __name__ == "__main__":
    main()
