"""What each task's model adds to MuJoCo Warp's kernel compile on an empty cache (the suite's cold-cache cost).

MuJoCo Warp builds some kernels per model (the Cholesky and constraint kernels by the number of dofs, the narrow
phase by the geom pairs it meets, the convex and height-field collision kernels by geom type, tendons, sensors): a
fresh machine compiles them the first time each model steps, and the suite's sim=mjwarp tests pay it inside their
own time. This script makes each named task's env on Warp's CPU device (4 envs), resets and steps it once, in the
order given, all into one fresh kernel cache (a temporary folder, removed at the end), so each row is what that model
adds to the models before it; the first row includes the kernels every model shares.

  python benchmarks/mjwarp_compile_cost.py Cartpole Ant Ingenuity Quadcopter FrankaCubeStack AnymalTerrain \\
      ShadowHand AllegroHand

One JSON line a task: its seconds (make + reset + one step, nearly all compile), the modules in the cache after
it, and the milliseconds of one control step once compiled (the mean of 20 more: what the optimisation level costs
at run time). `--opt-level N` compiles at Warp's optimisation level N (0-3; Warp's default for the CPU is 2): the
trade of compile time against run time that ISAAC_PPO_WARP_OPT_LEVEL makes (tasks/sim/warp.py). Run it alone on
the machine (a compile is CPU-bound) and with CUDA hidden (CUDA_VISIBLE_DEVICES=) on a GPU node to measure the CPU
device.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time


def main(tasks: list, opt_level=None) -> None:
    import warp as wp

    with tempfile.TemporaryDirectory(prefix="warp_cache_") as cache:
        wp.config.kernel_cache_dir = cache  # (before any module loads: every kernel is compiled into it)
        import torch

        from isaac_ppo.envs import make
        from isaac_ppo.tasks.sim.warp import OPT_LEVEL_VARIABLE

        if opt_level is not None:  # (read when the first env imports Warp's backend)
            os.environ[OPT_LEVEL_VARIABLE] = str(opt_level)

        for task in tasks:
            started = time.perf_counter()
            env = make(task, 4, sim="mjwarp", seed=0)
            env.reset()
            actions = torch.zeros(4, env.num_actions)
            env.step(actions)
            seconds = time.perf_counter() - started
            started = time.perf_counter()
            for _ in range(20):
                env.step(actions)
            step_ms = (time.perf_counter() - started) / 20 * 1e3
            modules = sum(len(os.listdir(os.path.join(cache, d))) for d in os.listdir(cache)
                          if os.path.isdir(os.path.join(cache, d)))
            print(json.dumps({"task": task, "opt_level": opt_level, "seconds": round(seconds, 1),
                              "modules_in_cache": modules, "step_ms": round(step_ms, 2)}), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    level = None
    if args[:1] == ["--opt-level"] and len(args) > 1 and args[1] in ("0", "1", "2", "3"):
        level, args = int(args[1]), args[2:]
    if not args:
        sys.exit("usage: python benchmarks/mjwarp_compile_cost.py [--opt-level 0-3] TASK [TASK ...] (the first pays "
                 "the shared kernels)")
    main(args, level)
