"""Does an AnymalTerrain policy climb stairs, and how high? Every robot starts in a stairs pit (IsaacGymEnvs' third
kind of terrain: square rings 0.3 m wide, each a step above the one inside it, around a 3 m platform at the bottom),
envs_per_level robots on each of the map's levels (level L: steps of 0.05 + 0.0175 L m, 9 of them to the top), under
the task's random velocity commands, pushes and observation noise, playing the checkpoint's mean action for one
episode (up to --steps control steps, 20 ms each). One JSON line a level: the robots that reached the top (walked
farther than half a cell, 4 m, from the pit's centre: the curriculum's own test for moving a level up), the median
and largest rise of the base above its start (m) and the steps that rise is at that level; a last line with the
checkpoint's iteration and env steps.

  python benchmarks/stairs_climb.py RUN/checkpoints/last.pt [--envs-per-level 8] [--steps 1000] [--seed 0]

It reads the run's config.yaml (beside checkpoints/) and changes only the terrain: every column a stairs pit
(terrainProportions [0, 0, 1, 0, 0]) and the curriculum off (no level moves; every level populated round-robin).
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch

STAIRS_PIT = [0, 0, 1, 0, 0]  # terrainProportions: every column the third kind (IsaacGymEnvs' stairs with negative steps)


def main() -> None:
    from omegaconf import OmegaConf

    from isaac_ppo.envs.make import make
    from isaac_ppo.io import checkpoint
    from isaac_ppo.loop.evaluate import mean_action
    from isaac_ppo.loop.play import load_checkpoint_model, run_config
    from isaac_ppo.tasks.legged.terrain import stairs_step_m

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--envs-per-level", type=int, default=8)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)

    cfg = OmegaConf.load(run_config(args.checkpoint))
    task_cfg = OmegaConf.to_container(cfg.task, resolve=True)
    task_cfg.pop("eval_env", None)
    task_cfg["env"]["terrain"].update(terrainProportions=STAIRS_PIT, curriculum=False)
    levels = int(task_cfg["env"]["terrain"]["numLevels"])
    half_cell_m = float(task_cfg["env"]["terrain"]["mapLength"]) / 2
    n = levels * args.envs_per_level
    env = make("AnymalTerrain", n, sim="mujoco", seed=args.seed, task_cfg=task_cfg)
    # every level populated (the curriculum-off draw is random): the task places each robot at its cell's origin
    env.levels = torch.arange(n) % levels
    env.env_origins = env.cell_origin_table[env.levels, env.types]

    policy = mean_action(load_checkpoint_model(cfg, env, args.checkpoint))

    obs = env.reset()["obs"]
    centre, start_z = env.env_origins[:, :2].clone(), env.qpos[:, 2].clone()
    farthest_m, rise_m = torch.zeros(n), torch.zeros(n)
    playing = torch.ones(n, dtype=torch.bool)  # (each robot's first episode only)
    with torch.no_grad():
        for _ in range(args.steps):
            out, _, resets, _ = env.step(policy(obs))
            obs = out["obs"]
            farthest_m = torch.where(playing, torch.maximum(farthest_m, (env.qpos[:, :2] - centre).norm(dim=1)),
                                     farthest_m)
            rise_m = torch.where(playing, torch.maximum(rise_m, env.qpos[:, 2] - start_z), rise_m)
            playing &= ~resets.bool()
    for level in range(levels):
        mine = env.levels == level
        rises = rise_m[mine].tolist()
        step = stairs_step_m(level / levels)
        print(json.dumps({"level": level, "step_m": round(step, 4), "robots": int(mine.sum()),
                          "reached_top": int((farthest_m[mine] > half_cell_m).sum()),
                          "rise_m_median": round(statistics.median(rises), 3), "rise_m_max": round(max(rises), 3),
                          "steps_climbed_median": round(statistics.median(rises) / step, 1)}))
    counters = checkpoint.load(args.checkpoint).get("counters", {})
    print(json.dumps({"checkpoint": args.checkpoint, "iteration": counters.get("iteration"),
                      "env_steps": counters.get("env_steps"), "steps": args.steps, "seed": args.seed}))


if __name__ == "__main__":
    main()
