"""A fix for MuJoCo Warp 4.0.0's height-field contact depths, applied before its kernels are built (issue 46).

MuJoCo Warp reports a geom's contact with a height-field prism through a witness point that it rebuilds from the
prism's top triangle (collision_gjk.py: ``_inflate`` for shallow contacts, ``_epa_witness`` for deep ones). In 4.0.0
that step has two faults (found by measurement: benchmarks/mjwarp_hfield_contacts.py;
benchmarks/history/anymal-terrain.md, "AnymalTerrain: throughput", its paragraph "The cause found: a foot whose
centre sinks below the field"):

1. ``_tri_affine_coord(a, b, c, x2)`` is given the triangle's vertices in the field's frame, up to ~100 m from its
   centre on AnymalTerrain's map; the products it subtracts (~4,500) cancel in float32 to a cell's 0.005 m2 area,
   the barycentric weights no longer sum to 1, and the witness lands metres away: a foot sphere whose centre dips
   below the surface was reported up to 39 m deep, and the constraint force threw the robot (the task's divergences).
   Barycentric coordinates do not change under translation, so they are computed relative to the witness point.
2. The witness on the other geom is its support point in the direction of a *position* (x2, or x2 normalised),
   where the direction into the field, -n, is meant: for a box or a capsule an arbitrary corner or end (a box 2 mm
   in was reported ~10 cm deep). Taken along -n.

Both branches run only for height-field contacts, so no other model changes. The patch is applied only where the
exact 4.0.0 lines are found (a later release that changes them is left as it is); it rewrites the two functions'
source in their module, as if the fix had been made there, and warp compiles the patched source (the kernel cache
keys on it). Measured with the fix: the AnymalTerrain robot at the map's border under random actions, 0 blow-ups
in 16 worlds x 30 control steps (19 without it); the benchmark's sphere, capsule and box cases at 2 to 60 mm deep
within 3 mm of the true depth.
"""
from __future__ import annotations

import inspect
import linecache

FIXED_VERSION = "4.0.0"  # the release whose source the replacements below were read from

COORDINATES = ("_tri_affine_coord(a, b, c, x2)",
               "_tri_affine_coord(a - x2, b - x2, c - x2, wp.vec3(0.0, 0.0, 0.0))")
REPLACEMENTS = {
    "_inflate": [
        ("sp = support(geom2, geomtype2, x2)", "sp = support(geom2, geomtype2, -n)"),
        ("coordinates = " + COORDINATES[0], "coordinates = " + COORDINATES[1]),
    ],
    "_epa_witness": [
        ("      sp = support(geom2, geomtype2, x2)\n      x2 = sp.point - (0.5 * margin + radius) * n",
         "      sp = support(geom2, geomtype2, -n)\n      x2 = sp.point - (0.5 * margin + radius) * n"),
        ("      x2 = wp.normalize(x2)\n      sp = support(geom2, geomtype2, x2)",
         "      sp = support(geom2, geomtype2, -n)"),
        ("coordinates2 = " + COORDINATES[0], "coordinates2 = " + COORDINATES[1]),
    ],
}

_applied = None  # None: not tried yet; then whether the fix is in


def apply(mjw) -> bool:
    """Patch mujoco_warp (the imported package) once, before any kernel is built. True if the fix is in."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if getattr(mjw, "__version__", None) != FIXED_VERSION:
        return False
    from mujoco_warp._src import collision_gjk

    sources = {}
    for name, replacements in REPLACEMENTS.items():
        source = inspect.getsource(getattr(collision_gjk, name).func)
        for old, new in replacements:
            if source.count(old) != 1:
                return False  # not the source this fix was written for: leave the package as it is
            source = source.replace(old, new)
        sources[name] = source
    for name, source in sources.items():
        filename = f"<isaac_ppo warp_hfield_fix: collision_gjk.{name}>"
        # warp's code generator reads a function's source back through linecache
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), collision_gjk.__dict__)
    _applied = True
    return True
