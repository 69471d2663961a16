"""The figure of AnymalTerrain's map (docs/tasks/legged.md): the curriculum map our code generates from a seed with
IsaacGymEnvs' parameters (cfg/task/AnymalTerrain.yaml), as heights seen from above, the cells' levels (rows, x) and
kinds (columns, y) marked, and the heights along the centre line of one column of each kind, level by level.

  python benchmarks/terrain_figure.py [--seed 0] [--out docs/media/anymal_terrain_map.png]
"""
from __future__ import annotations

import argparse
import os

import numpy as np
from omegaconf import OmegaConf

from isaac_ppo.tasks.legged import terrain as terrain_map

KINDS = ("smooth slope", "rough slope", "stairs down", "stairs up", "obstacles")


def kind_of_column(j: int, num_terrains: int, proportions) -> str:
    """The kind of terrain.curriculum_map gives column j (its cumulative proportions, stairs down first)."""
    bounds = np.cumsum(proportions)
    choice = j / num_terrains
    for kind, bound in zip(KINDS, bounds):
        if choice < bound:
            return kind
    return KINDS[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="docs/media/anymal_terrain_map.png")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    here = os.path.dirname(os.path.abspath(__file__))
    terrain = OmegaConf.load(os.path.join(here, "..", "cfg", "task", "AnymalTerrain.yaml")).env.terrain
    levels, kinds, proportions = int(terrain.numLevels), int(terrain.numTerrains), list(terrain.terrainProportions)
    length, width = float(terrain.mapLength), float(terrain.mapWidth)
    heights, origins = terrain_map.curriculum_map(levels, kinds, proportions, length, width, args.seed)
    metres = heights * terrain_map.VERTICAL_SCALE
    border = terrain_map.BORDER_M
    extent = (-border, kinds * width + border, levels * length + border, -border)  # (y across, x down)

    fig, (top, side) = plt.subplots(1, 2, figsize=(15, 6.5), gridspec_kw={"width_ratios": [1.45, 1]})
    image = top.imshow(metres, cmap="terrain", extent=extent, interpolation="nearest")
    fig.colorbar(image, ax=top, label="height (m)", shrink=0.8)
    for i in range(levels + 1):
        top.axhline(i * length, color="k", lw=0.3)
    for j in range(kinds + 1):
        top.axvline(j * width, color="k", lw=0.3)
    top.scatter(origins[..., 1].ravel(), origins[..., 0].ravel(), s=4, c="r", label="cell origins (robots start here)")
    top.set_xlabel("y (m): columns, one kind each")
    top.set_ylabel("x (m): rows, level 0 (easiest) at the top")
    top.set_title(f"AnymalTerrain's map, seed {args.seed}: {levels} levels x {kinds} columns of {length:g} m cells")
    top.legend(loc="lower right", fontsize=8)
    shown = {}
    for j in range(kinds):
        shown.setdefault(kind_of_column(j, kinds, proportions), j)
    row_x = np.arange(heights.shape[0]) * terrain_map.HORIZONTAL_SCALE - border
    for kind, j in shown.items():
        column = int((border + (j + 0.5) * width) / terrain_map.HORIZONTAL_SCALE)
        side.plot(row_x, metres[:, column], lw=0.8, label=f"{kind} (column {j})")
    for i in range(levels + 1):
        side.axvline(i * length, color="k", lw=0.3)
    side.set_xlim(-2, levels * length + 2)
    side.set_xlabel("x (m) along the column's centre line: levels 0 to 9")
    side.set_ylabel("height (m)")
    side.set_title("one column of each kind: difficulty grows with the level")
    side.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
